package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"lemon/host"
	"lemon/host/hosttest"
	"lemon/host/moduleset"
	"lemon/hostcalls"
	"lemon/hostcalls/sysinfo"
	"lemon/plugins/hostinfo/shape"
	"lemon/protocol"
)

func TestMain(m *testing.M) {
	code := m.Run()
	hosttest.Cleanup()
	os.Exit(code)
}

// testTable is the host-call table testmod imports.
type testTable struct {
	mu         sync.Mutex
	pings      int
	writes     int
	lastResult int // Invocation.MaxResultBytes the last test.ping saw
	// lastAuth is the Invocation.Authority the last test.ping saw.
	lastAuth hostcalls.Authority
	release  chan struct{}
}

func (tt *testTable) table() hostcalls.Table {
	return hostcalls.Table{
		{Name: "test.ping", Params: []string{"method"}, Capability: hostcalls.CapHostInfo, Audit: hostcalls.AuditMeta,
			Func: func(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
				tt.mu.Lock()
				tt.pings++
				n := tt.pings
				tt.lastResult = call.Invocation().MaxResultBytes
				tt.lastAuth = call.Invocation().Authority
				tt.mu.Unlock()
				return json.Marshal(map[string]any{"pong": n, "module": call.Module(), "args": json.RawMessage(args)})
			}},
		{Name: "test.start", Capability: hostcalls.CapHostInfo, Audit: hostcalls.AuditMeta,
			Func: func(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
				return json.Marshal(map[string]uint32{"handle": call.Await(tt.release)})
			}},
		{Name: "test.blob", Capability: hostcalls.CapHostInfo, Audit: hostcalls.AuditMeta,
			Func: func(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
				return json.Marshal(map[string]uint32{"blob": call.PutBlob(args)})
			}},
		{Name: "test.write", Capability: hostcalls.CapWrite, Audit: hostcalls.AuditMutation,
			Func: func(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
				tt.mu.Lock()
				tt.writes++
				tt.mu.Unlock()
				return []byte(`{}`), nil
			}},
	}
}

type fixture struct {
	h   *host.Host
	tt  *testTable
	log *bytes.Buffer
}

func newFixture(t testing.TB, cfg host.Config) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{tt: &testTable{release: make(chan struct{})}, log: &bytes.Buffer{}}
	if cfg.Ceiling == nil {
		cfg.Ceiling = hostcalls.AllCapabilities
	}
	cfg.Tables = append(cfg.Tables, f.tt.table())
	cfg.CacheDir = hosttest.CacheDir(t)
	cfg.Logger = slog.New(slog.NewJSONHandler(f.log, nil))
	h, err := host.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	wasm := hosttest.Build(t, "host/testdata/testmod")
	if _, err := h.Load(ctx, hosttest.Pin("testmod", wasm), wasm); err != nil {
		t.Fatal(err)
	}
	f.h = h
	return f
}

func (f *fixture) invoke(t *testing.T, method string, args string) (map[string]any, *protocol.Error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return f.invokeCtx(ctx, method, args)
}

func (f *fixture) invokeCtx(ctx context.Context, method string, args string) (map[string]any, *protocol.Error) {
	out, perr := f.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "i1", NodeID: "n1", Method: method, Args: json.RawMessage(args)})
	if perr != nil {
		return nil, perr
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		panic(err)
	}
	return m, nil
}

func TestHostInfoThroughModule(t *testing.T) {
	ctx := context.Background()
	cwd := t.TempDir()
	si := sysinfo.New(sysinfo.Config{DefaultCwd: cwd, LemonVersion: "2026.11.0"})
	h, err := host.New(ctx, host.Config{Ceiling: hostcalls.AllCapabilities, Tables: []hostcalls.Table{si.Table()}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	wasm := hosttest.Build(t, "plugins/hostinfo")
	if _, err := h.Load(ctx, hosttest.Pin("hostinfo", wasm), wasm); err != nil {
		t.Fatal(err)
	}
	if got := h.Methods(); got["node.host.info"] != 1 {
		t.Fatalf("methods = %v", got)
	}
	out, perr := h.Invoke(ctx, protocol.InvokeRequest{Method: "node.host.info", Args: json.RawMessage(`{"nodeId":"n1"}`)})
	if perr != nil {
		t.Fatal(perr)
	}
	var got shape.HostInfo
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.CPUCount != runtime.NumCPU() || got.DefaultCwd != cwd || got.LemonVersion != "2026.11.0" || got.MemTotalBytes == 0 {
		t.Fatalf("snapshot = %+v", got)
	}
	// Strict params: an unknown field is INVALID_PARAMS naming it.
	_, perr = h.Invoke(ctx, protocol.InvokeRequest{Method: "node.host.info", Args: json.RawMessage(`{"nodeId":"n1","bogus":1}`)})
	if perr == nil || perr.Code != protocol.CodeInvalidParams || perr.Details.Field != "bogus" {
		t.Fatalf("unknown field: %v", perr)
	}
	_, perr = h.Invoke(ctx, protocol.InvokeRequest{Method: "node.host.info", Args: json.RawMessage(`{}`)})
	if perr == nil || perr.Code != protocol.CodeInvalidParams {
		t.Fatalf("missing nodeId: %v", perr)
	}
}

func TestDigestMismatchRefused(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	wasm := hosttest.Build(t, "host/testdata/testmod")
	pin := hosttest.Pin("testmod", wasm)
	bad := append([]byte(nil), wasm...)
	bad[len(bad)/2] ^= 0xff
	_, err = h.Load(ctx, pin, bad)
	if !errors.Is(err, host.ErrModuleRejected) || !errors.Is(err, moduleset.ErrDigestMismatch) {
		t.Fatalf("tampered module: err = %v", err)
	}
	if len(h.Methods()) != 0 {
		t.Fatal("a refused module must serve nothing")
	}
}

func TestUndeclaredImportRefused(t *testing.T) {
	// testmod imports test.* host calls; a host without that table must
	// refuse it (the manifest names host calls the host does not offer).
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	wasm := hosttest.Build(t, "host/testdata/testmod")
	if _, err := h.Load(ctx, hosttest.Pin("testmod", wasm), wasm); !errors.Is(err, host.ErrModuleRejected) {
		t.Fatalf("err = %v", err)
	}
}

func TestPingAndAudit(t *testing.T) {
	f := newFixture(t, host.Config{})
	out, perr := f.invoke(t, "test.ping", `{"a":"CANARY-ARG"}`)
	if perr != nil {
		t.Fatal(perr)
	}
	if out["pong"] != float64(1) || out["module"] != "testmod" {
		t.Fatalf("out = %v", out)
	}
	lines := strings.Split(strings.TrimSpace(f.log.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one audit event per host call, got %d: %s", len(lines), f.log)
	}
	var ev map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &ev); err != nil {
		t.Fatal(err)
	}
	if ev["msg"] != "execution_node.host_io" || ev["hostcall"] != "test.ping" || ev["outcome"] != "ok" || ev["method"] != "test.ping" || ev["count"] != float64(1) {
		t.Fatalf("audit event = %v", ev)
	}
	if strings.Contains(f.log.String(), "CANARY") {
		t.Fatal("audit log carries request content")
	}
}

func TestInputAndOutputBlobs(t *testing.T) {
	f := newFixture(t, host.Config{})
	// 16 bytes is the declared limit: passes.
	out, perr := f.invoke(t, "test.echo", `{"dataBase64":"MDEyMzQ1Njc4OWFiY2RlZg==","k":"v"}`)
	if perr != nil {
		t.Fatal(perr)
	}
	if out["dataBase64"] != "MDEyMzQ1Njc4OWFiY2RlZg==" || out["size"] != float64(16) {
		t.Fatalf("out = %v", out)
	}
	if p := out["params"].(map[string]any); p["k"] != "v" || p["dataBase64"] != nil {
		t.Fatalf("the blob field must leave params: %v", p)
	}
	// 17 bytes: one past the limit fails before the module runs.
	_, perr = f.invoke(t, "test.echo", `{"dataBase64":"MDEyMzQ1Njc4OWFiY2RlZmc="}`)
	if perr == nil || perr.Code != protocol.CodeInvalidParams || perr.Details.Field != "dataBase64" {
		t.Fatalf("oversize blob: %v", perr)
	}
	for _, bad := range []string{`"not base64!"`, `"YQ"`, `"YR=="`, `5`} {
		_, perr = f.invoke(t, "test.echo", `{"dataBase64":`+bad+`}`)
		if perr == nil || perr.Code != protocol.CodeInvalidParams {
			t.Fatalf("bad base64 %s: %v", bad, perr)
		}
	}
	out, perr = f.invoke(t, "test.echo", `{"dataBase64":""}`)
	if perr != nil || out["dataBase64"] != "" || out["size"] != float64(0) {
		t.Fatalf("empty blob: %v %v", out, perr)
	}
}

func TestTrapFailsOneRequestOnly(t *testing.T) {
	f := newFixture(t, host.Config{})
	_, perr := f.invoke(t, "test.trap", `{}`)
	if perr == nil || perr.Code != protocol.CodeInternal || perr.DomainCode() != protocol.DomainModuleTrapped {
		t.Fatalf("trap: %v", perr)
	}
	out, perr := f.invoke(t, "test.ping", `{}`)
	if perr != nil || out["pong"] == nil {
		t.Fatalf("after trap: %v %v", out, perr)
	}
	mod, _ := f.h.Module("testmod")
	if _, discarded := mod.Stats(); discarded != 1 {
		t.Fatalf("discarded = %d, want 1", discarded)
	}
}

func TestDeadlineStopsSpinningModule(t *testing.T) {
	f := newFixture(t, host.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, perr := f.invokeCtx(ctx, "test.spin", `{}`)
	if perr == nil || perr.Code != protocol.CodeTimeout {
		t.Fatalf("spin: %v", perr)
	}
	if _, perr := f.invoke(t, "test.ping", `{}`); perr != nil {
		t.Fatalf("after timeout: %v", perr)
	}
}

func TestCapabilityCeiling(t *testing.T) {
	f := newFixture(t, host.Config{Ceiling: []string{hostcalls.CapHostInfo}})
	if _, perr := f.invoke(t, "test.ping", `{}`); perr != nil {
		t.Fatal(perr)
	}
	_, perr := f.invoke(t, "test.write", `{}`)
	if perr == nil || perr.Code != protocol.CodeForbidden || perr.DomainCode() != protocol.DomainCapabilityDenied {
		t.Fatalf("write without capability: %v", perr)
	}
	// The execution context narrows further.
	_, perr = f.h.Invoke(context.Background(), protocol.InvokeRequest{InvokeID: "i-ctx", Method: "test.ping", Args: json.RawMessage(`{}`),
		ExecutionContext: hosttest.Context(t, "i-ctx", "read")})
	if perr == nil || perr.Code != protocol.CodeForbidden {
		t.Fatalf("context without hostinfo: %v", perr)
	}
}

func TestRateLimitSixthCall(t *testing.T) {
	f := newFixture(t, host.Config{RateRules: []host.RateRule{{Module: "testmod", HostCall: "test.ping", PerSecond: 0.001, Burst: 5}}})
	// A refill rate far below one call per test run: the bucket holds
	// exactly its burst however slowly the six calls run.
	for i := 1; i <= 5; i++ {
		if _, perr := f.invoke(t, "test.ping", `{}`); perr != nil {
			t.Fatalf("call %d: %v", i, perr)
		}
	}
	_, perr := f.invoke(t, "test.ping", `{}`)
	if perr == nil || perr.Code != protocol.CodeRateLimited || perr.Details.RetrySafe == nil || !*perr.Details.RetrySafe {
		t.Fatalf("sixth call: %v", perr)
	}
	if f.tt.pings != 5 {
		t.Fatalf("a rate-limited call must do nothing: pings = %d", f.tt.pings)
	}
}

func TestSuspendDoesNotPinInstance(t *testing.T) {
	f := newFixture(t, host.Config{PoolSize: 1})
	type res struct {
		out  map[string]any
		perr *protocol.Error
	}
	done := make(chan res, 1)
	go func() {
		out, perr := f.invoke(t, "test.wait", `{}`)
		done <- res{out, perr}
	}()
	// With a pool of one, a ping can only run if the waiting invocation
	// released its instance.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, perr := f.invoke(t, "test.ping", `{}`); perr == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ping never ran while test.wait was suspended")
		}
	}
	select {
	case r := <-done:
		t.Fatalf("test.wait finished before release: %v %v", r.out, r.perr)
	default:
	}
	close(f.tt.release)
	r := <-done
	if r.perr != nil || r.out["resumed"] != true || r.out["step"] != float64(7) {
		t.Fatalf("resume: %v %v", r.out, r.perr)
	}
}

func TestRecycleAfterCalls(t *testing.T) {
	f := newFixture(t, host.Config{RecycleAfterCalls: 2, PoolSize: 1})
	for i := 0; i < 5; i++ {
		if _, perr := f.invoke(t, "test.ping", `{}`); perr != nil {
			t.Fatal(perr)
		}
	}
	mod, _ := f.h.Module("testmod")
	created, discarded := mod.Stats()
	if discarded < 2 || created < 3 {
		t.Fatalf("created %d discarded %d: instances must be recycled after 2 calls", created, discarded)
	}
}

// An instance recycled at RecycleAfterCalls is replaced in the background
// while it holds the slot of the one it replaces: the request after the
// recycle finds an idle instance (no start on its path) and live
// instances never exceed PoolSize.
func TestRecycleReplacesInBackground(t *testing.T) {
	f := newFixture(t, host.Config{RecycleAfterCalls: 2, PoolSize: 1})
	mod, _ := f.h.Module("testmod")
	for i := 0; i < 2; i++ {
		if _, perr := f.invoke(t, "test.ping", `{}`); perr != nil {
			t.Fatal(perr)
		}
	}
	// The second call recycled the load-time instance; wait for its
	// replacement (a condition, not a timing).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if created, _ := mod.Stats(); created == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no replacement instance started after the recycle")
		}
	}
	if n := f.h.PoolInstances()["testmod"]; n != 1 {
		t.Fatalf("live instances %d, want 1 (PoolSize)", n)
	}
	if _, perr := f.invoke(t, "test.ping", `{}`); perr != nil {
		t.Fatal(perr)
	}
	if created, discarded := mod.Stats(); created != 2 || discarded != 1 {
		t.Fatalf("created %d discarded %d after the third call, want 2 and 1: the request must use the replacement", created, discarded)
	}
}

// An instance within a quarter of RecycleAfterCalls of its limit gets a
// spare started in the background when PoolSize allows: the instance in
// use keeps serving until its recycle, then the spare takes over, and no
// request starts an instance.
func TestRecycleStartsSpareAhead(t *testing.T) {
	f := newFixture(t, host.Config{RecycleAfterCalls: 8, PoolSize: 2})
	mod, _ := f.h.Module("testmod")
	ping := func() {
		t.Helper()
		if _, perr := f.invoke(t, "test.ping", `{}`); perr != nil {
			t.Fatal(perr)
		}
	}
	for i := 0; i < 5; i++ { // below 8 - 8/4 = 6 calls: no spare yet
		ping()
	}
	if created, _ := mod.Stats(); created != 1 {
		t.Fatalf("created %d after 5 calls, want 1", created)
	}
	ping() // the 6th call starts the spare
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if created, _ := mod.Stats(); created == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no spare instance started")
		}
	}
	ping()
	ping() // the 8th call on the first instance: recycled
	if created, discarded := mod.Stats(); created != 2 || discarded != 1 {
		t.Fatalf("after 8 calls: created %d discarded %d, want 2 and 1 (the first instance served all 8)", created, discarded)
	}
	ping() // on the spare
	if created, discarded := mod.Stats(); created != 2 || discarded != 1 {
		t.Fatalf("after 9 calls: created %d discarded %d, want 2 and 1", created, discarded)
	}
	if n := f.h.PoolInstances()["testmod"]; n != 1 {
		t.Fatalf("live instances %d, want 1", n)
	}
}

// A trapped instance is not replaced ahead of need: the next request
// starts one (the recycle-after-trap rule), and closing the host while a
// replacement is starting leaves nothing running.
func TestRecycleAfterTrapAndCloseDuringRefill(t *testing.T) {
	f := newFixture(t, host.Config{RecycleAfterCalls: 1, PoolSize: 1})
	mod, _ := f.h.Module("testmod")
	if _, perr := f.invoke(t, "test.trap", `{}`); perr == nil {
		t.Fatal("trap: no error")
	}
	if created, discarded := mod.Stats(); created != 1 || discarded != 1 {
		t.Fatalf("after a trap: created %d discarded %d, want 1 and 1 (no background replacement)", created, discarded)
	}
	if _, perr := f.invoke(t, "test.ping", `{}`); perr != nil {
		t.Fatal(perr)
	}
	// test.ping recycled its instance (RecycleAfterCalls 1): a replacement
	// may be starting while the host closes.
	if err := f.h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if created, discarded := mod.Stats(); created-discarded > 1 {
		t.Fatalf("created %d discarded %d after close", created, discarded)
	}
}

func TestUnknownMethod(t *testing.T) {
	f := newFixture(t, host.Config{})
	if _, perr := f.invoke(t, "node.nope", `{}`); perr == nil || perr.Code != protocol.CodeMethodNotFound {
		t.Fatalf("%v", perr)
	}
}

func TestPayloadBlobPassesThrough(t *testing.T) {
	f := newFixture(t, host.Config{})
	out, perr := f.invoke(t, "test.relayblob", `{"names":["a","b"],"truncated":false}`)
	if perr != nil {
		t.Fatal(perr)
	}
	if names, _ := out["names"].([]any); len(names) != 2 || out["truncated"] != false {
		t.Fatalf("out = %v", out)
	}
	// A payload blob that is not a JSON object is refused.
	_, perr = f.invoke(t, "test.relayblob", ``)
	if perr != nil {
		t.Fatalf("empty params relay: %v", perr)
	}
}
