package spawn

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lemon/hostcalls/contract"
	"lemon/hostcalls/store"
	"lemon/protocol"
)

// primCall calls primitive name through s's table (decode, call, encode as
// the gate runs it) and decodes its result into out.
func primCall(t *testing.T, s *Spawner, c *fakeCall, name string, args, out any) error {
	t.Helper()
	raw, _ := json.Marshal(args)
	res, err := tableFunc(s, name)(context.Background(), c, raw)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(res, out); err != nil {
		t.Fatalf("%s result %s: %v", name, res, err)
	}
	return nil
}

func startArgs(c *fakeCall, stdin string, argv ...string) contract.SpawnStartArgs {
	return contract.SpawnStartArgs{Argv: argv, Cwd: ".", StdinBlob: c.PutBlob([]byte(stdin)),
		TimeoutMs: 30000, MaxOutputBytes: protocol.ProcessMaxOutputMax}
}

// waitExit suspends (as a module would) on spawn.wait's handle until the
// run has ended, then returns its exit and output.
func waitExit(t *testing.T, s *Spawner, c *fakeCall, run string) (*contract.SpawnExit, string, string) {
	t.Helper()
	for i := 0; i < 3; i++ {
		var w contract.SpawnWaitResult
		if err := primCall(t, s, c, "spawn.wait", contract.SpawnRunRef{Run: run}, &w); err != nil {
			t.Fatalf("spawn.wait: %v", err)
		}
		switch w.State {
		case contract.SpawnRunning:
			select {
			case <-c.done:
			case <-time.After(time.Minute):
				t.Fatal("the run did not end within a minute")
			}
		case contract.SpawnExited:
			var stdout, stderr []byte
			if w.Exit.StdoutBlob != nil {
				stdout, _ = c.Blob(*w.Exit.StdoutBlob)
				stderr, _ = c.Blob(*w.Exit.StderrBlob)
			}
			return w.Exit, string(stdout), string(stderr)
		default:
			t.Fatalf("spawn.wait: %+v", w)
		}
	}
	t.Fatal("spawn.wait never reported the end")
	return nil, "", ""
}

// spawn.start → suspend → spawn.wait gives the exit status, the exact
// streams as blobs, the times, and no receipt: the receipt namespace is
// untouched and the containment record is gone once the run ended.
func TestPrimStartWaitExit(t *testing.T) {
	f := newFixture(t, nil)
	c := newCall("inv-1", 0)
	var st contract.SpawnStartResult
	if err := primCall(t, f.s, c, "spawn.start", startArgs(c, "in\x00put", "sh", "-c", "cat; printf err >&2; exit 3"), &st); err != nil {
		t.Fatal(err)
	}
	if validRunID(st.Run) != nil || st.Handle == 0 {
		t.Fatalf("spawn.start: %+v", st)
	}
	<-c.done
	x, stdout, stderr := waitExit(t, f.s, c, st.Run)
	if x.ExitCode == nil || *x.ExitCode != 3 || x.Signal != 0 || x.Stopped != "" || x.SignalFailed || x.OutputTruncated {
		t.Fatalf("exit %+v", x)
	}
	if stdout != "in\x00put" || stderr != "err" {
		t.Fatalf("streams %q %q", stdout, stderr)
	}
	if x.StartedMs == 0 || x.EndedMs < x.StartedMs {
		t.Fatalf("times %d..%d", x.StartedMs, x.EndedMs)
	}
	f.s.ns.View(func(tx *store.Tx) error {
		if n := tx.Count("r/"); n != 0 {
			t.Errorf("a primitive run wrote %d receipt records", n)
		}
		if n := tx.Count(primPrefix); n != 0 {
			t.Errorf("%d containment records left after the run", n)
		}
		return nil
	})
	// Waiting again reads the same end; the run stays known for primKeep.
	x2, stdout2, _ := waitExit(t, f.s, newCall("inv-2", 0), st.Run)
	if *x2.ExitCode != 3 || stdout2 != stdout {
		t.Fatalf("second wait %+v %q", x2, stdout2)
	}
}

// spawn.signal gives the group exactly one SIGKILL: the first call is
// "sent", later ones "already" or "exited"; the exit names signal 9 and
// the stop reason cancel.
func TestPrimSignalOnce(t *testing.T) {
	f := newFixture(t, nil)
	kills := 0
	f.s.killFn = func(r *run) error { kills++; return r.killMembers() }
	c := newCall("inv-1", 0)
	var st contract.SpawnStartResult
	if err := primCall(t, f.s, c, "spawn.start", startArgs(c, "", "sleep", "30"), &st); err != nil {
		t.Fatal(err)
	}
	var sig contract.SpawnSignalResult
	if err := primCall(t, f.s, c, "spawn.signal", contract.SpawnRunRef{Run: st.Run}, &sig); err != nil || sig.Outcome != contract.SpawnSignalSent {
		t.Fatalf("first signal: %+v %v", sig, err)
	}
	primCall(t, f.s, c, "spawn.signal", contract.SpawnRunRef{Run: st.Run}, &sig)
	if sig.Outcome != contract.SpawnSignalAlready && sig.Outcome != contract.SpawnExited {
		t.Fatalf("second signal: %+v", sig)
	}
	x, _, _ := waitExit(t, f.s, c, st.Run)
	if x.ExitCode != nil || x.Signal != 9 || x.Stopped != reasonCancel {
		t.Fatalf("exit %+v", x)
	}
	primCall(t, f.s, c, "spawn.signal", contract.SpawnRunRef{Run: st.Run}, &sig)
	if sig.Outcome != contract.SpawnExited {
		t.Fatalf("signal after the end: %+v", sig)
	}
	if kills != 1 {
		t.Fatalf("%d group signals, want 1", kills)
	}
}

// The timeout and the output cap are the host's: at the cap the output is
// whole, one byte past it the group is stopped and the output truncated.
func TestPrimOutputCapBoundary(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		n       int
		stopped string
	}{{100, ""}, {101, reasonOverflow}} {
		c := newCall("inv", 0)
		a := startArgs(c, "", "head", "-c", strconv.Itoa(tc.n), "/dev/zero")
		a.MaxOutputBytes = 100
		var st contract.SpawnStartResult
		if err := primCall(t, f.s, c, "spawn.start", a, &st); err != nil {
			t.Fatal(err)
		}
		x, stdout, _ := waitExit(t, f.s, c, st.Run)
		if len(stdout) != 100 || x.OutputTruncated != (tc.n > 100) {
			t.Fatalf("%d bytes: kept %d, truncated %v", tc.n, len(stdout), x.OutputTruncated)
		}
		if x.Stopped != tc.stopped && !(tc.stopped != "" && x.ExitCode != nil) {
			t.Fatalf("%d bytes: stopped %q, want %q (%+v)", tc.n, x.Stopped, tc.stopped, x)
		}
	}
}

// The node.process.run limits hold for the primitive, each at its
// boundary, and the context's max_timeout_ms too; nothing starts.
func TestPrimLimits(t *testing.T) {
	f := newFixture(t, nil)
	c := newCall("inv", 0)
	try := func(mut func(*contract.SpawnStartArgs), maxTimeout int64) error {
		a := startArgs(c, "", "true")
		mut(&a)
		c.inv.Authority.MaxTimeoutMs = maxTimeout
		var st contract.SpawnStartResult
		err := primCall(t, f.s, c, "spawn.start", a, &st)
		if err == nil {
			waitExit(t, f.s, c, st.Run)
		}
		return err
	}
	for _, tc := range []struct {
		name       string
		mut        func(*contract.SpawnStartArgs)
		maxTimeout int64
		want       string
	}{
		{"timeout 1000", func(a *contract.SpawnStartArgs) { a.TimeoutMs = 1000 }, 0, "<nil>"},
		{"timeout 999", func(a *contract.SpawnStartArgs) { a.TimeoutMs = 999 }, 0, "INVALID_PARAMS/"},
		{"timeout 1800000", func(a *contract.SpawnStartArgs) { a.TimeoutMs = 1800000 }, 0, "<nil>"},
		{"timeout 1800001", func(a *contract.SpawnStartArgs) { a.TimeoutMs = 1800001 }, 0, "INVALID_PARAMS/"},
		{"output 1", func(a *contract.SpawnStartArgs) { a.MaxOutputBytes = 1 }, 0, "<nil>"},
		{"output 0", func(a *contract.SpawnStartArgs) { a.MaxOutputBytes = 0 }, 0, "INVALID_PARAMS/"},
		{"output 1048577", func(a *contract.SpawnStartArgs) { a.MaxOutputBytes = 1048577 }, 0, "INVALID_PARAMS/"},
		{"max_timeout_ms at", func(a *contract.SpawnStartArgs) { a.TimeoutMs = 5000 }, 5000, "<nil>"},
		{"max_timeout_ms past", func(a *contract.SpawnStartArgs) { a.TimeoutMs = 5001 }, 5000, "FORBIDDEN/limit_exceeded"},
		{"relative argv[0]", func(a *contract.SpawnStartArgs) { a.Argv = []string{"./true"} }, 0, "INVALID_PARAMS/"},
		{"cwd ..", func(a *contract.SpawnStartArgs) { a.Cwd = "../x" }, 0, "INVALID_PARAMS/"},
		{"cwd outside", func(a *contract.SpawnStartArgs) { a.Cwd = "/" }, 0, "FORBIDDEN/path_not_allowed"},
		{"no such command", func(a *contract.SpawnStartArgs) { a.Argv = []string{"no-such-command-x"} }, 0, "NOT_FOUND/executable_not_found"},
		{"no stdin blob", func(a *contract.SpawnStartArgs) { a.StdinBlob = 999 }, 0, "INVALID_PARAMS/"},
	} {
		if got := domain(try(tc.mut, tc.maxTimeout)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// The command policy holds for the primitive.
func TestPrimCommandPolicy(t *testing.T) {
	allowed := []string{"true"}
	f := newFixture(t, func(c *Config) { c.AllowedCommands = &allowed })
	c := newCall("inv", 0)
	var st contract.SpawnStartResult
	if err := primCall(t, f.s, c, "spawn.start", startArgs(c, "", "true"), &st); err != nil {
		t.Fatalf("allowed: %v", err)
	}
	waitExit(t, f.s, c, st.Run)
	if err := primCall(t, f.s, c, "spawn.start", startArgs(c, "", "sh", "-c", "true"), &st); domain(err) != "FORBIDDEN/command_not_allowed" {
		t.Fatalf("not allowed: %v", err)
	}
}

// Runs belong to the principal that started them: another principal can
// neither wait on nor signal one; an unknown or malformed id is refused.
func TestPrimOwnership(t *testing.T) {
	f := newFixture(t, nil)
	c := newCall("inv", 0)
	c.inv.Authority.Principal = "alice"
	var st contract.SpawnStartResult
	if err := primCall(t, f.s, c, "spawn.start", startArgs(c, "", "sleep", "30"), &st); err != nil {
		t.Fatal(err)
	}
	bob := newCall("inv-b", 0)
	bob.inv.Authority.Principal = "bob"
	var w contract.SpawnWaitResult
	if err := primCall(t, f.s, bob, "spawn.wait", contract.SpawnRunRef{Run: st.Run}, &w); domain(err) != "FORBIDDEN/process_not_owner" {
		t.Fatalf("foreign wait: %v", err)
	}
	var sig contract.SpawnSignalResult
	if err := primCall(t, f.s, bob, "spawn.signal", contract.SpawnRunRef{Run: st.Run}, &sig); domain(err) != "FORBIDDEN/process_not_owner" {
		t.Fatalf("foreign signal: %v", err)
	}
	if err := primCall(t, f.s, c, "spawn.signal", contract.SpawnRunRef{Run: st.Run}, &sig); err != nil || sig.Outcome != contract.SpawnSignalSent {
		t.Fatalf("owner signal: %+v %v", sig, err)
	}
	waitExit(t, f.s, c, st.Run)
	if err := primCall(t, f.s, c, "spawn.wait", contract.SpawnRunRef{Run: "r0000000000000000"}, &w); err != nil || w.State != contract.SpawnUnknown {
		t.Fatalf("unknown run: %+v %v", w, err)
	}
	for _, bad := range []string{"", "r000000000000000", "r00000000000000000", "x0000000000000000", "r000000000000000g"} {
		if err := primCall(t, f.s, c, "spawn.wait", contract.SpawnRunRef{Run: bad}, &w); domain(err) != "INVALID_PARAMS/" {
			t.Errorf("run %q: %v", bad, err)
		}
	}
}

// Primitive runs share the 16-active budget with spawn.run: at 16 the
// 17th is refused and nothing starts; one ending frees a slot.
func TestPrimActiveBudget(t *testing.T) {
	f := newFixture(t, nil)
	c := newCall("inv", 0)
	runs := make([]string, 0, protocol.ProcessMaxActive)
	for i := 0; i < protocol.ProcessMaxActive; i++ {
		var st contract.SpawnStartResult
		if err := primCall(t, f.s, c, "spawn.start", startArgs(c, "", "sleep", "30"), &st); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		runs = append(runs, st.Run)
	}
	marker := filepath.Join(f.root, "ran")
	var st contract.SpawnStartResult
	if err := primCall(t, f.s, c, "spawn.start", startArgs(c, "", "touch", marker), &st); domain(err) != "UNAVAILABLE/process_receipt_limit" {
		t.Fatalf("17th: %v", err)
	}
	if _, _, err := f.start(context.Background(), req("p17", "true")); domain(err) != "UNAVAILABLE/process_receipt_limit" {
		t.Fatalf("17th through spawn.run: %v", err)
	}
	var sig contract.SpawnSignalResult
	primCall(t, f.s, c, "spawn.signal", contract.SpawnRunRef{Run: runs[0]}, &sig)
	waitExit(t, f.s, c, runs[0])
	if err := primCall(t, f.s, c, "spawn.start", startArgs(c, "", "touch", marker), &st); err != nil {
		t.Fatalf("after one ended: %v", err)
	}
	waitExit(t, f.s, c, st.Run)
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the admitted run did not run")
	}
}

// A worker that dies with a primitive run in flight leaves its processes
// running only until it restarts: New stops them by the containment
// record and removes the record. Nothing else of the run survives.
func TestPrimRestartStopsSurvivors(t *testing.T) {
	f := newFixture(t, nil)
	c := newCall("inv", 0)
	pidFile := filepath.Join(f.root, "pid")
	var st contract.SpawnStartResult
	if err := primCall(t, f.s, c, "spawn.start", startArgs(c, "", "sh", "-c", "echo $$ > "+pidFile+"; exec sleep 600"), &st); err != nil {
		t.Fatal(err)
	}
	var pid int
	if !settled(func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}) {
		t.Fatal("the run never wrote its pid")
	}
	f.reopen()
	if !gone(pid) {
		t.Fatalf("pid %d survived the restart", pid)
	}
	f.s.ns.View(func(tx *store.Tx) error {
		if n := tx.Count(primPrefix); n != 0 {
			t.Errorf("%d containment records after the restart", n)
		}
		return nil
	})
	var w contract.SpawnWaitResult
	if err := primCall(t, f.s, c, "spawn.wait", contract.SpawnRunRef{Run: st.Run}, &w); err != nil || w.State != contract.SpawnUnknown {
		t.Fatalf("wait after restart: %+v %v", w, err)
	}
}

// Output too large for the waiting invocation's connection is null there.
func TestPrimWaitRespectsResultRoom(t *testing.T) {
	f := newFixture(t, nil)
	c := newCall("inv", 0)
	var st contract.SpawnStartResult
	if err := primCall(t, f.s, c, "spawn.start", startArgs(c, "", "head", "-c", "100000", "/dev/zero"), &st); err != nil {
		t.Fatal(err)
	}
	<-c.done
	small := newCall("inv-s", 8192)
	var w contract.SpawnWaitResult
	if err := primCall(t, f.s, small, "spawn.wait", contract.SpawnRunRef{Run: st.Run}, &w); err != nil || w.Exit == nil {
		t.Fatalf("wait: %+v %v", w, err)
	}
	if w.Exit.StdoutBlob != nil || !w.Exit.OutputTruncated || *w.Exit.ExitCode != 0 {
		t.Fatalf("small room: %+v", w.Exit)
	}
	x, stdout, _ := waitExit(t, f.s, c, st.Run)
	if len(stdout) != 100000 || x.OutputTruncated {
		t.Fatalf("default room: %d bytes, truncated %v", len(stdout), x.OutputTruncated)
	}
}

// At most primMaxEnded ended runs stay known to spawn.wait: at the bound
// the oldest is still there, one past it the oldest is forgotten
// ("unknown") and the newest kept.
func TestPrimEndedRunsBounded(t *testing.T) {
	f := newFixture(t, nil)
	c := newCall("inv", 0)
	var ids []string
	for i := 0; i <= primMaxEnded; i++ {
		var st contract.SpawnStartResult
		if err := primCall(t, f.s, c, "spawn.start", startArgs(c, "", "true"), &st); err != nil {
			t.Fatal(err)
		}
		<-c.done
		ids = append(ids, st.Run)
		if i == primMaxEnded-1 {
			var w contract.SpawnWaitResult
			if primCall(t, f.s, c, "spawn.wait", contract.SpawnRunRef{Run: ids[0]}, &w); w.State != contract.SpawnExited {
				t.Fatalf("at the bound the oldest reads %+v", w)
			}
		}
	}
	var w contract.SpawnWaitResult
	if primCall(t, f.s, c, "spawn.wait", contract.SpawnRunRef{Run: ids[0]}, &w); w.State != contract.SpawnUnknown {
		t.Fatalf("one past the bound the oldest reads %+v", w)
	}
	if primCall(t, f.s, c, "spawn.wait", contract.SpawnRunRef{Run: ids[1]}, &w); w.State != contract.SpawnExited {
		t.Fatalf("the second oldest reads %+v", w)
	}
	if primCall(t, f.s, c, "spawn.wait", contract.SpawnRunRef{Run: ids[primMaxEnded]}, &w); w.State != contract.SpawnExited {
		t.Fatalf("the newest reads %+v", w)
	}
}

// A first group signal that fails is process_signal_failed (effect may
// have applied), never retried: a second spawn.signal is "already" and
// the end says signalFailed with no stop reason.
func TestPrimSignalFailure(t *testing.T) {
	f := newFixture(t, nil)
	kills := 0
	f.s.killFn = func(*run) error { kills++; return unix.EPERM }
	c := newCall("inv", 0)
	var st contract.SpawnStartResult
	if err := primCall(t, f.s, c, "spawn.start", startArgs(c, "", "sleep", "0.3"), &st); err != nil {
		t.Fatal(err)
	}
	var sig contract.SpawnSignalResult
	err := primCall(t, f.s, c, "spawn.signal", contract.SpawnRunRef{Run: st.Run}, &sig)
	if domain(err) != "INTERNAL_ERROR/process_signal_failed" {
		t.Fatalf("first signal: %v", err)
	}
	if pe := err.(*protocol.Error); *pe.Details.RetrySafe || !*pe.Details.MutationMayHaveApplied {
		t.Fatalf("retry details %+v", pe.Details)
	}
	if err := primCall(t, f.s, c, "spawn.signal", contract.SpawnRunRef{Run: st.Run}, &sig); err != nil || sig.Outcome != contract.SpawnSignalAlready {
		t.Fatalf("second signal: %+v %v", sig, err)
	}
	x, _, _ := waitExit(t, f.s, c, st.Run)
	if !x.SignalFailed || x.Stopped != "" || kills != 1 {
		t.Fatalf("exit %+v after %d signals", x, kills)
	}
}

// spawn.release forgets an ended run: true once, then false, and
// spawn.wait answers "unknown"; a running run is never released; another
// principal's run is refused.
func TestPrimRelease(t *testing.T) {
	f := newFixture(t, nil)
	c := newCall("inv", 0)
	c.inv.Authority.Principal = "alice"
	var st contract.SpawnStartResult
	if err := primCall(t, f.s, c, "spawn.start", startArgs(c, "", "sleep", "30"), &st); err != nil {
		t.Fatal(err)
	}
	var rel contract.SpawnReleaseResult
	if err := primCall(t, f.s, c, "spawn.release", contract.SpawnRunRef{Run: st.Run}, &rel); err != nil || rel.Released {
		t.Fatalf("release while running: %+v %v", rel, err)
	}
	bob := newCall("inv-b", 0)
	bob.inv.Authority.Principal = "bob"
	if err := primCall(t, f.s, bob, "spawn.release", contract.SpawnRunRef{Run: st.Run}, &rel); domain(err) != "FORBIDDEN/process_not_owner" {
		t.Fatalf("foreign release: %v", err)
	}
	var sig contract.SpawnSignalResult
	primCall(t, f.s, c, "spawn.signal", contract.SpawnRunRef{Run: st.Run}, &sig)
	waitExit(t, f.s, c, st.Run)
	if err := primCall(t, f.s, c, "spawn.release", contract.SpawnRunRef{Run: st.Run}, &rel); err != nil || !rel.Released {
		t.Fatalf("release after the end: %+v %v", rel, err)
	}
	if err := primCall(t, f.s, c, "spawn.release", contract.SpawnRunRef{Run: st.Run}, &rel); err != nil || rel.Released {
		t.Fatalf("second release: %+v %v", rel, err)
	}
	var w contract.SpawnWaitResult
	if err := primCall(t, f.s, c, "spawn.wait", contract.SpawnRunRef{Run: st.Run}, &w); err != nil || w.State != contract.SpawnUnknown {
		t.Fatalf("wait after release: %+v %v", w, err)
	}
	f.s.mu.Lock()
	n := len(f.s.ended)
	f.s.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d ended runs held after the release", n)
	}
}

// spawn.start may be given the run id (a module records it before the
// start): the run takes it; an id this worker knows, or one a start in
// flight claimed (spawn.wait answers "starting" meanwhile), is CONFLICT
// already_exists and starts nothing; an id that is not one is
// INVALID_PARAMS run.
func TestPrimChosenRunID(t *testing.T) {
	f := newFixture(t, nil)
	c := newCall("inv-1", 0)
	args := startArgs(c, "", "true")
	args.Run = "r0123456789abcdef"
	var st contract.SpawnStartResult
	if err := primCall(t, f.s, c, "spawn.start", args, &st); err != nil || st.Run != args.Run {
		t.Fatalf("spawn.start with a chosen id: %+v %v", st, err)
	}
	<-c.done
	if x, _, _ := waitExit(t, f.s, c, st.Run); x.ExitCode == nil || *x.ExitCode != 0 {
		t.Fatalf("exit %+v", x)
	}
	marker := filepath.Join(f.root, "again")
	again := startArgs(c, "", "touch", marker)
	again.Run = args.Run
	if err := primCall(t, f.s, c, "spawn.start", again, &st); domain(err) != "CONFLICT/already_exists" {
		t.Fatalf("a known run id: %v", err)
	}
	f.s.mu.Lock()
	f.s.claimed["r1111111111111111"] = true
	f.s.mu.Unlock()
	var w contract.SpawnWaitResult
	if err := primCall(t, f.s, c, "spawn.wait", contract.SpawnRunRef{Run: "r1111111111111111"}, &w); err != nil || w.State != contract.SpawnStarting {
		t.Fatalf("spawn.wait of a claimed id: %+v %v", w, err)
	}
	again.Run = "r1111111111111111"
	if err := primCall(t, f.s, c, "spawn.start", again, &st); domain(err) != "CONFLICT/already_exists" {
		t.Fatalf("a claimed run id: %v", err)
	}
	for _, bad := range []string{"r0123", "x0123456789abcdef", "r0123456789abcdeg", "r0123456789abcdef0"} {
		again.Run = bad
		if err := primCall(t, f.s, c, "spawn.start", again, &st); !strings.HasPrefix(domain(err), "INVALID_PARAMS") {
			t.Fatalf("run %q: %v", bad, err)
		}
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("a refused start ran: %v", err)
	}
}
