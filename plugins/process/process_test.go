//go:build !wasip1

// Tests of the process module through the real host: the wasm module, the
// gate, suspension, and the spawn and fs host calls.
package main_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lemon/host"
	"lemon/host/hosttest"
	"lemon/hostcalls"
	"lemon/hostcalls/fs"
	"lemon/hostcalls/guest"
	"lemon/hostcalls/spawn"
	"lemon/hostcalls/store"
	"lemon/protocol"
)

func TestMain(m *testing.M) { hosttest.Main(m) }

type env struct {
	tb    testing.TB
	root  string
	state string
	log   *hosttest.LogBuffer
	st    *store.Store
	fs    *fs.FS
	sp    *spawn.Spawner
	h     *host.Host
	seq   int
}

// newEnv builds a node: fs rooted in a temp dir, the durable store, the
// spawner and a host with poolSize instances of the process module.
func newEnv(tb testing.TB, poolSize int) *env {
	tb.Helper()
	base, _ := filepath.EvalSymlinks(tb.TempDir())
	e := &env{tb: tb, root: filepath.Join(base, "root"), state: filepath.Join(base, "state"), log: &hosttest.LogBuffer{}}
	os.MkdirAll(e.root, 0o700)
	var err error
	if e.fs, err = fs.New(fs.Config{DefaultCwd: e.root, Roots: []string{e.root}, Home: e.root}); err != nil {
		tb.Fatal(err)
	}
	if e.st, err = store.New(store.Config{Path: filepath.Join(e.state, "store.db")}); err != nil {
		tb.Fatal(err)
	}
	if e.sp, err = spawn.New(spawn.Config{Store: e.st, Dirs: e.fs, WaitDelay: 200 * time.Millisecond}); err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	e.h, err = host.New(ctx, host.Config{CacheDir: hosttest.CacheDir(tb), PoolSize: poolSize, Ceiling: hostcalls.AllCapabilities,
		Tables: []hostcalls.Table{e.sp.Table(), e.st.Table(), guest.New(guest.Config{}).Table()}, Logger: slog.New(slog.NewJSONHandler(e.log, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	wasm := hosttest.Build(tb, "plugins/process")
	if _, err := e.h.Load(ctx, hosttest.Pin("process", wasm), wasm); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(e.close)
	return e
}

func (e *env) close() {
	if e.h == nil {
		return
	}
	e.h.Close(context.Background())
	e.sp.Close()
	e.st.Close()
	e.fs.Close()
	e.h = nil
}

func runParams(id string, timeoutMs int, stdin []byte, argv ...string) map[string]any {
	return map[string]any{"nodeId": "n1", "processId": id, "cwd": ".", "argv": argv,
		"stdinBase64": base64.StdEncoding.EncodeToString(stdin), "timeoutMs": timeoutMs, "maxOutputBytes": 1 << 20}
}

func (e *env) invoke(ctx context.Context, method string, params map[string]any) (protocol.ProcessReceipt, *protocol.Error) {
	e.tb.Helper()
	raw, _ := json.Marshal(params)
	e.seq++
	out, perr := e.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: fmt.Sprintf("i%d-%d", e.seq, time.Now().UnixNano()), NodeID: "n1",
		Method: method, Args: raw, SessionGeneration: 1})
	var rc protocol.ProcessReceipt
	if perr != nil {
		return rc, perr
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rc); err != nil {
		e.tb.Fatalf("payload %s: %v", out, err)
	}
	var keys map[string]json.RawMessage
	json.Unmarshal(out, &keys)
	if len(keys) != 7 {
		e.tb.Fatalf("payload has %d keys: %s", len(keys), out)
	}
	if err := rc.Validate(); err != nil {
		e.tb.Fatalf("invalid receipt %s: %v", out, err)
	}
	return rc, nil
}

func b64(s string) *string { v := base64.StdEncoding.EncodeToString([]byte(s)); return &v }

func TestRunThroughHost(t *testing.T) {
	e := newEnv(t, 1)
	rc, perr := e.invoke(context.Background(), protocol.MethodProcessRun,
		runParams("probe:fixed-1", 30000, []byte("Hello\n"), "sh", "-c", "cat; printf 'diagnostic\\n' >&2"))
	if perr != nil {
		t.Fatal(perr)
	}
	want := `{"processId":"probe:fixed-1","nodeId":"n1","state":"completed","exitCode":0,"stdoutBase64":"SGVsbG8K","stderrBase64":"ZGlhZ25vc3RpYwo=","outputTruncated":false}`
	got, _ := json.Marshal(rc)
	if string(got) != want {
		t.Fatalf("payload\n got %s\nwant %s", got, want)
	}
}

// TestSixteenRunsDoNotPinInstances: with a pool of one instance, 16 runs
// in progress leave get and cancel answering, and the 17th run is refused.
func TestSixteenRunsDoNotPinInstances(t *testing.T) {
	e := newEnv(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type res struct {
		rc   protocol.ProcessReceipt
		perr *protocol.Error
	}
	results := make(chan res, protocol.ProcessMaxActive)
	for i := 0; i < protocol.ProcessMaxActive; i++ {
		id := fmt.Sprintf("long-%d", i)
		raw, _ := json.Marshal(runParams(id, 600000, nil, "sleep", "600"))
		go func() {
			out, perr := e.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "run-" + id, NodeID: "n1", Method: protocol.MethodProcessRun,
				Args: raw, SessionGeneration: 1})
			var rc protocol.ProcessReceipt
			if perr == nil {
				json.Unmarshal(out, &rc)
			}
			results <- res{rc, perr}
		}()
	}
	// Every run reaches running while each request is suspended.
	for i := 0; i < protocol.ProcessMaxActive; i++ {
		id := fmt.Sprintf("long-%d", i)
		for {
			rc, perr := e.invoke(ctx, protocol.MethodProcessGet, map[string]any{"nodeId": "n1", "processId": id})
			if perr != nil {
				t.Fatal(perr)
			}
			if rc.State == protocol.ProcessStateRunning {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s never ran", id)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if _, perr := e.invoke(ctx, protocol.MethodProcessRun, runParams("one-more", 1000, nil, "true")); perr == nil ||
		perr.DomainCode() != protocol.DomainProcessReceiptLimit {
		t.Fatalf("17th run: %v", perr)
	}
	for i := 0; i < protocol.ProcessMaxActive; i++ {
		rc, perr := e.invoke(ctx, protocol.MethodProcessCancel, map[string]any{"nodeId": "n1", "processId": fmt.Sprintf("long-%d", i)})
		if perr != nil || rc.State != protocol.ProcessStateCancelled || rc.ExitCode == nil || *rc.ExitCode != -9 {
			t.Fatalf("cancel %d: %+v %v", i, rc, perr)
		}
	}
	for i := 0; i < protocol.ProcessMaxActive; i++ {
		r := <-results
		if r.perr != nil || r.rc.State != protocol.ProcessStateCancelled || *r.rc.StdoutBase64 != "" {
			t.Fatalf("awaited run: %+v %v", r.rc, r.perr)
		}
	}
}

func TestCancelFromAnotherSessionGeneration(t *testing.T) {
	e := newEnv(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw, _ := json.Marshal(runParams("gen", 600000, nil, "sleep", "600"))
	done := make(chan *protocol.Error, 1)
	go func() {
		_, perr := e.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "run-gen", NodeID: "n1", Method: protocol.MethodProcessRun, Args: raw, SessionGeneration: 1})
		done <- perr
	}()
	for {
		rc, _ := e.invoke(ctx, protocol.MethodProcessGet, map[string]any{"nodeId": "n1", "processId": "gen"})
		if rc.State == protocol.ProcessStateRunning {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the run never reached running")
		}
		time.Sleep(5 * time.Millisecond)
	}
	args, _ := json.Marshal(map[string]any{"nodeId": "n1", "processId": "gen"})
	_, perr := e.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "c2", NodeID: "n1", Method: protocol.MethodProcessCancel, Args: args, SessionGeneration: 2})
	if perr == nil || perr.DomainCode() != protocol.DomainProcessNotOwner {
		t.Fatalf("replacement session cancel: %v", perr)
	}
	if rc, _ := e.invoke(ctx, protocol.MethodProcessGet, map[string]any{"nodeId": "n1", "processId": "gen"}); rc.State != protocol.ProcessStateRunning {
		t.Fatalf("run stopped by a foreign cancel: %+v", rc)
	}
	// The awaiting request ending (node.invoke.cancel, disconnect) stops
	// the run; its receipt says cancelled.
	cancel()
	<-done
	// The request returns as soon as it ends; the kill, the reap and the
	// terminal receipt follow asynchronously, so wait (bounded) for them.
	// The run must end cancelled, never completed.
	deadline := time.Now().Add(10 * time.Second)
	for {
		rc, perr := e.invoke(context.Background(), protocol.MethodProcessGet, map[string]any{"nodeId": "n1", "processId": "gen"})
		if perr == nil && rc.State == protocol.ProcessStateRunning && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if perr != nil || rc.State != protocol.ProcessStateCancelled || rc.ExitCode == nil || *rc.ExitCode != -9 {
			t.Fatalf("after the request ended: %+v %v", rc, perr)
		}
		break
	}
}

// TestCanaryStaysOutOfLogsAndDisk plants a canary in argv, stdin and the
// output; only the awaited payload may hold it.
func TestCanaryStaysOutOfLogsAndDisk(t *testing.T) {
	const canary = "CANARY-91be0d"
	e := newEnv(t, 1)
	ctx := context.Background()
	rc, perr := e.invoke(ctx, protocol.MethodProcessRun,
		runParams("canary", 30000, []byte(canary+"-stdin"), "sh", "-c", `cat; printf '%s' "$1" >&2`, "sh", canary+"-argv"))
	if perr != nil {
		t.Fatal(perr)
	}
	if *rc.StdoutBase64 != *b64(canary + "-stdin") || *rc.StderrBase64 != *b64(canary + "-argv") {
		t.Fatalf("canary did not round-trip: %+v", rc)
	}
	var errs []string
	for _, p := range []map[string]any{
		runParams("c2", 30000, nil, canary+"-missing"),
		runParams("canary", 30000, nil, "echo", canary),
		func() map[string]any { m := runParams("c3", 30000, nil, "true"); m["cwd"] = "/" + canary; return m }(),
		func() map[string]any { m := runParams("c4", 30000, nil, "true"); m[canary] = 1; return m }(),
	} {
		_, perr := e.invoke(ctx, protocol.MethodProcessRun, p)
		if perr == nil {
			t.Fatalf("expected an error for %v", p["processId"])
		}
		b, _ := json.Marshal(perr)
		errs = append(errs, string(b))
	}
	e.close()
	for _, s := range append(errs, e.log.String()) {
		if strings.Contains(s, canary) {
			t.Fatalf("canary leaked: %s", s)
		}
	}
	if !strings.Contains(e.log.String(), "spawn.start") {
		t.Fatal("audit log is empty; the check above proves nothing")
	}
	n := 0
	filepath.Walk(e.state, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		n++
		b, _ := os.ReadFile(p)
		if bytes.Contains(b, []byte(canary)) {
			t.Errorf("%s holds the canary", p)
		}
		return nil
	})
	if n == 0 {
		t.Fatal("no state files were checked")
	}
}

// BenchmarkRunTrue compares a node.process.run of `true` through the
// module (host, gate, suspension, receipts) with the spawn primitive
// called natively in Go (no receipt) and with a bare os/exec run.
func BenchmarkRunTrue(b *testing.B) {
	b.Run("module", func(b *testing.B) {
		e := newEnv(b, 1)
		ctx := context.Background()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if i > 0 && i%(protocol.ProcessMaxRetained-1) == 0 {
				b.StopTimer()
				e.close()
				e = newEnv(b, 1)
				b.StartTimer()
			}
			if _, perr := e.invoke(ctx, protocol.MethodProcessRun, runParams(fmt.Sprintf("b%d", i), 30000, nil, "true")); perr != nil {
				b.Fatal(perr)
			}
		}
	})
	b.Run("spawn-native", func(b *testing.B) {
		e := newEnv(b, 1)
		ctx := context.Background()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if i > 0 && i%(protocol.ProcessMaxRetained-1) == 0 {
				b.StopTimer()
				e.close()
				e = newEnv(b, 1)
				b.StartTimer()
			}
			run, done, err := e.sp.StartRun(ctx, spawn.Request{Cwd: ".", Argv: []string{"true"},
				TimeoutMs: 30000, MaxOutputBytes: 1 << 20})
			if err != nil {
				b.Fatal(err)
			}
			<-done
			e.sp.ReleaseRun(run, "")
		}
	})
	b.Run("os-exec", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := exec.Command("/usr/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRun16Concurrent: one op is 16 concurrent module runs of `true`.
func BenchmarkRun16Concurrent(b *testing.B) {
	e := newEnv(b, 4)
	ctx := context.Background()
	n := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if n+16 > protocol.ProcessMaxRetained {
			b.StopTimer()
			e.close()
			e = newEnv(b, 4)
			n = 0
			b.StartTimer()
		}
		var wg sync.WaitGroup
		for j := 0; j < 16; j++ {
			raw, _ := json.Marshal(runParams(fmt.Sprintf("c%d", n), 30000, nil, "true"))
			n++
			wg.Add(1)
			go func(id string) {
				defer wg.Done()
				if _, perr := e.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: id, NodeID: "n1", Method: protocol.MethodProcessRun, Args: raw}); perr != nil {
					b.Error(perr)
				}
			}(fmt.Sprintf("inv%d", n))
		}
		wg.Wait()
	}
}

// BenchmarkRatioRunTrue is the issue-11 ratio (docs/BENCHMARKS.md, "Module
// ABI (issue 11)"): a node.process.run of `true` through the module (host,
// gate, the intent binding, the retained count and the started record by
// compare-and-swap, spawn.start, suspension, resume, spawn.wait, the
// terminal record, the output cache entry, receipt shaping) against the
// same work natively in Go: the same three fsync'd writes in one store
// namespace (count, started record, terminal record), spawn through
// Spawner.StartRun, wait, the receipt encoded. Both sides run interleaved in
// one loop on separate nodes; each node is replaced before its 1,000
// retained ids run out (one sample in 499 carries that, which the p50
// ignores).
func BenchmarkRatioRunTrue(b *testing.B) {
	mod, nat := newEnv(b, 1), newEnv(b, 1)
	ns, err := nat.st.Namespace("bench-receipts")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	i := 0
	hosttest.SideBySide(b, func() error {
		i++
		if i%(protocol.ProcessMaxRetained/2) == 0 {
			mod.close()
			mod = newEnv(b, 1)
		}
		rc, perr := mod.invoke(ctx, protocol.MethodProcessRun, runParams(fmt.Sprintf("m%d", i), 30000, nil, "true"))
		if perr != nil {
			return perr
		}
		if rc.State != protocol.ProcessStateCompleted || rc.ExitCode == nil || *rc.ExitCode != 0 {
			return fmt.Errorf("module receipt %+v", rc)
		}
		return nil
	}, func() error {
		if i%(protocol.ProcessMaxRetained/2) == 0 {
			nat.close()
			nat = newEnv(b, 1)
			if ns, err = nat.st.Namespace("bench-receipts"); err != nil {
				return err
			}
		}
		return nativeRun(ctx, nat.sp, ns, fmt.Sprintf("n%d", i))
	})
}

// nativeRun is the module's work for one run of `true`, in plain Go.
func nativeRun(ctx context.Context, sp *spawn.Spawner, ns *store.Namespace, id string) error {
	type rec struct {
		V        int    `json:"v"`
		State    string `json:"state"`
		ExitCode *int   `json:"exitCode,omitempty"`
		Run      string `json:"run"`
		Admitted int64  `json:"admittedMs"`
		EndedMs  int64  `json:"endedMs,omitempty"`
	}
	if err := ns.Batch(func(tx *store.Tx) error {
		n := 0
		if v, ok := tx.Get("n"); ok {
			json.Unmarshal(v, &n)
		}
		if n >= protocol.ProcessMaxRetained {
			return fmt.Errorf("full")
		}
		v, _ := json.Marshal(n + 1)
		return tx.Put("n", v)
	}); err != nil {
		return err
	}
	r := rec{V: 1, State: "started", Run: "r0123456789abcdef", Admitted: time.Now().UnixMilli()}
	if err := ns.Batch(func(tx *store.Tx) error {
		if _, ok := tx.Get("r/" + id); ok {
			return fmt.Errorf("exists")
		}
		v, _ := json.Marshal(r)
		return tx.Put("r/"+id, v)
	}); err != nil {
		return err
	}
	run, done, err := sp.StartRun(ctx, spawn.Request{Cwd: ".", Argv: []string{"true"}, TimeoutMs: 30000, MaxOutputBytes: 1 << 20})
	if err != nil {
		return err
	}
	<-done
	end, _, known, err := sp.WaitRun(run, "")
	if err != nil || !known || end.ExitCode == nil || *end.ExitCode != 0 {
		return fmt.Errorf("native run %+v %v", end, err)
	}
	r.State, r.ExitCode, r.EndedMs = protocol.ProcessStateCompleted, end.ExitCode, time.Now().UnixMilli()
	if err := ns.Batch(func(tx *store.Tx) error {
		v, _ := json.Marshal(r)
		return tx.Put("r/"+id, v)
	}); err != nil {
		return err
	}
	out, errOut := base64.StdEncoding.EncodeToString(end.Stdout), base64.StdEncoding.EncodeToString(end.Stderr)
	_, err = json.Marshal(protocol.ProcessReceipt{ProcessID: id, NodeID: "n1", State: r.State, ExitCode: r.ExitCode,
		StdoutBase64: &out, StderrBase64: &errOut})
	sp.ReleaseRun(run, "")
	return err
}
