package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"lemon/cmd/lemon/internal/lemontest"
	"lemon/host/hosttest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	// lemonBin is the binary TestMain built from lemon/cmd/lemon.
	lemonBin string
	// wazeroCache is shared by every node state directory of the run
	// (through a symlink), so only the first node compiles the module set.
	wazeroCache string
	// tmpRoot holds the binary, the shared cache and the benchmarks' state.
	tmpRoot string
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	b, err := lemontest.Setup("lemon-e2e-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer b.Cleanup()
	lemonBin, wazeroCache, tmpRoot = b.Bin, b.WazeroCache, b.Dir
	code := m.Run()
	stopSharedDevs()
	return code
}

// Bounds on waits. They never decide a pass on speed: the first node of a
// run compiles the module set, tens of seconds on a loaded 2-core machine.
const (
	readyWait = 4 * time.Minute
	exitWait  = 30 * time.Second
	callWait  = 2 * time.Minute
)

// syncBuffer collects a process's output, safe for concurrent writes.
type syncBuffer = hosttest.LogBuffer

// tb is what the harness needs of *testing.T and *testing.B.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// proc is one running lemon subprocess. Its stdout and stderr are kept
// apart: both are searched for secrets, stdout is parsed.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
	err            error // cmd.Wait's result, set before done closes
}

// env is the whole environment of a subprocess: nothing is inherited but
// PATH, so no LEMON_* variable of the caller leaks in. XDG_STATE_HOME keeps
// a controller's default state directory inside home even when the tests
// run as root (where it would be /var/lib/lemon).
func env(home string, extra ...string) []string {
	return append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + os.TempDir(),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state")}, extra...)
}

// start runs lemon with args in dir; t's cleanup kills and waits for it.
func start(t tb, name, dir string, environ []string, args ...string) *proc {
	t.Helper()
	p, err := launch(name, dir, environ, args...)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(p.kill)
	return p
}

// launch starts lemon with args in dir; the caller stops it.
func launch(name, dir string, environ []string, args ...string) (*proc, error) {
	p := &proc{name: name, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(lemonBin, args...)
	p.cmd.Dir = dir
	p.cmd.Env = environ
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) output() string { return p.stdout.String() + p.stderr.String() }

// wait waits for the process to exit by itself and returns its exit code
// (-1 when a signal ended it).
func (p *proc) wait(t tb) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(exitWait):
		t.Fatalf("%s did not exit within %s\n%s", p.name, exitWait, p.output())
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		return -1
	}
	return 0
}

// signal sends sig and waits for the exit code.
func (p *proc) signal(t tb, sig syscall.Signal) int {
	t.Helper()
	if !p.exited() {
		p.cmd.Process.Signal(sig)
	}
	return p.wait(t)
}

func (p *proc) kill() {
	if !p.exited() {
		p.cmd.Process.Kill()
	}
	<-p.done
}

// waitFor waits until stdout+stderr match re and returns the submatches.
func (p *proc) waitFor(t tb, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	m, err := p.waitForE(re, timeout)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return m
}

func (p *proc) waitForE(re *regexp.Regexp, timeout time.Duration) ([]string, error) {
	deadline := time.Now().Add(timeout)
	for {
		exited := p.exited()
		if m := re.FindStringSubmatch(p.output()); m != nil {
			return m, nil
		}
		if exited {
			return nil, fmt.Errorf("%s exited before printing %q\n%s", p.name, re, p.output())
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s did not print %q in %s\n%s", p.name, re, timeout, p.output())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// result is a finished `lemon` command.
type result struct {
	stdout, stderr string
	code           int
	cpu            time.Duration // user + system CPU time of the process
}

// run runs lemon with args to completion, stdin from in (may be nil).
func run(t tb, dir string, environ []string, in []byte, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, lemonBin, args...)
	cmd.Dir = dir
	cmd.Env = environ
	if in != nil {
		cmd.Stdin = bytes.NewReader(in)
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	r := result{stdout: o.String(), stderr: e.String()}
	if cmd.ProcessState != nil {
		r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("lemon %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// newStateDir makes a node state directory whose compilation cache is the
// run's shared one.
func newStateDir(t tb, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("%v", err)
	}
	if err := os.Symlink(wazeroCache, filepath.Join(dir, "wazero-cache")); err != nil {
		t.Fatalf("%v", err)
	}
	return dir
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// operator runs `lemon call` against one controller with one token.
type operator struct {
	url, token, home string
	// outputs of every call, for the secret searches.
	mu      sync.Mutex
	outputs []string
}

func newOperator(t tb, url, token string) *operator {
	home := filepath.Join(t.TempDir(), "operator-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatalf("%v", err)
	}
	return &operator{url: url, token: token, home: home}
}

// call runs `lemon call --controller URL METHOD PARAMS`; params is any
// JSON-encodable value, sent on stdin ("-") so no argument carries it.
func (o *operator) call(t tb, method string, params any) result {
	t.Helper()
	b, err := json.Marshal(params)
	if err != nil {
		t.Fatalf("%v", err)
	}
	r := run(t, o.home, env(o.home, "LEMON_OPERATOR_TOKEN="+o.token), b, "call", "--controller", o.url, method, "-")
	o.mu.Lock()
	o.outputs = append(o.outputs, r.stdout+r.stderr)
	o.mu.Unlock()
	return r
}

// must is call that fails the test unless it exits 0; it returns the
// payload decoded into a map.
func (o *operator) must(t tb, method string, params any) map[string]any {
	t.Helper()
	r := o.call(t, method, params)
	if r.code != 0 {
		t.Fatalf("lemon call %s: exit %d\nstdout: %s\nstderr: %s", method, r.code, r.stdout, r.stderr)
	}
	return decodeObject(t, r.stdout)
}

// callError is call that expects an error response: exit 1 and the error
// object on stderr.
func (o *operator) callError(t tb, method string, params any) errObject {
	t.Helper()
	r := o.call(t, method, params)
	if r.code != 1 || r.stdout != "" {
		t.Fatalf("lemon call %s: want exit 1 and empty stdout, got exit %d\nstdout: %s\nstderr: %s", method, r.code, r.stdout, r.stderr)
	}
	return decodeError(t, r.stderr)
}

// errObject is an error object as `lemon call` prints it.
type errObject struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

func (e errObject) detail(k string) any { return e.Details[k] }

func decodeError(t tb, s string) errObject {
	t.Helper()
	var e errObject
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Code == "" {
		t.Fatalf("not an error object: %q (%v)", s, err)
	}
	return e
}

func decodeObject(t tb, s string) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		t.Fatalf("not a JSON object: %q (%v)", s, err)
	}
	return m
}

// wantExactly fails unless got has exactly the keys and values of want
// (a JSON text).
func wantExactly(t tb, what string, got map[string]any, want string) {
	t.Helper()
	w := decodeObject(t, want)
	if !reflect.DeepEqual(got, w) {
		gb, _ := json.Marshal(got)
		t.Fatalf("%s:\n got  %s\n want %s", what, gb, want)
	}
}

func num(t tb, m map[string]any, k string) uint64 {
	t.Helper()
	n, ok := m[k].(json.Number)
	if !ok {
		t.Fatalf("%s is not a number: %v", k, m[k])
	}
	v, err := strconv.ParseUint(n.String(), 10, 64)
	if err != nil {
		t.Fatalf("%s is not a non-negative integer: %v", k, n)
	}
	return v
}

// canaryForms returns the byte strings that would reveal c: itself, its
// hex (both cases), and the part of its standard and URL base64 that does
// not depend on the bytes around it, at each of the three alignments.
func canaryForms(c string) map[string][]byte {
	forms := map[string][]byte{
		"plaintext": []byte(c),
		"hex":       []byte(hex.EncodeToString([]byte(c))),
		"HEX":       []byte(strings.ToUpper(hex.EncodeToString([]byte(c)))),
	}
	for _, enc := range []struct {
		name string
		e    *base64.Encoding
	}{{"base64", base64.StdEncoding}, {"base64url", base64.URLEncoding}} {
		for k := 0; k < 3; k++ {
			s := enc.e.EncodeToString(append(bytes.Repeat([]byte{0}, k), c...))
			// Drop the quantum shared with the prefix (k > 0) and the last
			// quantum, which depends on what follows.
			from := 0
			if k > 0 {
				from = 4
			}
			forms[fmt.Sprintf("%s@%d", enc.name, k)] = []byte(s[from : len(s)-4])
		}
	}
	return forms
}

// leak is one finding: where a canary showed up, in which form.
type leak struct{ where, canary, form string }

func (l leak) String() string { return fmt.Sprintf("%s holds the %s (%s)", l.where, l.canary, l.form) }

// findCanaries searches text for every form of every canary
// (name → value).
func findCanaries(where string, text []byte, canaries map[string]string) []leak {
	var out []leak
	for name, c := range canaries {
		for form, b := range canaryForms(c) {
			if bytes.Contains(text, b) {
				out = append(out, leak{where, name, form})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// scanTree searches every regular file under dir (symlinks not followed)
// and returns the findings plus the number of files read.
func scanTree(t tb, dir string, canaries map[string]string) ([]leak, int) {
	t.Helper()
	var out []leak
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(dir, path)
		out = append(out, findCanaries("file "+rel, b, canaries)...)
		return nil
	})
	if err != nil {
		t.Fatalf("scan %s: %v", dir, err)
	}
	return out, files
}

// procInfo is one process of /proc.
type procInfo struct {
	pid, ppid int
	state     string
	comm      string
	start     uint64 // start time in clock ticks since boot
}

// readProc returns pid's /proc stat, or false when it does not exist.
func readProc(pid int) (procInfo, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procInfo{}, false
	}
	s := string(b)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return procInfo{}, false
	}
	f := strings.Fields(s[close+1:])
	if len(f) < 20 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	st, _ := strconv.ParseUint(f[19], 10, 64)
	return procInfo{pid: pid, ppid: ppid, state: f[0], comm: s[open+1 : close], start: st}, true
}

// cpuTime is the user + system CPU time pid has used so far (from
// /proc/PID/stat, in USER_HZ = 100 ticks a second), or 0 if unknown.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	k, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond
}

// descendants lists every live process below pid.
func descendants(pid int) []procInfo {
	ents, _ := os.ReadDir("/proc")
	children := map[int][]procInfo{}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pi, ok := readProc(n); ok {
			children[pi.ppid] = append(children[pi.ppid], pi)
		}
	}
	var out []procInfo
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// alive reports whether the process recorded in pi still runs (a zombie
// or a reused pid counts as gone).
func alive(pi procInfo) bool {
	now, ok := readProc(pi.pid)
	return ok && now.start == pi.start && now.state != "Z" && now.state != "X"
}

// eventually polls cond every 25 ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(25 * time.Millisecond)
	}
}
