package pairinge2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"lemon/host/hosttest"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lemon/client"
	"lemon/cmd/lemon/internal/lemontest"
	"lemon/protocol"
	"lemon/worker"
)

var (
	// lemonBin is the binary TestMain built from lemon/cmd/lemon.
	lemonBin string
	// wazeroCache is shared by every node's state directory (through a
	// symlink), so only the first node of the run compiles the module set.
	wazeroCache string
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	b, err := lemontest.Setup("lemon-e2e-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "pairing_e2e: %v\n", err)
		return 1
	}
	defer b.Cleanup()
	lemonBin, wazeroCache = b.Bin, b.WazeroCache
	return m.Run()
}

// Waits. They bound how long a test waits for a process; they never
// decide a pass on speed. The first node of a run compiles the module set
// (tens of seconds on a loaded 2-core machine).
const (
	startWait  = 20 * time.Second
	onlineWait = 90 * time.Second
	exitWait   = 30 * time.Second
)

// syncBuffer collects a process's output, safe for concurrent writes.
type syncBuffer = hosttest.LogBuffer

// proc is one running lemon subprocess.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error // cmd.Wait's result, set before done closes
}

// output is a finished command's output, kept for the credential check.
type output struct {
	name string
	text func() string
}

// harness is one test's controller address, operator token, processes
// and the credentials that must never appear in any process output.
type harness struct {
	t    *testing.T
	root string
	// opToken is the controller's admin token (every operator scope): the
	// approver's, and `lemon nodes`/`lemon call`'s.
	opToken string
	// pairToken holds only operator.pairing: what a joining host holds in
	// LEMON_NODE_OPERATOR_TOKEN (startNode).
	pairToken string
	// approveToken holds only operator.approvals.
	approveToken string
	port         int
	url          string
	stateDir     string
	ctl          *proc

	mu      sync.Mutex
	secrets map[string]string // value → kind
	outputs []output
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, root: t.TempDir(), secrets: map[string]string{}}
	h.opToken = "lop_" + randHex(24)
	h.addSecret("operator token", h.opToken)
	h.pairToken = "lpt_" + randHex(24)
	h.addSecret("pairing token", h.pairToken)
	h.approveToken = "lpa_" + randHex(24)
	h.addSecret("approvals token", h.approveToken)
	h.setPort(freePort(t))
	h.stateDir = filepath.Join(h.root, "controller-state")
	// Registered first, so it runs after every process has been stopped.
	t.Cleanup(h.checkNoSecrets)
	return h
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Controller ports. The controller is a subprocess, so the port must be
// chosen here, closed, and bound again by it — and bound again after every
// restartController, whose nodes reconnect to the same URL. A port from
// bind(0) is taken from the kernel's ephemeral range, which every other
// process's bind(0) (other test packages run concurrently) and every
// outgoing connect() draw from too: one of them can be handed the port in
// either gap, and the controller then cannot listen. freePort therefore
// picks at random below the lower bound of
// /proc/sys/net/ipv4/ip_local_port_range, which the kernel never hands
// out automatically; only a process naming that exact port could take it.
// A trial listen skips ports in use, and ports remembers what this process
// handed out so two harnesses never share one. startController still
// retries the residual case (see there). Where the range leaves too little
// room below it, freePort falls back to bind(0).
const (
	lowPortFloor = 10000 // stay clear of the well-known and common service ports
	minLowPorts  = 1000  // fewer candidates than this: use bind(0)
)

var ports struct {
	sync.Mutex
	used map[int]bool
}

// ephemeralLow is the lower bound of the kernel's automatic port range
// (0 when unknown).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil {
		return 0
	}
	return lo
}

func freePort(t *testing.T) int {
	t.Helper()
	ports.Lock()
	defer ports.Unlock()
	if ports.used == nil {
		ports.used = map[int]bool{}
	}
	try := func(addr string) int {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return 0
		}
		defer ln.Close()
		p := ln.Addr().(*net.TCPAddr).Port
		if ports.used[p] {
			return 0
		}
		ports.used[p] = true
		return p
	}
	if lo := ephemeralLow(); lo-lowPortFloor >= minLowPorts {
		for range 200 {
			if p := try(fmt.Sprintf("127.0.0.1:%d", lowPortFloor+mrand.IntN(lo-lowPortFloor))); p != 0 {
				return p
			}
		}
	}
	for range 20 {
		if p := try("127.0.0.1:0"); p != 0 {
			return p
		}
	}
	t.Fatal("no free loopback port")
	return 0
}

func (h *harness) setPort(port int) {
	h.port = port
	h.url = fmt.Sprintf("ws://127.0.0.1:%d/ws", h.port)
}

func (h *harness) addSecret(kind, v string) {
	if v == "" {
		h.t.Fatalf("empty %s", kind)
	}
	h.mu.Lock()
	h.secrets[v] = kind
	h.mu.Unlock()
}

// checkNoSecrets fails the test if any credential the test saw appears in
// the output of any process it ran. The message names the kind, never the
// value.
func (h *harness) checkNoSecrets() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.outputs) == 0 {
		h.t.Error("no process output was recorded")
	}
	for _, o := range h.outputs {
		text := o.text()
		for v, kind := range h.secrets {
			if strings.Contains(text, v) {
				h.t.Errorf("the output of %s contains the %s", o.name, kind)
			}
		}
	}
}

func (h *harness) record(name string, text func() string) {
	h.mu.Lock()
	h.outputs = append(h.outputs, output{name, text})
	h.mu.Unlock()
}

// baseEnv is the whole environment of a subprocess: nothing is inherited
// except PATH, so no LEMON_* variable of the caller leaks in.
func baseEnv(home string, extra ...string) []string {
	return append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + os.TempDir()}, extra...)
}

// start runs lemon with args; the process is killed and waited for when
// the test ends.
func (h *harness) start(name string, env []string, args ...string) *proc {
	h.t.Helper()
	p := &proc{t: h.t, name: name, out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(lemonBin, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		h.t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	h.record(name, p.out.String)
	h.t.Cleanup(p.kill)
	return p
}

// run runs lemon with args to completion (at most a minute).
func (h *harness) run(name string, env []string, args ...string) (stdout, stderr string, code int) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, lemonBin, args...)
	cmd.Env = env
	var o, e syncBuffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	h.record(name, func() string { return o.String() + e.String() })
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		h.t.Fatalf("%s: %v", name, err)
	}
	return o.String(), e.String(), code
}

// operatorCLI runs `lemon SUBCOMMAND --controller URL ARGS...` with the
// operator token in LEMON_OPERATOR_TOKEN.
func (h *harness) operatorCLI(sub string, args ...string) (stdout, stderr string, code int) {
	h.t.Helper()
	env := baseEnv(filepath.Join(h.root, "operator-home"), "LEMON_OPERATOR_TOKEN="+h.opToken)
	all := append([]string{sub, "--controller", h.url}, args...)
	return h.run("lemon "+sub+" "+strings.Join(args, " "), env, all...)
}

// mustCLI is operatorCLI that fails the test unless it exits 0.
func (h *harness) mustCLI(sub string, args ...string) string {
	h.t.Helper()
	out, errOut, code := h.operatorCLI(sub, args...)
	if code != 0 {
		h.t.Fatalf("lemon %s %v: exit %d\nstdout: %s\nstderr: %s", sub, args, code, out, errOut)
	}
	return out
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitCode waits for the process to exit by itself and returns its code.
func (p *proc) exitCode() int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(exitWait):
		p.t.Fatalf("%s did not exit\n%s", p.name, p.out.String())
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

// stop sends SIGTERM and waits (SIGKILL after exitWait); it returns the
// exit code.
func (p *proc) stop() int {
	p.t.Helper()
	if !p.exited() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(exitWait):
			p.t.Errorf("%s ignored SIGTERM", p.name)
			p.kill()
		}
	}
	return p.exitCode()
}

func (p *proc) kill() {
	if !p.exited() {
		p.cmd.Process.Kill()
	}
	<-p.done
}

// waitFor waits until the output matches re and returns the submatches.
func (p *proc) waitFor(re *regexp.Regexp, timeout time.Duration) []string {
	p.t.Helper()
	m := p.waitForOrExit(re, timeout)
	if m == nil {
		p.t.Fatalf("%s exited before printing %q\n%s", p.name, re, p.out.String())
	}
	return m
}

// waitForOrExit is waitFor that returns nil if the process exits without
// printing a match.
func (p *proc) waitForOrExit(re *regexp.Regexp, timeout time.Duration) []string {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		exited := p.exited()
		if m := re.FindStringSubmatch(p.out.String()); m != nil {
			return m
		}
		if exited {
			return nil
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s did not print %q in %s\n%s", p.name, re, timeout, p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *proc) count(substr string) int { return strings.Count(p.out.String(), substr) }

// startController runs `lemon controller` on the harness's port and state
// directory and waits until it listens.
//
// If the controller cannot bind the port (it exits with "cannot listen on
// ADDR"; it does not print the cause, which on loopback is "address in
// use"), the first start of a harness moves to a fresh port — nothing has
// used h.url yet — and any later start (a restart, whose nodes reconnect
// to h.url) retries the same port for up to rebindWait.
func (h *harness) startController(extra ...string) *proc {
	h.t.Helper()
	const (
		firstStartTries = 5
		rebindWait      = 5 * time.Second
	)
	env := baseEnv(filepath.Join(h.root, "controller-home"), "LEMON_CONTROL_PLANE_OPERATOR_TOKEN="+h.opToken,
		envPairToken+"="+h.pairToken, envApproveToken+"="+h.approveToken)
	policy := filepath.Join(h.root, "controller.toml")
	if err := os.WriteFile(policy, []byte(pairingPolicy), 0o600); err != nil {
		h.t.Fatal(err)
	}
	extra = append([]string{"--policy", policy}, extra...)
	first := h.ctl == nil
	deadline := time.Now().Add(rebindWait)
	for try := 1; ; try++ {
		addr := fmt.Sprintf("127.0.0.1:%d", h.port)
		args := append([]string{"controller", "--listen", addr, "--state", h.stateDir}, extra...)
		p := h.start("lemon controller", env, args...)
		if p.waitForOrExit(regexp.MustCompile(`listening on `+regexp.QuoteMeta(h.url)), startWait) != nil {
			h.ctl = p
			return p
		}
		out := p.out.String()
		if !strings.Contains(out, "cannot listen on "+addr) {
			h.t.Fatalf("%s exited before listening\n%s", p.name, out)
		}
		switch {
		case first && try < firstStartTries:
			h.t.Logf("controller could not listen on %s; moving to another port", addr)
			h.setPort(freePort(h.t))
		case !first && time.Now().Before(deadline):
			time.Sleep(100 * time.Millisecond)
		default:
			h.t.Fatalf("controller could not listen on %s (%d tries)\n%s", addr, try, out)
		}
	}
}

// restartController stops the controller (SIGTERM, clean exit) and starts
// another on the same port and state directory.
func (h *harness) restartController(extra ...string) *proc {
	h.t.Helper()
	if code := h.ctl.stop(); code != 0 {
		h.t.Fatalf("controller exit %d\n%s", code, h.ctl.out.String())
	}
	return h.startController(extra...)
}

// nodeHome is one node machine: its HOME (token store under
// ~/.lemon/nodes/execution), default cwd and state directory.
type nodeHome struct {
	home, cwd, state string
}

func (h *harness) newNodeHome(name string) *nodeHome {
	h.t.Helper()
	n := &nodeHome{home: filepath.Join(h.root, name)}
	n.cwd = filepath.Join(n.home, "work")
	n.state = filepath.Join(n.home, "state")
	for _, d := range []string{n.cwd, n.state} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			h.t.Fatal(err)
		}
	}
	if err := os.Symlink(wazeroCache, filepath.Join(n.state, "wazero-cache")); err != nil {
		h.t.Fatal(err)
	}
	return n
}

func (n *nodeHome) store() worker.TokenStore {
	return worker.TokenStore{Dir: filepath.Join(n.home, ".lemon", "nodes", "execution")}
}

// startNode runs `lemon node join` for n. With pair, the pairing-only
// token is in LEMON_NODE_OPERATOR_TOKEN and --pair is passed.
func (h *harness) startNode(label string, n *nodeHome, name string, pair bool, extra ...string) *proc {
	h.t.Helper()
	tok := ""
	if pair {
		tok = h.pairToken
	}
	return h.startNodeWith(label, n, name, tok, extra...)
}

// startNodeWith is startNode with operatorToken in
// LEMON_NODE_OPERATOR_TOKEN and --pair, unless operatorToken is empty.
func (h *harness) startNodeWith(label string, n *nodeHome, name, operatorToken string, extra ...string) *proc {
	h.t.Helper()
	env := baseEnv(n.home)
	args := []string{"node", "join", "--controller", h.url, "--name", name, "--cwd", n.cwd, "--state", n.state}
	if operatorToken != "" {
		env = append(env, "LEMON_NODE_OPERATOR_TOKEN="+operatorToken)
		args = append(args, "--pair")
	}
	return h.start(label, env, append(args, extra...)...)
}

// envPairToken and envApproveToken name the variables the harness's
// controller policy reads the pairing-only and approvals-only operator
// tokens from.
const (
	envPairToken    = "LEMON_E2E_PAIRING_TOKEN"
	envApproveToken = "LEMON_E2E_APPROVALS_TOKEN"
)

// pairingPolicy is the controller policy of every harness: beside the
// admin token (LEMON_CONTROL_PLANE_OPERATOR_TOKEN) one operator
// credential with only operator.pairing, as a joining host holds, and one
// with only operator.approvals.
const pairingPolicy = `[[operators]]
name = "joining-hosts"
token_env = "` + envPairToken + `"
scopes = ["operator.pairing"]

[[operators]]
name = "approvers"
token_env = "` + envApproveToken + `"
scopes = ["operator.approvals"]
`

const methodHostInfo = "node.host.info"

var (
	codeRE   = regexp.MustCompile(`pairing code: ([A-Z0-9]{4}-[A-Z0-9]{4})`)
	pairedRE = regexp.MustCompile(`paired as (\S+) \(node ID (node-[0-9a-f]+)\); session stored`)
)

// pairNew enrols a new node: `lemon node join --pair`, then
// `lemon nodes approve CODE`. It returns the running node and its record.
func (h *harness) pairNew(label string, n *nodeHome, name string) (*proc, *worker.NodeRecord) {
	h.t.Helper()
	p := h.startNode(label, n, name, true)
	code := p.waitFor(codeRE, startWait)[1]
	out := h.mustCLI("nodes", "approve", code)
	if !strings.Contains(out, "approved: node "+`"`+name+`"`) {
		h.t.Fatalf("approve output: %q", out)
	}
	m := p.waitFor(pairedRE, startWait)
	if m[1] != name {
		h.t.Fatalf("paired as %q, want %q", m[1], name)
	}
	return p, h.loadRecord(n, m[2])
}

// loadRecord reads n's stored identity for nodeID and registers its
// credentials for the output check.
func (h *harness) loadRecord(n *nodeHome, nodeID string) *worker.NodeRecord {
	h.t.Helper()
	rec, err := n.store().Load(nodeID, h.url)
	if err != nil {
		h.t.Fatalf("token store: %v", err)
	}
	h.addSecret("session token", rec.SessionToken)
	h.addSecret("recovery credential", rec.RecoveryCredential)
	return rec
}

// operator dials the controller as an operator with every scope.
func (h *harness) operator() *client.Conn {
	h.t.Helper()
	return h.operatorWith(h.opToken)
}

// operatorWith dials the controller as an operator with token.
func (h *harness) operatorWith(token string) *client.Conn {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startWait)
	defer cancel()
	c, err := client.Dial(ctx, h.url, client.Options{Token: token, ClientID: "e2e-test"})
	if err != nil {
		h.t.Fatalf("operator dial: %v", err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c
}

// call makes one operator call on a fresh connection.
func (h *harness) call(method string, params any) (json.RawMessage, *protocol.Error) {
	h.t.Helper()
	return h.callWith(h.opToken, method, params)
}

// callWith makes one call on a fresh operator connection with token.
func (h *harness) callWith(token, method string, params any) (json.RawMessage, *protocol.Error) {
	h.t.Helper()
	c := h.operatorWith(token)
	defer c.Close()
	return callOn(c, method, params)
}

// callOn makes one call on c, bounded by a minute.
func callOn(c *client.Conn, method string, params any) (json.RawMessage, *protocol.Error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return c.Call(ctx, method, params)
}

func mustDecode[T any](t *testing.T, raw json.RawMessage, perr *protocol.Error) T {
	t.Helper()
	var v T
	if perr != nil {
		t.Fatalf("call failed: %s %s %s", perr.Code, perr.DomainCode(), perr.Message)
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// callAs makes one operator call that must succeed and decodes its payload.
func callAs[T any](h *harness, method string, params any) T {
	h.t.Helper()
	raw, perr := h.call(method, params)
	return mustDecode[T](h.t, raw, perr)
}

func (h *harness) nodeList() []protocol.NodeSummary {
	h.t.Helper()
	return callAs[protocol.NodeListResult](h, protocol.MethodNodeList, protocol.NodeListParams{}).Nodes
}

// waitOnline waits until node.list shows nodeID online; node is the
// process whose output explains a timeout.
func (h *harness) waitOnline(nodeID string, node *proc) {
	h.t.Helper()
	deadline := time.Now().Add(onlineWait)
	for {
		for _, n := range h.nodeList() {
			if n.NodeID == nodeID && n.Online {
				return
			}
		}
		if node != nil && node.exited() {
			h.t.Fatalf("%s exited while waiting for it to come online\n%s", node.name, node.out.String())
		}
		if time.Now().After(deadline) {
			out := ""
			if node != nil {
				out = node.out.String()
			}
			h.t.Fatalf("node %s not online after %s\n%s", nodeID, onlineWait, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hostInfo calls node.host.info through `lemon call` and returns the
// node's default cwd, which names the worker that answered.
func (h *harness) hostInfo(nodeID string) string {
	h.t.Helper()
	params, _ := json.Marshal(protocol.HostInfoParams{NodeID: nodeID})
	out := h.mustCLI("call", methodHostInfo, string(params))
	var info struct {
		DefaultCwd string `json:"defaultCwd"`
		OS         string `json:"os"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.OS == "" || info.DefaultCwd == "" {
		h.t.Fatalf("node.host.info payload: %q", out)
	}
	return info.DefaultCwd
}

// dialNode connects a raw node client with token, claiming nodeID. It
// returns the controller's refusal, if any.
func (h *harness) dialNode(token, nodeID string) (*client.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), startWait)
	defer cancel()
	c, err := client.Dial(ctx, h.url, client.Options{Role: protocol.RoleNode, Token: token, ClientID: "e2e-raw-node",
		Node: &protocol.NodeAdvertise{NodeID: nodeID, Methods: map[string]int{}}})
	if err == nil {
		h.t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// wantRefused checks err is the controller's UNAUTHORIZED with domain code.
func wantRefused(t *testing.T, err error, domain string) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("want UNAUTHORIZED %s, got %v", domain, err)
	}
	if pe.Code != protocol.CodeUnauthorized || pe.DomainCode() != domain {
		t.Fatalf("want UNAUTHORIZED %s, got %s %s", domain, pe.Code, pe.DomainCode())
	}
}
