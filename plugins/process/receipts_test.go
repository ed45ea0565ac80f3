//go:build !wasip1

// The receipt state machine of the process module (docs/PROCESS.md, "The
// receipt machine in the module") through the real host: at-most-once,
// tombstones, ownership, retention, the output cache and restart. These
// carry the receipt checks the white-box tests of hostcalls/spawn made on
// Spawner.Start/Get/Cancel.
package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lemon/host"
	"lemon/host/hosttest"
	"lemon/hostcalls"
	"lemon/hostcalls/fs"
	"lemon/hostcalls/guest"
	"lemon/hostcalls/spawn"
	"lemon/hostcalls/store"
	"lemon/policies/authority"
	"lemon/protocol"
)

// node is an env whose process module gets settings (as the worker hands
// them over) and which can restart on its state directory.
type node struct {
	*env
	pool     int
	settings map[string]any
}

func newNode(t *testing.T, pool int, settings map[string]any) *node {
	t.Helper()
	base, _ := filepath.EvalSymlinks(t.TempDir())
	n := &node{env: &env{tb: t, root: filepath.Join(base, "root"), state: filepath.Join(base, "state"), log: &hosttest.LogBuffer{}},
		pool: pool, settings: settings}
	os.MkdirAll(n.root, 0o700)
	n.start()
	t.Cleanup(n.close)
	return n
}

// start builds the node's families and host on its directories.
func (n *node) start() {
	tb := n.tb
	var err error
	if n.fs, err = fs.New(fs.Config{DefaultCwd: n.root, Roots: []string{n.root}, Home: n.root}); err != nil {
		tb.Fatal(err)
	}
	if n.st, err = store.New(store.Config{Path: filepath.Join(n.state, "store.db")}); err != nil {
		tb.Fatal(err)
	}
	if n.sp, err = spawn.New(spawn.Config{Store: n.st, Dirs: n.fs, WaitDelay: 200 * time.Millisecond}); err != nil {
		tb.Fatal(err)
	}
	g := guest.New(guest.Config{Settings: map[string]map[string]any{"process": n.settings}})
	ctx := context.Background()
	n.h, err = host.New(ctx, host.Config{CacheDir: hosttest.CacheDir(tb), PoolSize: n.pool, Ceiling: hostcalls.AllCapabilities,
		Tables: []hostcalls.Table{n.sp.Table(), n.st.Table(), g.Table()}, Logger: slog.New(slog.NewJSONHandler(n.log, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	wasm := hosttest.Build(tb, "plugins/process")
	if _, err := n.h.Load(ctx, hosttest.Pin("process", wasm), wasm); err != nil {
		tb.Fatal(err)
	}
}

// restart stops the node (host, spawner, store) and starts it again on
// the same state directory: a worker restart.
func (n *node) restart() {
	n.close()
	n.start()
}

// as invokes method for principal ("" without an execution context).
func (n *node) as(ctx context.Context, principal, method string, params map[string]any) (protocol.ProcessReceipt, *protocol.Error) {
	n.tb.Helper()
	raw, _ := json.Marshal(params)
	id := fmt.Sprintf("p%d-%d", invokeSeq.Add(1), time.Now().UnixNano())
	req := protocol.InvokeRequest{InvokeID: id, NodeID: "n1", Method: method, Args: raw, SessionGeneration: 1}
	if principal != "" {
		req.ExecutionContext = hosttest.ContextOf(n.tb, authority.ExecutionContext{RunID: id, Principal: principal,
			Provenance: "test", Capabilities: []string{"exec"}})
	}
	out, perr := n.h.Invoke(ctx, req)
	var rc protocol.ProcessReceipt
	if perr != nil {
		return rc, perr
	}
	if err := json.Unmarshal(out, &rc); err != nil {
		n.tb.Fatalf("payload %s: %v", out, err)
	}
	if err := rc.Validate(); err != nil {
		n.tb.Fatalf("invalid receipt %s: %v", out, err)
	}
	return rc, nil
}

// waitLines waits until file holds n lines.
func waitLines(t *testing.T, file string, n int) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if b, _ := os.ReadFile(file); strings.Count(string(b), "\n") >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never held %d lines", file, n)
}

// invokeSeq numbers invocations made from concurrent goroutines.
var invokeSeq atomic.Int64

func idParams(id string) map[string]any { return map[string]any{"nodeId": "n1", "processId": id} }

func domainOf(e *protocol.Error) string {
	if e == nil {
		return "<nil>"
	}
	return e.Code + "/" + e.DomainCode()
}

func wantState(t *testing.T, what string, rc protocol.ProcessReceipt, perr *protocol.Error, state string) {
	t.Helper()
	if perr != nil || rc.State != state {
		t.Fatalf("%s: %+v %v, want %s", what, rc, perr, state)
	}
}

// waitRunning polls get until id reads running.
func (n *node) waitRunning(t *testing.T, principal, id string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		rc, perr := n.as(context.Background(), principal, protocol.MethodProcessGet, idParams(id))
		if perr == nil && rc.State == protocol.ProcessStateRunning {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never read running", id)
}

// TestModuleOwnership carries TestAdvProcessOwnership: a run belongs to
// its execution context's principal. Another principal's get answers
// not_found, its cancel process_not_owner (nothing is signalled), its run
// under the same id process_id_conflict, also over a tombstone; the
// principal is durable across a restart.
func TestModuleOwnership(t *testing.T) {
	n := newNode(t, 2, nil)
	ctx := context.Background()
	run := runParams("owned-1", 30000, nil, "true")
	rc, perr := n.as(ctx, "alice", protocol.MethodProcessRun, run)
	wantState(t, "alice's run", rc, perr, protocol.ProcessStateCompleted)
	rc, perr = n.as(ctx, "bob", protocol.MethodProcessGet, idParams("owned-1"))
	wantState(t, "bob's get", rc, perr, protocol.ProcessStateNotFound)
	rc, perr = n.as(ctx, "", protocol.MethodProcessGet, idParams("owned-1"))
	wantState(t, "a get without a context", rc, perr, protocol.ProcessStateNotFound)
	rc, perr = n.as(ctx, "alice", protocol.MethodProcessGet, idParams("owned-1"))
	wantState(t, "alice's get", rc, perr, protocol.ProcessStateCompleted)
	if _, perr := n.as(ctx, "bob", protocol.MethodProcessCancel, idParams("owned-1")); domainOf(perr) != "FORBIDDEN/process_not_owner" {
		t.Fatalf("bob's cancel of a finished run: %v", perr)
	}
	if _, perr := n.as(ctx, "bob", protocol.MethodProcessRun, run); domainOf(perr) != "CONFLICT/process_id_conflict" {
		t.Fatalf("bob reusing the id with the same intent: %v", perr)
	}
	// A tombstone belongs to its principal too.
	rc, perr = n.as(ctx, "alice", protocol.MethodProcessCancel, idParams("tomb-1"))
	wantState(t, "alice's tombstone", rc, perr, protocol.ProcessStateCancelled)
	if _, perr := n.as(ctx, "bob", protocol.MethodProcessRun, runParams("tomb-1", 30000, nil, "true")); domainOf(perr) != "CONFLICT/process_id_conflict" {
		t.Fatalf("bob running under alice's tombstone: %v", perr)
	}
	if _, perr := n.as(ctx, "bob", protocol.MethodProcessCancel, idParams("tomb-1")); domainOf(perr) != "FORBIDDEN/process_not_owner" {
		t.Fatalf("bob cancelling alice's tombstone: %v", perr)
	}
	// An active run: bob's cancel signals nothing; alice's does.
	done := make(chan protocol.ProcessReceipt, 1)
	go func() {
		rc, _ := n.as(ctx, "alice", protocol.MethodProcessRun, runParams("active-1", 30000, nil, "sleep", "30"))
		done <- rc
	}()
	n.waitRunning(t, "alice", "active-1")
	rc, perr = n.as(ctx, "bob", protocol.MethodProcessGet, idParams("active-1"))
	wantState(t, "bob's get of a running run", rc, perr, protocol.ProcessStateNotFound)
	if _, perr := n.as(ctx, "bob", protocol.MethodProcessCancel, idParams("active-1")); domainOf(perr) != "FORBIDDEN/process_not_owner" {
		t.Fatalf("bob's cancel of a running run: %v", perr)
	}
	rc, perr = n.as(ctx, "alice", protocol.MethodProcessGet, idParams("active-1"))
	wantState(t, "after bob's cancel", rc, perr, protocol.ProcessStateRunning)
	rc, perr = n.as(ctx, "alice", protocol.MethodProcessCancel, idParams("active-1"))
	wantState(t, "alice's cancel", rc, perr, protocol.ProcessStateCancelled)
	if rc.ExitCode == nil || *rc.ExitCode != -9 {
		t.Fatalf("alice's cancel: exit %v, want -9", rc.ExitCode)
	}
	if rc := <-done; rc.State != protocol.ProcessStateCancelled || rc.ExitCode == nil || *rc.ExitCode != -9 {
		t.Fatalf("alice's run after her cancel: %+v", rc)
	}
	// The principal is durable: a restarted worker still tells them apart.
	n.restart()
	rc, perr = n.as(ctx, "bob", protocol.MethodProcessGet, idParams("owned-1"))
	wantState(t, "after restart, bob's get", rc, perr, protocol.ProcessStateNotFound)
	rc, perr = n.as(ctx, "alice", protocol.MethodProcessGet, idParams("owned-1"))
	wantState(t, "after restart, alice's get", rc, perr, protocol.ProcessStateCompleted)
	if rc.ExitCode == nil || *rc.ExitCode != 0 || rc.StdoutBase64 != nil || !rc.OutputTruncated {
		t.Fatalf("after restart: %+v, want exit 0 and unknown outputs", rc)
	}
}

// TestModuleSecondRun carries TestSecondRunNeverExecutesAgain and
// TestGetStates: a second run of an id never executes again; the same
// intent answers the receipt as it stands (running at once while it
// runs), any other field conflicts.
func TestModuleSecondRun(t *testing.T) {
	n := newNode(t, 2, nil)
	ctx := context.Background()
	count := filepath.Join(n.root, "count")
	script := `echo x >> "$1"; cat; sleep "$2"`
	first := runParams("again", 30000, []byte("in"), "sh", "-c", script, "sh", count, "0")
	rc, perr := n.as(ctx, "", protocol.MethodProcessRun, first)
	wantState(t, "first run", rc, perr, protocol.ProcessStateCompleted)
	if *rc.StdoutBase64 != *b64("in") {
		t.Fatalf("first run output %+v", rc)
	}
	rc, perr = n.as(ctx, "", protocol.MethodProcessRun, first)
	wantState(t, "same intent", rc, perr, protocol.ProcessStateCompleted)
	if rc.StdoutBase64 == nil || *rc.StdoutBase64 != *b64("in") || rc.ExitCode == nil || *rc.ExitCode != 0 {
		t.Fatalf("same intent: %+v, want the cached output", rc)
	}
	for name, p := range map[string]map[string]any{
		"stdin":   runParams("again", 30000, []byte("other"), "sh", "-c", script, "sh", count, "0"),
		"argv":    runParams("again", 30000, []byte("in"), "sh", "-c", script, "sh", count, "1"),
		"timeout": runParams("again", 30001, []byte("in"), "sh", "-c", script, "sh", count, "0"),
		"cwd": func() map[string]any {
			m := runParams("again", 30000, []byte("in"), "sh", "-c", script, "sh", count, "0")
			m["cwd"] = n.root
			return m
		}(),
		"maxOutputBytes": func() map[string]any {
			m := runParams("again", 30000, []byte("in"), "sh", "-c", script, "sh", count, "0")
			m["maxOutputBytes"] = 1000
			return m
		}(),
	} {
		if _, perr := n.as(ctx, "", protocol.MethodProcessRun, p); domainOf(perr) != "CONFLICT/process_id_conflict" {
			t.Fatalf("another %s: %v", name, perr)
		}
	}
	// While it runs, the same intent answers running at once.
	slow := runParams("slow", 30000, nil, "sh", "-c", script, "sh", count, "30")
	done := make(chan protocol.ProcessReceipt, 1)
	go func() { rc, _ := n.as(ctx, "", protocol.MethodProcessRun, slow); done <- rc }()
	n.waitRunning(t, "", "slow")
	waitLines(t, count, 2)
	rc, perr = n.as(ctx, "", protocol.MethodProcessRun, slow)
	wantState(t, "same intent while running", rc, perr, protocol.ProcessStateRunning)
	if rc.ExitCode != nil || rc.StdoutBase64 != nil || !rc.OutputTruncated {
		t.Fatalf("running receipt %+v", rc)
	}
	rc, perr = n.as(ctx, "", protocol.MethodProcessCancel, idParams("slow"))
	wantState(t, "cancel", rc, perr, protocol.ProcessStateCancelled)
	<-done
	// The cancel after completion is the actual receipt; nothing is killed.
	rc, perr = n.as(ctx, "", protocol.MethodProcessCancel, idParams("again"))
	wantState(t, "cancel after completion", rc, perr, protocol.ProcessStateCompleted)
	b, _ := os.ReadFile(count)
	if got := strings.Count(string(b), "x"); got != 2 {
		t.Fatalf("the commands ran %d times, want 2 (one per id)", got)
	}
}

// TestModuleRetainedLimitBoundary carries TestRetainedLimitBoundary and
// TestConfigLimits: max_retained_receipts (a worker setting) counts runs
// and tombstones; at the limit passes, one past is process_receipt_limit
// without executing or spending the id; a refused exec spends nothing.
func TestModuleRetainedLimitBoundary(t *testing.T) {
	n := newNode(t, 1, map[string]any{"max_retained_receipts": 3})
	ctx := context.Background()
	if _, perr := n.as(ctx, "", protocol.MethodProcessRun, runParams("missing", 30000, nil, "no-such-program-x")); domainOf(perr) != "NOT_FOUND/executable_not_found" {
		t.Fatalf("missing executable: %v", perr)
	}
	for _, id := range []string{"a", "b"} {
		rc, perr := n.as(ctx, "", protocol.MethodProcessRun, runParams(id, 30000, nil, "true"))
		wantState(t, id, rc, perr, protocol.ProcessStateCompleted)
	}
	rc, perr := n.as(ctx, "", protocol.MethodProcessCancel, idParams("c"))
	wantState(t, "the third id, a tombstone, at the limit", rc, perr, protocol.ProcessStateCancelled)
	marker := filepath.Join(n.root, "ran")
	if _, perr := n.as(ctx, "", protocol.MethodProcessRun, runParams("d", 30000, nil, "touch", marker)); domainOf(perr) != "UNAVAILABLE/process_receipt_limit" ||
		perr.Details.RetrySafe == nil || !*perr.Details.RetrySafe {
		t.Fatalf("one past the limit: %v", perr)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("a refused run executed: %v", err)
	}
	if _, perr := n.as(ctx, "", protocol.MethodProcessCancel, idParams("e")); domainOf(perr) != "UNAVAILABLE/process_receipt_limit" {
		t.Fatalf("a tombstone past the limit: %v", perr)
	}
	rc, perr = n.as(ctx, "", protocol.MethodProcessGet, idParams("d"))
	wantState(t, "the refused id", rc, perr, protocol.ProcessStateNotFound)
	// Existing ids still answer at the limit.
	rc, perr = n.as(ctx, "", protocol.MethodProcessRun, runParams("a", 30000, nil, "true"))
	wantState(t, "an existing id at the limit", rc, perr, protocol.ProcessStateCompleted)
	// The count is durable.
	n.restart()
	if _, perr := n.as(ctx, "", protocol.MethodProcessRun, runParams("d", 30000, nil, "touch", marker)); domainOf(perr) != "UNAVAILABLE/process_receipt_limit" {
		t.Fatalf("one past the limit after a restart: %v", perr)
	}
}

// TestModuleConcurrentAdmissionsAtRetainedLimit carries
// TestConcurrentAdmissionsAtRetainedLimit: with 2 of 5 slots taken, 8
// concurrent runs of distinct ids admit exactly 3.
func TestModuleConcurrentAdmissionsAtRetainedLimit(t *testing.T) {
	n := newNode(t, 4, map[string]any{"max_retained_receipts": 5})
	ctx := context.Background()
	for _, id := range []string{"x1", "x2"} {
		rc, perr := n.as(ctx, "", protocol.MethodProcessRun, runParams(id, 30000, nil, "true"))
		wantState(t, id, rc, perr, protocol.ProcessStateCompleted)
	}
	var (
		mu             sync.Mutex
		ok, refused    int
		wg             sync.WaitGroup
		params, unexpt []string
	)
	for i := 0; i < 8; i++ {
		raw, _ := json.Marshal(runParams(fmt.Sprintf("c%d", i), 30000, nil, "true"))
		params = append(params, string(raw))
	}
	for i, p := range params {
		wg.Add(1)
		go func(i int, p string) {
			defer wg.Done()
			_, perr := n.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: fmt.Sprintf("cc%d", i), NodeID: "n1",
				Method: protocol.MethodProcessRun, Args: json.RawMessage(p), SessionGeneration: 1})
			mu.Lock()
			defer mu.Unlock()
			switch domainOf(perr) {
			case "<nil>":
				ok++
			case "UNAVAILABLE/process_receipt_limit":
				refused++
			default:
				unexpt = append(unexpt, domainOf(perr))
			}
		}(i, p)
	}
	wg.Wait()
	if ok != 3 || refused != 5 || len(unexpt) > 0 {
		t.Fatalf("admitted %d, refused %d, other %v; want 3 and 5", ok, refused, unexpt)
	}
}

// TestModuleOutputCacheBound carries TestOutputCacheBounds (the count):
// output_cache_entries = 2 keeps the outputs of the 2 newest terminal
// receipts; an older one reads null with outputTruncated, its state and
// exit unchanged.
func TestModuleOutputCacheBound(t *testing.T) {
	n := newNode(t, 1, map[string]any{"output_cache_entries": 2})
	ctx := context.Background()
	for _, id := range []string{"o1", "o2", "o3"} {
		rc, perr := n.as(ctx, "", protocol.MethodProcessRun, runParams(id, 30000, nil, "echo", id))
		wantState(t, id, rc, perr, protocol.ProcessStateCompleted)
	}
	rc, perr := n.as(ctx, "", protocol.MethodProcessGet, idParams("o1"))
	wantState(t, "o1", rc, perr, protocol.ProcessStateCompleted)
	if rc.StdoutBase64 != nil || !rc.OutputTruncated || rc.ExitCode == nil || *rc.ExitCode != 0 {
		t.Fatalf("the oldest receipt past the cache: %+v", rc)
	}
	for _, id := range []string{"o2", "o3"} {
		rc, perr := n.as(ctx, "", protocol.MethodProcessGet, idParams(id))
		wantState(t, id, rc, perr, protocol.ProcessStateCompleted)
		if rc.StdoutBase64 == nil || *rc.StdoutBase64 != *b64(id + "\n") || rc.OutputTruncated {
			t.Fatalf("%s: %+v, want its cached output", id, rc)
		}
	}
}

// TestModuleRestartMakesRunOutcomeUnknown carries
// TestRestartMakesActiveOutcomeUnknownAndNeverReruns: a run in progress
// when the worker stops reads outcome_unknown afterwards, to get and to a
// same-intent run, and never runs again.
func TestModuleRestartMakesRunOutcomeUnknown(t *testing.T) {
	n := newNode(t, 2, nil)
	ctx, cancel := context.WithCancel(context.Background())
	count := filepath.Join(n.root, "count")
	run := runParams("inflight", 30000, nil, "sh", "-c", `echo x >> "$1"; sleep 30`, "sh", count)
	done := make(chan struct{})
	go func() { n.as(ctx, "", protocol.MethodProcessRun, run); close(done) }()
	n.waitRunning(t, "", "inflight")
	waitLines(t, count, 1)
	// The worker stops without the module learning how the run ended (a
	// SIGKILL'd worker never does; the e2e test kills a real one).
	n.h.Close(context.Background())
	cancel()
	<-done
	n.sp.Close()
	n.st.Close()
	n.fs.Close()
	n.h = nil
	n.start()
	bg := context.Background()
	rc, perr := n.as(bg, "", protocol.MethodProcessGet, idParams("inflight"))
	wantState(t, "get after the restart", rc, perr, protocol.ProcessStateOutcomeUnknown)
	rc, perr = n.as(bg, "", protocol.MethodProcessRun, run)
	wantState(t, "the same run after the restart", rc, perr, protocol.ProcessStateOutcomeUnknown)
	rc, perr = n.as(bg, "", protocol.MethodProcessCancel, idParams("inflight"))
	wantState(t, "cancel after the restart", rc, perr, protocol.ProcessStateOutcomeUnknown)
	b, _ := os.ReadFile(count)
	if got := strings.Count(string(b), "x"); got != 1 {
		t.Fatalf("the command ran %d times, want 1", got)
	}
}

// TestModuleRequestEndStopsRun carries TestRequestEndStopsRun: when the
// awaiting request ends, the host stops the run and a later get settles
// its receipt as cancelled with the observed -9.
func TestModuleRequestEndStopsRun(t *testing.T) {
	n := newNode(t, 2, nil)
	marker := filepath.Join(n.root, "started")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		rc, perr := n.as(ctx, "", protocol.MethodProcessRun, runParams("ended", 30000, nil, "sh", "-c", `echo x > "$1"; exec sleep 30`, "sh", marker))
		t.Logf("the awaiting run: %+v %v", rc, perr)
		close(done)
	}()
	n.waitRunning(t, "", "ended")
	waitLines(t, marker, 1) // the process runs: the request's end must stop it
	t0 := time.Now()
	cancel()
	<-done
	t.Logf("done after %v", time.Since(t0))
	for i := 0; i < 500; i++ {
		rc, perr := n.as(context.Background(), "", protocol.MethodProcessGet, idParams("ended"))
		if perr != nil {
			t.Fatal(perr)
		}
		if rc.State != protocol.ProcessStateRunning {
			if rc.State != protocol.ProcessStateCancelled || rc.ExitCode == nil || *rc.ExitCode != -9 {
				t.Fatalf("after the request ended: %+v", rc)
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the run never ended")
}

// TestModuleRunCancelRace carries TestTombstoneRace and
// TestRunCancelRaceUnderGroupCommit: racing runs and cancels of one id,
// several ids at once, end in exactly one outcome per id: a tombstone and
// nothing ever ran, or one admitted run that executed at most once.
func TestModuleRunCancelRace(t *testing.T) {
	n := newNode(t, 4, nil)
	ctx := context.Background()
	const ids = 6
	var wg sync.WaitGroup
	for k := 0; k < ids; k++ {
		id, marker := fmt.Sprintf("race-%d", k), filepath.Join(n.root, fmt.Sprintf("m%d", k))
		run := runParams(id, 30000, nil, "sh", "-c", `echo x >> "$1"`, "sh", marker)
		for j := 0; j < 2; j++ {
			wg.Add(2)
			go func() { defer wg.Done(); n.as(ctx, "", protocol.MethodProcessRun, run) }()
			go func() { defer wg.Done(); n.as(ctx, "", protocol.MethodProcessCancel, idParams(id)) }()
		}
	}
	wg.Wait()
	for k := 0; k < ids; k++ {
		id, marker := fmt.Sprintf("race-%d", k), filepath.Join(n.root, fmt.Sprintf("m%d", k))
		var rc protocol.ProcessReceipt
		for i := 0; i < 500; i++ {
			var perr *protocol.Error
			if rc, perr = n.as(ctx, "", protocol.MethodProcessGet, idParams(id)); perr != nil {
				t.Fatal(perr)
			}
			if rc.State != protocol.ProcessStateRunning {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		b, _ := os.ReadFile(marker)
		lines := strings.Count(string(b), "\n")
		switch {
		case lines > 1:
			t.Fatalf("%s ran %d times", id, lines)
		case rc.State == protocol.ProcessStateCancelled && rc.ExitCode == nil && lines != 0:
			t.Fatalf("%s is a tombstone but ran", id)
		case rc.State != protocol.ProcessStateCancelled && rc.State != protocol.ProcessStateCompleted:
			t.Fatalf("%s: %+v", id, rc)
		}
	}
}
