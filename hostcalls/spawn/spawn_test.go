package spawn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lemon/hostcalls/store"
	"lemon/protocol"
)

func TestCompletedReceiptCarriesExactStreams(t *testing.T) {
	f := newFixture(t, nil)
	r := req("probe:fixed-1", "sh", "-c", "cat; printf 'diagnostic\\n' >&2")
	r.Stdin = []byte("Hello\n")
	rc := f.mustRun(r)
	if rc.State != protocol.ProcessStateCompleted || exitOf(rc) != "0" || string(rc.Stdout) != "Hello\n" ||
		string(rc.Stderr) != "diagnostic\n" || rc.OutputTruncated {
		t.Fatalf("receipt %+v stdout %q stderr %q", rc, rc.Stdout, rc.Stderr)
	}
}

func TestExitStatusAndEmptyOutputs(t *testing.T) {
	f := newFixture(t, nil)
	rc := f.mustRun(req("e3", "sh", "-c", "exit 3"))
	if rc.State != protocol.ProcessStateCompleted || exitOf(rc) != "3" {
		t.Fatalf("receipt %+v", rc)
	}
	// Known zero bytes are empty, not unknown.
	if rc.Stdout == nil || rc.Stderr == nil || len(rc.Stdout) != 0 || len(rc.Stderr) != 0 || rc.OutputTruncated {
		t.Fatalf("empty outputs %+v", rc)
	}
	// A process killed by a signal it did not get from us: completed,
	// exit code minus the signal number.
	rc = f.mustRun(req("self-kill", "sh", "-c", "kill -TERM $$"))
	if rc.State != protocol.ProcessStateCompleted || exitOf(rc) != "-15" {
		t.Fatalf("self-signalled receipt %+v", rc)
	}
}

func TestEmptyStdinIsEOF(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxPayload = 4 << 20 })
	rc := f.mustRun(req("cat-empty", "cat"))
	if rc.State != protocol.ProcessStateCompleted || exitOf(rc) != "0" || len(rc.Stdout) != 0 {
		t.Fatalf("%+v", rc)
	}
	// Large stdin is delivered exactly.
	big := bytes.Repeat([]byte{0, 1, 2, 0xff}, 256*1024) // 1 MiB
	r := req("cat-big", "cat")
	r.Stdin = big
	rc = f.mustRun(r)
	if !bytes.Equal(rc.Stdout, big) || rc.OutputTruncated {
		t.Fatalf("1 MiB stdin round trip: got %d bytes truncated=%v", len(rc.Stdout), rc.OutputTruncated)
	}
}

func TestArgvIsLiteral(t *testing.T) {
	f := newFixture(t, nil)
	rc := f.mustRun(req("argv", "printf", "%s|", "", "a b", `'"$HOME*`, "é", "; rm -rf /"))
	want := `|a b|'"$HOME*|é|; rm -rf /|`
	if string(rc.Stdout) != want {
		t.Fatalf("stdout %q, want %q", rc.Stdout, want)
	}
	// argv[0] reaches the program as sent.
	rc = f.mustRun(req("argv0", "sh", "-c", `printf %s "$0"`))
	if string(rc.Stdout) != "sh" {
		t.Fatalf("$0 = %q", rc.Stdout)
	}
}

func TestEnvironmentIsFixed(t *testing.T) {
	t.Setenv("LEMON_CANARY_TOKEN", "worker-secret")
	f := newFixture(t, nil)
	rc := f.mustRun(req("env", "env"))
	want := "PATH=/usr/bin:/bin\nHOME=" + f.root + "\nLANG=C.UTF-8\n"
	if string(rc.Stdout) != want {
		t.Fatalf("env %q, want %q", rc.Stdout, want)
	}
}

func TestOnlyStdioInherited(t *testing.T) {
	f := newFixture(t, nil)
	// An open descriptor of the worker (the store file is one) must not
	// reach the child.
	rc := f.mustRun(req("fds", "ls", "/proc/self/fd"))
	got := strings.Fields(string(rc.Stdout))
	// ls itself opens one descriptor to read the directory.
	if len(got) > 4 {
		t.Fatalf("child descriptors %v", got)
	}
	for _, fd := range got {
		n, _ := strconv.Atoi(fd)
		if n > 3 {
			t.Fatalf("child inherited descriptor %d (all: %v)", n, got)
		}
	}
}

func TestCwdIsTheAdmittedDescriptor(t *testing.T) {
	f := newFixture(t, nil)
	sub := filepath.Join(f.root, "sub")
	os.Mkdir(sub, 0o700)
	r := req("pwd", "pwd", "-P")
	r.Cwd = "sub"
	rc := f.mustRun(r)
	if string(rc.Stdout) != sub+"\n" {
		t.Fatalf("pwd %q, want %q", rc.Stdout, sub)
	}
	// The descriptor decides, not the returned path string.
	f.s.cfg.Dirs = lyingDirs{fdOf: sub}
	r = req("pwd2", "pwd", "-P")
	r.Cwd = "elsewhere"
	rc = f.mustRun(r)
	if string(rc.Stdout) != sub+"\n" {
		t.Fatalf("pwd %q, want the descriptor's directory %q", rc.Stdout, sub)
	}
	// Refused cwd: the resolver's error, nothing spent.
	f.s.cfg.Dirs = testDirs{root: f.root}
	r = req("outside", "true")
	r.Cwd = "/"
	if _, err := f.run(r); domain(err) != "FORBIDDEN/path_not_allowed" {
		t.Fatalf("outside cwd: %v", err)
	}
	if rc, _ := f.s.Get("outside"); rc.State != protocol.ProcessStateNotFound {
		t.Fatalf("refused run spent its id: %+v", rc)
	}
}

// lyingDirs returns a descriptor of fdOf and a canonical path that does not
// exist.
type lyingDirs struct{ fdOf string }

func (d lyingDirs) OpenDir(string) (int, string, error) {
	fd, err := unix.Open(d.fdOf, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	return fd, "/nonexistent/elsewhere", err
}

func TestInvalidUTF8OutputIsByteExact(t *testing.T) {
	f := newFixture(t, nil)
	rc := f.mustRun(req("bytes", "printf", `\377\376\000abc\300\n`))
	want := []byte{0xff, 0xfe, 0x00, 'a', 'b', 'c', 0xc0, '\n'}
	if !bytes.Equal(rc.Stdout, want) {
		t.Fatalf("stdout % x, want % x", rc.Stdout, want)
	}
}

func TestOutputCapIsCombined(t *testing.T) {
	f := newFixture(t, nil)
	// Exactly at the cap: complete, not truncated.
	r := req("at-cap", "sh", "-c", "printf 12345; printf 67890 >&2")
	r.MaxOutputBytes = 10
	rc := f.mustRun(r)
	if rc.State != protocol.ProcessStateCompleted || len(rc.Stdout)+len(rc.Stderr) != 10 || rc.OutputTruncated {
		t.Fatalf("at cap: %+v", rc)
	}
	// One byte over: truncated to the cap.
	r = req("over-cap", "sh", "-c", "printf 12345; printf 678901 >&2")
	r.MaxOutputBytes = 10
	rc = f.mustRun(r)
	if len(rc.Stdout)+len(rc.Stderr) != 10 || !rc.OutputTruncated || rc.ExitCode == nil {
		t.Fatalf("one over: %+v", rc)
	}
	// A flood: the group is stopped once the cap is passed.
	r = req("flood", "sh", "-c", "yes & yes >&2; wait")
	r.MaxOutputBytes = 100
	h, _, err := f.s.Start(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	rc, _ = h.Result()
	if rc.State != protocol.ProcessStateCancelled || exitOf(rc) != "-9" || !rc.OutputTruncated ||
		len(rc.Stdout)+len(rc.Stderr) != 100 {
		t.Fatalf("flood: %+v (%d+%d bytes)", rc, len(rc.Stdout), len(rc.Stderr))
	}
	if live := groupGone(t, h.r.pgid); len(live) != 0 {
		t.Fatalf("group members alive after overflow: %v", live)
	}
	if h.r.terminal.Reason != reasonOverflow {
		t.Fatalf("reason %q", h.r.terminal.Reason)
	}
}

func TestPayloadBudgetCapsOutput(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxPayload = 8192 })
	r := req("budget", "head", "-c", "100000", "/dev/zero")
	rc := f.mustRun(r)
	if len(rc.Stdout) != protocol.ProcessOutputBudget(8192) || !rc.OutputTruncated {
		t.Fatalf("budgeted output %d bytes, truncated %v", len(rc.Stdout), rc.OutputTruncated)
	}
}

func TestTimeoutKillsGroupHoldingStdout(t *testing.T) {
	// Margins for a loaded machine: the shell must print the grandchild's
	// pid before the timeout, and the killed grandchild must close stdout
	// within WaitDelay for the output to count as complete.
	f := newFixture(t, func(cfg *Config) { cfg.WaitDelay = 2 * time.Second })
	// The child forks a grandchild that holds stdout, then waits too.
	r := req("grandchild", "sh", "-c", "sleep 30 & echo $!; sleep 30")
	r.timeout = 2 * time.Second
	h, _, err := f.s.Start(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := h.Result()
	if err != nil {
		t.Fatal(err)
	}
	if rc.State != protocol.ProcessStateCancelled || exitOf(rc) != "-9" || rc.OutputTruncated {
		t.Fatalf("receipt %+v", rc)
	}
	gpid, _ := strconv.Atoi(strings.TrimSpace(string(rc.Stdout)))
	if gpid <= 0 || !gone(gpid) {
		t.Fatalf("grandchild %d still alive (stdout %q)", gpid, rc.Stdout)
	}
	if live := groupGone(t, h.r.pgid); len(live) != 0 {
		t.Fatalf("group %d still has %v", h.r.pgid, live)
	}
	if h.r.terminal.Reason != reasonTimeout {
		t.Fatalf("reason %q", h.r.terminal.Reason)
	}
}

func TestGrandchildHoldingPipeAfterExitCannotHangWait(t *testing.T) {
	f := newFixture(t, nil)
	// The leader exits at once; its background grandchild keeps stdout.
	r := req("daemonish", "sh", "-c", "sleep 30 & echo $!")
	h, _, err := f.s.Start(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := h.Result()
	if err != nil {
		t.Fatal(err)
	}
	// Its own exit was observed; output may be incomplete (pipes were
	// closed after WaitDelay) and the group was cleaned up.
	if rc.State != protocol.ProcessStateCompleted || exitOf(rc) != "0" || !rc.OutputTruncated {
		t.Fatalf("receipt %+v", rc)
	}
	gpid, _ := strconv.Atoi(strings.TrimSpace(string(rc.Stdout)))
	if gpid <= 0 || !gone(gpid) {
		t.Fatalf("grandchild %d alive", gpid)
	}
	if live := groupGone(t, h.r.pgid); len(live) != 0 {
		t.Fatalf("group still has %v", live)
	}
}

func TestSignalsGroupAtMostOnce(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	f := newFixture(t, nil)
	f.s.killFn = func(r *run) error {
		mu.Lock()
		calls++
		mu.Unlock()
		return r.killMembers()
	}
	r := req("once", "sh", "-c", "sleep 30 & yes; wait")
	r.MaxOutputBytes = 10
	r.timeout = 50 * time.Millisecond
	h, _, err := f.s.Start(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	h.Result()
	// Overflow, timeout, a cancel and pipe cleanup all converge on one
	// signal.
	f.s.Cancel("once", 0)
	h.r.stop(reasonCancel)
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Fatalf("group signalled %d times", calls)
	}
}

func TestFirstSignalFailureIsAnError(t *testing.T) {
	f := newFixture(t, nil)
	f.s.killFn = func(*run) error { return unix.EPERM }
	r := req("eperm", "sleep", "0.3")
	r.timeout = 20 * time.Millisecond
	h, _, err := f.s.Start(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Result()
	if domain(err) != "INTERNAL_ERROR/process_signal_failed" {
		t.Fatalf("result error %v", err)
	}
	pe := err.(*protocol.Error)
	if *pe.Details.RetrySafe || !*pe.Details.MutationMayHaveApplied {
		t.Fatalf("retry details %+v", pe.Details)
	}
	rc, _ := f.s.Get("eperm")
	if rc.State != protocol.ProcessStateOutcomeUnknown || rc.ExitCode != nil || rc.Stdout != nil || !rc.OutputTruncated {
		t.Fatalf("get after failed stop: %+v", rc)
	}
}

func TestStartFailuresAreErrorsAndSpendNothing(t *testing.T) {
	f := newFixture(t, nil)
	noexec := filepath.Join(f.root, "noexec")
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o600)
	garbage := filepath.Join(f.root, "garbage")
	os.WriteFile(garbage, []byte("\x00\x01\x02 not a program"), 0o700)
	cases := []struct {
		id   string
		argv []string
		want string
	}{
		{"missing", []string{"lemon-no-such-command"}, "NOT_FOUND/executable_not_found"},
		{"missing-abs", []string{"/nonexistent/cmd"}, "NOT_FOUND/executable_not_found"},
		{"not-exec", []string{noexec}, "FORBIDDEN/permission_denied"},
		{"dir", []string{"/usr"}, "FORBIDDEN/permission_denied"},
		{"format", []string{garbage}, "INVALID_PARAMS/exec_format_error"},
	}
	for _, c := range cases {
		_, err := f.run(req(c.id, c.argv...))
		if domain(err) != c.want {
			t.Errorf("%s: %v, want %s", c.id, err, c.want)
			continue
		}
		pe := err.(*protocol.Error)
		if !*pe.Details.RetrySafe || *pe.Details.MutationMayHaveApplied {
			t.Errorf("%s: retry details %+v", c.id, pe.Details)
		}
		if strings.Contains(pe.Message, "/") || strings.Contains(pe.Message, "lemon-no-such") {
			t.Errorf("%s: message leaks: %q", c.id, pe.Message)
		}
		if rc, _ := f.s.Get(c.id); rc.State != protocol.ProcessStateNotFound {
			t.Errorf("%s: id spent: %+v", c.id, rc)
		}
	}
	// The largest valid argv runs.
	big := req("argv-max", "true", strings.Repeat("a", protocol.ProcessArgvMaxBytes-4))
	if rc := f.mustRun(big); rc.State != protocol.ProcessStateCompleted {
		t.Fatalf("largest argv %+v", rc)
	}
	// With a small stack limit the kernel's argument space shrinks to
	// 128 KiB, so the same argv (plus its NULs and environment) is E2BIG.
	var old unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_STACK, &old)
	small := old
	small.Cur = 256 << 10
	if err := unix.Setrlimit(unix.RLIMIT_STACK, &small); err != nil {
		t.Skip("cannot lower RLIMIT_STACK")
	}
	big.ProcessID = "e2big"
	_, err := f.run(big)
	unix.Setrlimit(unix.RLIMIT_STACK, &old)
	if domain(err) != "INVALID_PARAMS/argument_list_too_long" {
		t.Fatalf("e2big: %v", err)
	}
	if rc, _ := f.s.Get("e2big"); rc.State != protocol.ProcessStateNotFound {
		t.Fatalf("E2BIG spent the id: %+v", rc)
	}
}

func TestCommandPolicy(t *testing.T) {
	copyDir := t.TempDir()
	fake := filepath.Join(copyDir, "printf")
	os.Symlink("/usr/bin/cat", fake)
	// A tool and a hard link to it under another name and directory, and
	// a byte-for-byte copy (a different file).
	toolDir, linkDir := t.TempDir(), t.TempDir()
	tool, alias, clone := filepath.Join(toolDir, "tool"), filepath.Join(linkDir, "alias"), filepath.Join(linkDir, "clone")
	script := []byte("#!/bin/sh\nexit 0\n")
	if err := os.WriteFile(tool, script, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(tool, alias); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(clone, script, 0o755); err != nil {
		t.Fatal(err)
	}
	empty := []string{}
	some := []string{"printf", "/usr/bin/env"}
	all := []string{"all"}
	cases := []struct {
		name    string
		allowed *[]string
		blocked []string
		argv0   string
		ok      bool
	}{
		{"nil allows", nil, nil, "cat", true},
		{"all allows", &all, nil, "cat", true},
		{"empty allows none", &empty, nil, "true", false},
		{"allowed by name", &some, nil, "printf", true},
		{"allowed name covers its resolved path", &some, nil, "/usr/bin/printf", true},
		{"not listed", &some, nil, "cat", false},
		{"allowed by path", &some, nil, "env", true},
		{"name does not allow a look-alike", &some, nil, fake, false},
		{"blocked by name", nil, []string{"cat"}, "/usr/bin/cat", false},
		{"blocked via symlink target", nil, []string{"/usr/bin/cat"}, fake, false},
		{"blocked by target base name", nil, []string{"cat"}, fake, false},
		{"block wins over allow", &some, []string{"printf"}, "printf", false},
		{"block other", nil, []string{"rm"}, "true", true},
		{"blocked path covers a hard link", nil, []string{tool}, alias, false},
		{"blocked path covers itself", nil, []string{tool}, tool, false},
		{"a copy is another file", nil, []string{tool}, clone, true},
		{"blocked name covers a hard link of its PATH file", nil, []string{"tool"}, alias, false},
		{"blocked name does not cover a copy", nil, []string{"tool"}, clone, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, func(cfg *Config) {
				cfg.AllowedCommands, cfg.BlockedCommands = c.allowed, c.blocked
				// toolDir is on PATH, so the bare name "tool" resolves there.
				cfg.Env = append([]string{"PATH=" + toolDir + ":/usr/bin:/bin"}, "HOME="+toolDir, "LANG=C.UTF-8")
			})
			_, err := f.run(req("p", c.argv0, "x"))
			if c.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !c.ok && domain(err) != "FORBIDDEN/command_not_allowed" {
				t.Fatalf("got %v, want command_not_allowed", err)
			}
		})
	}
}

func TestSecondRunNeverExecutesAgain(t *testing.T) {
	f := newFixture(t, nil)
	r := req("once:1", "sh", "-c", "echo ran >> count; printf out")
	first := f.mustRun(r)
	second := f.mustRun(r)
	if second.State != protocol.ProcessStateCompleted || exitOf(second) != "0" || string(second.Stdout) != "out" {
		t.Fatalf("same-intent rerun %+v", second)
	}
	if string(first.Stdout) != "out" {
		t.Fatalf("first %+v", first)
	}
	// A different intent under the same id: CONFLICT, nothing runs.
	for _, mut := range []func(*Request){
		func(r *Request) { r.Argv = append([]string{}, "sh", "-c", "echo ran >> count") },
		func(r *Request) { r.Stdin = []byte("x") },
		func(r *Request) { r.Cwd = "./" },
		func(r *Request) { r.TimeoutMs = 30001 },
		func(r *Request) { r.MaxOutputBytes = 5 },
	} {
		r2 := r
		mut(&r2)
		if _, err := f.run(r2); domain(err) != "CONFLICT/process_id_conflict" {
			t.Fatalf("different intent: %v", err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(f.root, "count"))
	if string(b) != "ran\n" {
		t.Fatalf("executed %q", b)
	}
	// While running, a same-intent rerun answers running at once.
	long := req("long", "sleep", "30")
	h, _, err := f.s.Start(context.Background(), long)
	if err != nil {
		t.Fatal(err)
	}
	rc := f.mustRun(long)
	if rc.State != protocol.ProcessStateRunning || rc.ExitCode != nil || rc.Stdout != nil || !rc.OutputTruncated {
		t.Fatalf("rerun while running %+v", rc)
	}
	f.s.Cancel("long", 0)
	<-h.Done()
}

func TestGetStates(t *testing.T) {
	f := newFixture(t, nil)
	rc, err := f.s.Get("nobody")
	if err != nil || rc.State != protocol.ProcessStateNotFound || rc.ExitCode != nil || rc.Stdout != nil || !rc.OutputTruncated {
		t.Fatalf("absent %+v %v", rc, err)
	}
	h, _, err := f.s.Start(context.Background(), req("g", "sleep", "30"))
	if err != nil {
		t.Fatal(err)
	}
	rc, _ = f.s.Get("g")
	if rc.State != protocol.ProcessStateRunning || rc.ExitCode != nil || rc.Stdout != nil || !rc.OutputTruncated {
		t.Fatalf("running %+v", rc)
	}
	f.s.Cancel("g", 0)
	<-h.Done()
	rc, _ = f.s.Get("g")
	if rc.State != protocol.ProcessStateCancelled || exitOf(rc) != "-9" || rc.Stdout == nil || rc.OutputTruncated {
		t.Fatalf("cancelled %+v", rc)
	}
	// get is strictly read-only: absence stays absence.
	f.s.Get("still-nobody")
	if _, found, _ := f.s.load("still-nobody"); found {
		t.Fatal("get wrote a record")
	}
	// A store failure is an error, never not_found.
	f.st.Close()
	if _, err := f.s.Get("nobody"); domain(err) != "UNAVAILABLE/process_store_unavailable" {
		t.Fatalf("get on failed store: %v", err)
	}
	f.reopen()
}

func TestCancel(t *testing.T) {
	f := newFixture(t, nil)
	r := req("c1", "sleep", "30")
	r.Generation = 7
	h, _, err := f.s.Start(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	// Another session generation cannot cancel it.
	if _, _, err := f.s.Cancel("c1", 8); domain(err) != "FORBIDDEN/process_not_owner" {
		t.Fatalf("foreign cancel: %v", err)
	}
	if rc, _ := f.s.Get("c1"); rc.State != protocol.ProcessStateRunning {
		t.Fatalf("after foreign cancel %+v", rc)
	}
	_, wait, err := f.s.Cancel("c1", 7)
	if err != nil || wait == nil {
		t.Fatalf("owner cancel: %v", err)
	}
	<-wait
	rc, _ := h.Result()
	if rc.State != protocol.ProcessStateCancelled || exitOf(rc) != "-9" || h.r.terminal.Reason != reasonCancel {
		t.Fatalf("cancelled %+v", rc)
	}
	// Terminal race: the actual receipt, no invented kill.
	done := f.mustRun(req("c2", "true"))
	rc, wait, err = f.s.Cancel("c2", 1)
	if err != nil || wait != nil || rc.State != protocol.ProcessStateCompleted || exitOf(rc) != "0" || rc.Stdout == nil {
		t.Fatalf("terminal cancel %+v %v (run %+v)", rc, err, done)
	}
	// Absent: a durable tombstone before the reply.
	rc, wait, err = f.s.Cancel("c3", 1)
	if err != nil || wait != nil || rc.State != protocol.ProcessStateCancelled || rc.ExitCode != nil || rc.Stdout != nil || !rc.OutputTruncated {
		t.Fatalf("tombstone cancel %+v %v", rc, err)
	}
	f.reopen()
	if rc, _ := f.s.Get("c3"); rc.State != protocol.ProcessStateCancelled || rc.ExitCode != nil || !rc.OutputTruncated {
		t.Fatalf("tombstone after restart %+v", rc)
	}
	// A run under the tombstoned id never starts.
	r = req("c3", "sh", "-c", "touch ran")
	rc = f.mustRun(r)
	if rc.State != protocol.ProcessStateCancelled || rc.ExitCode != nil {
		t.Fatalf("run over tombstone %+v", rc)
	}
	if _, err := os.Stat(filepath.Join(f.root, "ran")); err == nil {
		t.Fatal("run over a tombstone executed")
	}
	// Cancel of a tombstone is idempotent.
	if rc, _, err := f.s.Cancel("c3", 2); err != nil || rc.State != protocol.ProcessStateCancelled {
		t.Fatalf("second cancel %+v %v", rc, err)
	}
}

func TestTombstoneRace(t *testing.T) {
	f := newFixture(t, nil)
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("race-%d", i)
		marker := filepath.Join(f.root, id)
		var wg sync.WaitGroup
		var cancelRC Receipt
		var cancelWait <-chan struct{}
		var cancelErr error
		var runRC Receipt
		var runErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			cancelRC, cancelWait, cancelErr = f.s.Cancel(id, 0)
			if cancelWait != nil {
				<-cancelWait
			}
		}()
		go func() {
			defer wg.Done()
			runRC, runErr = f.run(req(id, "touch", id))
		}()
		wg.Wait()
		if cancelErr != nil || runErr != nil {
			t.Fatalf("%s: cancel %v run %v", id, cancelErr, runErr)
		}
		_, statErr := os.Stat(marker)
		ran := statErr == nil
		tombstoned := cancelWait == nil && cancelRC.State == protocol.ProcessStateCancelled && cancelRC.ExitCode == nil
		switch {
		case tombstoned:
			// The tombstone won: the run must not have executed.
			if ran || runRC.State != protocol.ProcessStateCancelled || runRC.ExitCode != nil {
				t.Fatalf("%s: tombstoned but ran=%v run=%+v", id, ran, runRC)
			}
		default:
			// The run won: cancel saw it (active or terminal).
			if !ran && runRC.State == protocol.ProcessStateCompleted {
				t.Fatalf("%s: completed without running", id)
			}
		}
	}
}

func TestActiveLimitBoundary(t *testing.T) {
	f := newFixture(t, nil)
	var hs []*Run
	for i := 0; i < protocol.ProcessMaxActive; i++ {
		h, _, err := f.s.Start(context.Background(), req(fmt.Sprintf("a%d", i), "sleep", "30"))
		if err != nil {
			t.Fatalf("run %d of 16: %v", i+1, err)
		}
		hs = append(hs, h)
	}
	_, _, err := f.s.Start(context.Background(), req("a16", "true"))
	if domain(err) != "UNAVAILABLE/process_receipt_limit" {
		t.Fatalf("17th active run: %v", err)
	}
	if rc, _ := f.s.Get("a16"); rc.State != protocol.ProcessStateNotFound {
		t.Fatalf("refused run left a record %+v", rc)
	}
	// get and cancel still answer.
	if rc, err := f.s.Get("a3"); err != nil || rc.State != protocol.ProcessStateRunning {
		t.Fatalf("get at capacity %+v %v", rc, err)
	}
	_, wait, err := f.s.Cancel("a0", 0)
	if err != nil {
		t.Fatal(err)
	}
	<-wait
	h, _, err := f.s.Start(context.Background(), req("a16", "true"))
	if err != nil {
		t.Fatalf("run after a slot freed: %v", err)
	}
	<-h.Done()
	for i := 1; i < len(hs); i++ {
		f.s.Cancel(fmt.Sprintf("a%d", i), 0)
		<-hs[i].Done()
	}
}

func TestRetainedLimitBoundary(t *testing.T) {
	f := newFixture(t, nil)
	// 998 earlier ids (tombstones) written directly, in one transaction.
	err := f.s.ns.Update(func(tx *store.Tx) error {
		for i := 0; i < protocol.ProcessMaxRetained-2; i++ {
			rec := record{V: 1, State: protocol.ProcessStateCancelled, Tombstone: true}
			if err := tx.Put(fmt.Sprintf("%sold-%04d", recordPrefix, i), rec.encode()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// 999th: a tombstone through cancel; 1000th: a run.
	if _, _, err := f.s.Cancel("t999", 0); err != nil {
		t.Fatalf("999th id: %v", err)
	}
	if rc := f.mustRun(req("r1000", "true")); rc.State != protocol.ProcessStateCompleted {
		t.Fatalf("1000th id: %+v", rc)
	}
	// 1001st: refused without executing, for run and cancel alike.
	r := req("r1001", "sh", "-c", "touch ran")
	if _, err := f.run(r); domain(err) != "UNAVAILABLE/process_receipt_limit" {
		t.Fatalf("1001st run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.root, "ran")); err == nil {
		t.Fatal("refused run executed")
	}
	if _, _, err := f.s.Cancel("t1001", 0); domain(err) != "UNAVAILABLE/process_receipt_limit" {
		t.Fatalf("1001st tombstone: %v", err)
	}
	// Existing ids still answer; spent ids stay spent.
	if rc := f.mustRun(req("r1000", "true")); rc.State != protocol.ProcessStateCompleted {
		t.Fatalf("rerun of retained id %+v", rc)
	}
	if rc, err := f.s.Get("old-0000"); err != nil || rc.State != protocol.ProcessStateCancelled {
		t.Fatalf("old id %+v %v", rc, err)
	}
}

func TestRestartMakesActiveOutcomeUnknownAndNeverReruns(t *testing.T) {
	f := newFixture(t, nil)
	done := f.mustRun(req("done", "sh", "-c", "printf hi; exit 4"))
	if string(done.Stdout) != "hi" {
		t.Fatalf("%+v", done)
	}
	r := req("inflight", "sh", "-c", "echo ran >> count; exec sleep 30")
	h, _, err := f.s.Start(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if !settled(func() bool { b, _ := os.ReadFile(filepath.Join(f.root, "count")); return len(b) > 0 }) {
		t.Fatal("the command never ran")
	}
	// "SIGKILL the worker": the store handle goes away with the run still
	// recorded as running; the orphan is killed by hand afterwards.
	old := f.s
	f.reopen()
	unix.Kill(-h.r.pgid, unix.SIGKILL)
	<-h.Done()
	_ = old

	rc, err := f.s.Get("inflight")
	if err != nil || rc.State != protocol.ProcessStateOutcomeUnknown || rc.ExitCode != nil || rc.Stdout != nil || !rc.OutputTruncated {
		t.Fatalf("after restart %+v %v", rc, err)
	}
	// The same request is answered, not rerun; a different one conflicts.
	rc = f.mustRun(r)
	if rc.State != protocol.ProcessStateOutcomeUnknown {
		t.Fatalf("rerun after restart %+v", rc)
	}
	if _, err := f.run(req("inflight", "true")); domain(err) != "CONFLICT/process_id_conflict" {
		t.Fatalf("different intent after restart: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.root, "count")); string(b) != "ran\n" {
		t.Fatalf("ran %q", b)
	}
	// Known exit survives; output does not.
	rc, _ = f.s.Get("done")
	if rc.State != protocol.ProcessStateCompleted || exitOf(rc) != "4" || rc.Stdout != nil || rc.Stderr != nil || !rc.OutputTruncated {
		t.Fatalf("completed after restart %+v", rc)
	}
	// Cancel after restart: the recorded receipt, nothing signalled.
	rc, wait, err := f.s.Cancel("inflight", 0)
	if err != nil || wait != nil || rc.State != protocol.ProcessStateOutcomeUnknown {
		t.Fatalf("cancel after restart %+v %v", rc, err)
	}
}

func TestRecoveryOfRecordWrittenByCrashedWorker(t *testing.T) {
	f := newFixture(t, nil)
	f.s.ns.Update(func(tx *store.Tx) error {
		return tx.Put(recordPrefix+"crashed", record{V: 1, State: protocol.ProcessStateRunning, Intent: []byte("x")}.encode())
	})
	f.s.Close()
	f.reopen()
	var raw []byte
	f.s.ns.View(func(tx *store.Tx) error { raw, _ = tx.Get(recordPrefix + "crashed"); return nil })
	rec, _ := decodeRecord(raw)
	if rec.State != protocol.ProcessStateOutcomeUnknown || rec.Reason != reasonRestart {
		t.Fatalf("recovered record %+v", rec)
	}
}

func TestRequestEndStopsRun(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	h, _, err := f.s.Start(ctx, req("ctx", "sleep", "30"))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	rc, _ := h.Result()
	if rc.State != protocol.ProcessStateCancelled || exitOf(rc) != "-9" || h.r.terminal.Reason != reasonAborted {
		t.Fatalf("%+v reason %q", rc, h.r.terminal.Reason)
	}
}

func TestCloseStopsActiveRuns(t *testing.T) {
	f := newFixture(t, nil)
	h, _, err := f.s.Start(context.Background(), req("sd", "sleep", "30"))
	if err != nil {
		t.Fatal(err)
	}
	f.s.Close()
	rc, _ := h.Result()
	if rc.State != protocol.ProcessStateCancelled || h.r.terminal.Reason != reasonShutdown {
		t.Fatalf("%+v", rc)
	}
	if _, _, err := f.s.Start(context.Background(), req("after", "true")); domain(err) != "UNAVAILABLE/process_store_unavailable" {
		t.Fatalf("start after close: %v", err)
	}
	f.s = nil
}

func TestOutputCacheBounds(t *testing.T) {
	f := newFixture(t, nil)
	for i := 0; i <= protocol.ProcessOutputCacheMax; i++ {
		f.mustRun(req(fmt.Sprintf("o%d", i), "printf", "%d", strconv.Itoa(i)))
	}
	// 17 completed: the oldest output is gone, its exit is not.
	rc, _ := f.s.Get("o0")
	if rc.State != protocol.ProcessStateCompleted || exitOf(rc) != "0" || rc.Stdout != nil || !rc.OutputTruncated {
		t.Fatalf("evicted %+v", rc)
	}
	rc, _ = f.s.Get("o1")
	if string(rc.Stdout) != "1" || rc.OutputTruncated {
		t.Fatalf("16th newest %+v", rc)
	}
	f.clock.t = f.clock.t.Add(protocol.ProcessOutputCacheTTL - time.Second)
	if rc, _ = f.s.Get("o16"); string(rc.Stdout) != "16" {
		t.Fatalf("before 24 h %+v", rc)
	}
	f.clock.t = f.clock.t.Add(time.Second)
	rc, _ = f.s.Get("o16")
	if rc.Stdout != nil || !rc.OutputTruncated || exitOf(rc) != "0" {
		t.Fatalf("after 24 h %+v", rc)
	}
}

func TestConfigLimits(t *testing.T) {
	f := newFixture(t, nil)
	for _, c := range []Config{
		{Store: f.st, Dirs: testDirs{}, MaxActive: 17},
		{Store: f.st, Dirs: testDirs{}, MaxRetained: 1001},
		{Store: f.st, Dirs: testDirs{}, OutputCacheEntries: 17},
		{Store: f.st, Dirs: testDirs{}, IntentKey: []byte("short")},
		{Dirs: testDirs{}},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("accepted %+v", c)
		}
	}
	// A lower policy limit is honoured at its boundary.
	f.s.cfg.MaxActive = 1
	h, _, err := f.s.Start(context.Background(), req("l1", "sleep", "30"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.s.Start(context.Background(), req("l2", "true")); domain(err) != "UNAVAILABLE/process_receipt_limit" {
		t.Fatalf("second run at MaxActive 1: %v", err)
	}
	f.s.Cancel("l1", 0)
	<-h.Done()
}

func TestStoreFailureOnCompletionKeepsReceiptInMemory(t *testing.T) {
	f := newFixture(t, nil)
	h, _, err := f.s.Start(context.Background(), req("unsaved", "sleep", "30"))
	if err != nil {
		t.Fatal(err)
	}
	f.st.Close() // the terminal write will fail
	f.s.Cancel("unsaved", 0)
	<-h.Done()
	rc, err := f.s.Get("unsaved")
	if err != nil || rc.State != protocol.ProcessStateCancelled {
		t.Fatalf("%+v %v", rc, err)
	}
	f.st = nil
	f.s.Close()
	f.s = nil
}

func TestCanaryNeverReachesDiskOrErrors(t *testing.T) {
	const canary = "CANARY-7f3a9c"
	f := newFixture(t, nil)
	var errs []string
	r := req("canary", "sh", "-c", "cat; printf %s \"$1\" >&2", "sh", canary+"-argv")
	r.Stdin = []byte(canary + "-stdin")
	rc := f.mustRun(r)
	if !strings.Contains(string(rc.Stdout), canary) || !strings.Contains(string(rc.Stderr), canary) {
		t.Fatalf("canary did not round-trip: %+v", rc)
	}
	// Failure paths with the canary in argv and cwd.
	for _, bad := range []Request{
		req("c-missing", canary+"-cmd"),
		req("c-abs", "/"+canary),
		{ProcessID: "c-cwd", Cwd: canary, Argv: []string{"true"}, TimeoutMs: 1000, MaxOutputBytes: 1},
		{ProcessID: "canary", Cwd: ".", Argv: []string{"echo", canary}, TimeoutMs: 1000, MaxOutputBytes: 1},
	} {
		_, err := f.run(bad)
		if err == nil {
			t.Fatalf("%s succeeded", bad.ProcessID)
		}
		b, _ := protocolJSON(err)
		errs = append(errs, err.Error(), string(b))
	}
	f.s.Close()
	f.s = nil
	f.st.Close()
	f.st = nil
	for _, e := range errs {
		if strings.Contains(e, canary) {
			t.Fatalf("error leaks the canary: %s", e)
		}
	}
	filepath.Walk(f.dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(p)
		if bytes.Contains(b, []byte(canary)) {
			t.Errorf("%s holds the canary", p)
		}
		return nil
	})
}

func protocolJSON(err error) ([]byte, error) {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return []byte(pe.Code + pe.Message + pe.DomainCode()), nil
	}
	return []byte(err.Error()), nil
}
