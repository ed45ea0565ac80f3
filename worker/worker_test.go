package worker_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lemon/client"
	"lemon/client/fakecontrol"
	"lemon/client/tlsdev"
	"lemon/host/moduleset"
	"lemon/protocol"
	"lemon/worker"
)

const nodeToken = "node-secret-token-5678"

// fakeDispatcher serves "fast" (answers at once), "slow" (blocks until
// released or its context ends) and "big" (returns the payload in Big);
// "bigeffect", when a test adds it, is "big" after marking an effect.
type fakeDispatcher struct {
	methods map[string]int
	release chan struct{}
	started chan string        // invokeId of each call as it starts
	ended   chan error         // ctx.Err() seen by "slow" when it ends
	seen    chan time.Duration // time left until the deadline at start
	big     json.RawMessage
	room    chan int // MaxResultBytes of each call
}

func newFake() *fakeDispatcher {
	return &fakeDispatcher{
		methods: map[string]int{"fast": 1, "slow": 1, "big": 1},
		release: make(chan struct{}),
		started: make(chan string, 64),
		ended:   make(chan error, 64),
		seen:    make(chan time.Duration, 64),
		room:    make(chan int, 64),
	}
}

func (f *fakeDispatcher) Methods() map[string]int { return f.methods }

func (f *fakeDispatcher) Invoke(ctx context.Context, req protocol.InvokeRequest) (json.RawMessage, *protocol.Error) {
	if dl, ok := ctx.Deadline(); ok {
		f.seen <- time.Until(dl)
	}
	f.started <- req.InvokeID
	select {
	case f.room <- req.MaxResultBytes:
	default:
	}
	switch req.Method {
	case "fast":
		return json.RawMessage(`{"fast":true}`), nil
	case "big":
		return f.big, nil
	case "bigeffect": // as the host does once an effect has succeeded
		req.Outcome.MarkApplied()
		return f.big, nil
	case "slow":
		select {
		case <-f.release:
			return json.RawMessage(`{"slow":true}`), nil
		case <-ctx.Done():
			f.ended <- ctx.Err()
			return nil, protocol.Errorf(protocol.CodeTimeout, "cancelled")
		}
	}
	return nil, protocol.Errorf(protocol.CodeMethodNotFound, "no")
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startWorker runs a worker against srv until the test ends.
func startWorker(t *testing.T, cfg worker.Config) (stop func() error) {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = nodeToken
	}
	if cfg.Backoff == (worker.Backoff{}) {
		cfg.Backoff = worker.Backoff{Initial: time.Millisecond, Max: 4 * time.Millisecond}
	}
	w, err := worker.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	t.Cleanup(func() { stop() })
	return stop
}

func invoke(t *testing.T, c *fakecontrol.Conn, id, method string, timeoutMs int64) {
	t.Helper()
	err := c.SendEvent(protocol.EventInvokeRequest, protocol.InvokeRequest{
		InvokeID: id, NodeID: "n1", Method: method, Args: json.RawMessage(`{}`), TimeoutMs: timeoutMs})
	if err != nil {
		t.Fatal(err)
	}
}

func TestWorkerAdvertisesItself(t *testing.T) {
	srv := fakecontrol.New(fakecontrol.Options{NodeToken: nodeToken, MaxPayload: 1 << 20})
	defer srv.Close()
	startWorker(t, worker.Config{ControllerURL: srv.URL, Name: "worker-1", Dispatcher: newFake(),
		Capabilities: []string{"hostinfo", "read"}, MaxPayload: 512 << 10})
	c, err := srv.NextNode(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Connect
	if p.Role != protocol.RoleNode || p.Auth.Token != nodeToken || p.Node == nil {
		t.Fatalf("connect = %+v", p)
	}
	if p.Node.Name != "worker-1" || p.Node.MaxPayload != 512<<10 ||
		p.Node.Methods["slow"] != 1 || len(p.Node.Methods) != 3 ||
		strings.Join(p.Node.Capabilities, ",") != "hostinfo,read" {
		t.Fatalf("advertise = %+v", p.Node)
	}
}

// A slow method must not hold up a fast one on the same socket.
func TestWorkerDispatchesConcurrently(t *testing.T) {
	srv := fakecontrol.New(fakecontrol.Options{NodeToken: nodeToken})
	defer srv.Close()
	f := newFake()
	startWorker(t, worker.Config{ControllerURL: srv.URL, Dispatcher: f})
	ctx := ctxT(t)
	c, err := srv.NextNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	invoke(t, c, "i-slow", "slow", 0)
	if id := <-f.started; id != "i-slow" {
		t.Fatalf("started %s", id)
	}
	invoke(t, c, "i-fast", "fast", 0)
	r, err := srv.NextResult(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.InvokeID != "i-fast" || string(r.Result) != `{"fast":true}` || r.Error != nil {
		t.Fatalf("first result = %+v", r)
	}
	close(f.release)
	r, _ = srv.NextResult(ctx)
	if r.InvokeID != "i-slow" || string(r.Result) != `{"slow":true}` {
		t.Fatalf("second result = %+v", r)
	}
}

func TestWorkerCancelEventCancelsContext(t *testing.T) {
	srv := fakecontrol.New(fakecontrol.Options{NodeToken: nodeToken})
	defer srv.Close()
	f := newFake()
	startWorker(t, worker.Config{ControllerURL: srv.URL, Dispatcher: f})
	ctx := ctxT(t)
	c, _ := srv.NextNode(ctx)
	invoke(t, c, "i1", "slow", 60000)
	invoke(t, c, "i2", "slow", 60000)
	<-f.started
	<-f.started
	if err := c.SendEvent(protocol.EventInvokeCancel, protocol.InvokeCancel{InvokeID: "i1"}); err != nil {
		t.Fatal(err)
	}
	if err := <-f.ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("ctx err = %v", err)
	}
	r, _ := srv.NextResult(ctx)
	if r.InvokeID != "i1" || r.Error == nil {
		t.Fatalf("result = %+v", r)
	}
	// i2 is still running: nothing else ended.
	select {
	case err := <-f.ended:
		t.Fatalf("i2 ended too: %v", err)
	default:
	}
	close(f.release)
	if r, _ := srv.NextResult(ctx); r.InvokeID != "i2" || r.Error != nil {
		t.Fatalf("i2 result = %+v", r)
	}
}

func TestWorkerDeadlineFromTimeoutMs(t *testing.T) {
	srv := fakecontrol.New(fakecontrol.Options{NodeToken: nodeToken})
	defer srv.Close()
	f := newFake()
	startWorker(t, worker.Config{ControllerURL: srv.URL, Dispatcher: f})
	ctx := ctxT(t)
	c, _ := srv.NextNode(ctx)
	invoke(t, c, "i1", "fast", 1500)
	if left := <-f.seen; left <= 0 || left > 1500*time.Millisecond {
		t.Fatalf("deadline for timeoutMs 1500 is %v away", left)
	}
	invoke(t, c, "i2", "fast", 0) // default 30 s
	if left := <-f.seen; left <= 1500*time.Millisecond || left > 30*time.Second {
		t.Fatalf("default deadline is %v away", left)
	}
}

func TestWorkerDisconnectCancelsInFlightAndReconnects(t *testing.T) {
	srv := fakecontrol.New(fakecontrol.Options{NodeToken: nodeToken})
	defer srv.Close()
	f := newFake()
	startWorker(t, worker.Config{ControllerURL: srv.URL, Dispatcher: f})
	ctx := ctxT(t)
	c, _ := srv.NextNode(ctx)
	invoke(t, c, "i1", "slow", 60000)
	invoke(t, c, "i2", "slow", 60000)
	<-f.started
	<-f.started
	srv.DropAll()
	for range 2 {
		if err := <-f.ended; !errors.Is(err, context.Canceled) {
			t.Fatalf("ctx err = %v", err)
		}
	}
	c2, err := srv.NextNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	invoke(t, c2, "i3", "fast", 0)
	if r, _ := srv.NextResult(ctx); r.InvokeID != "i3" {
		t.Fatalf("after reconnect: %+v", r)
	}
}

// Repeated drops cause repeated reconnects, each after a bounded backoff.
func TestWorkerReconnectsAfterRepeatedDrops(t *testing.T) {
	srv := fakecontrol.New(fakecontrol.Options{NodeToken: nodeToken})
	defer srv.Close()
	startWorker(t, worker.Config{ControllerURL: srv.URL, Dispatcher: newFake(),
		Backoff: worker.Backoff{Initial: time.Millisecond, Max: 2 * time.Millisecond}})
	ctx := ctxT(t)
	for i := range 5 {
		c, err := srv.NextNode(ctx)
		if err != nil {
			t.Fatalf("reconnect %d: %v", i, err)
		}
		c.Close()
	}
	if n := srv.Connects(); n < 5 {
		t.Fatalf("connects = %d", n)
	}
}

func TestWorkerStopsOnUnauthorized(t *testing.T) {
	srv := fakecontrol.New(fakecontrol.Options{NodeToken: "the-right-one"})
	defer srv.Close()
	var logBuf strings.Builder
	var mu sync.Mutex
	w, err := worker.New(worker.Config{ControllerURL: srv.URL, Token: nodeToken, Dispatcher: newFake(),
		Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logBuf}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	err = w.Run(ctxT(t))
	var pe *protocol.Error
	if !errors.Is(err, worker.ErrFatal) || !errors.As(err, &pe) || pe.Code != protocol.CodeUnauthorized {
		t.Fatalf("Run = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(err.Error(), nodeToken) || strings.Contains(logBuf.String(), nodeToken) {
		t.Fatal("token echoed")
	}
	if srv.Connects() != 1 {
		t.Fatalf("connects = %d, want 1 (no retry)", srv.Connects())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A token the controller authenticates as another node ID is refused.
func TestWorkerRefusesIdentityMismatch(t *testing.T) {
	srv := fakecontrol.New(fakecontrol.Options{NodeToken: nodeToken, AuthNodeID: "n-other"})
	defer srv.Close()
	w, err := worker.New(worker.Config{ControllerURL: srv.URL, Token: nodeToken, NodeID: "n-mine", Dispatcher: newFake()})
	if err != nil {
		t.Fatal(err)
	}
	err = w.Run(ctxT(t))
	var pe *protocol.Error
	if !errors.Is(err, worker.ErrFatal) || !errors.As(err, &pe) || pe.DomainCode() != protocol.DomainNodeIdentityMismatch {
		t.Fatalf("Run = %v", err)
	}
}

func TestWorkerRefusesInvocationForAnotherNode(t *testing.T) {
	srv := fakecontrol.New(fakecontrol.Options{NodeToken: nodeToken})
	defer srv.Close()
	startWorker(t, worker.Config{ControllerURL: srv.URL, NodeID: "n1", Dispatcher: newFake()})
	ctx := ctxT(t)
	c, _ := srv.NextNode(ctx)
	c.SendEvent(protocol.EventInvokeRequest, protocol.InvokeRequest{InvokeID: "x", NodeID: "n2", Method: "fast"})
	r, _ := srv.NextResult(ctx)
	if r.Error == nil || r.Error.DomainCode() != protocol.DomainNodeIdentityMismatch {
		t.Fatalf("result = %+v", r)
	}
}

func TestWorkerUnadvertisedMethodAndBusy(t *testing.T) {
	srv := fakecontrol.New(fakecontrol.Options{NodeToken: nodeToken})
	defer srv.Close()
	f := newFake()
	startWorker(t, worker.Config{ControllerURL: srv.URL, Dispatcher: f, MaxConcurrent: 1})
	ctx := ctxT(t)
	c, _ := srv.NextNode(ctx)
	invoke(t, c, "i1", "slow", 60000)
	<-f.started
	invoke(t, c, "i2", "fast", 0)
	r, _ := srv.NextResult(ctx)
	if r.InvokeID != "i2" || r.Error == nil || r.Error.Code != protocol.CodeUnavailable ||
		r.Error.Details.RetrySafe == nil || !*r.Error.Details.RetrySafe {
		t.Fatalf("busy result = %+v", r)
	}
	close(f.release)
	<-srv.Results
	invoke(t, c, "i3", "node.nope", 0)
	r, _ = srv.NextResult(ctx)
	if r.InvokeID != "i3" || r.Error == nil || r.Error.Code != protocol.CodeMethodNotFound {
		t.Fatalf("unknown method result = %+v", r)
	}
}

// A result larger than the negotiated maxPayload becomes an error result
// whose flags say whether the invocation had an effect; the dispatcher is
// told the negotiated room, not the node's own 1 MiB; the connection
// keeps serving.
func TestWorkerOversizeResultBecomesError(t *testing.T) {
	const limit = 8192
	srv := fakecontrol.New(fakecontrol.Options{NodeToken: nodeToken, MaxPayload: limit})
	defer srv.Close()
	f := newFake()
	f.big = json.RawMessage(`"` + strings.Repeat("a", limit) + `"`)
	f.methods["bigeffect"] = 1
	startWorker(t, worker.Config{ControllerURL: srv.URL, Dispatcher: f})
	ctx := ctxT(t)
	c, _ := srv.NextNode(ctx)
	for _, m := range []struct {
		method  string
		applied bool
	}{{"big", false}, {"bigeffect", true}} {
		invoke(t, c, "i1-"+m.method, m.method, 0)
		r, _ := srv.NextResult(ctx)
		if r.Error == nil || r.Error.DomainCode() != protocol.DomainPayloadTooLarge || r.Result != nil ||
			r.Error.Details.MutationMayHaveApplied == nil || *r.Error.Details.MutationMayHaveApplied != m.applied ||
			*r.Error.Details.RetrySafe {
			t.Fatalf("%s: result = %+v, want payload_too_large with mutationMayHaveApplied:%v", m.method, r, m.applied)
		}
		if room := <-f.room; room >= limit || room < limit-200 {
			t.Fatalf("%s: the dispatcher was given MaxResultBytes %d for a %d-byte frame", m.method, room, limit)
		}
	}
	invoke(t, c, "i2", "fast", 0)
	if r, _ := srv.NextResult(ctx); r.InvokeID != "i2" || r.Error != nil {
		t.Fatalf("after oversize: %+v", r)
	}
}

func TestNewRefusesInsecureController(t *testing.T) {
	_, err := worker.New(worker.Config{ControllerURL: "ws://controller.example:7777/ws", Token: nodeToken, Dispatcher: newFake()})
	if !errors.Is(err, worker.ErrInsecureController) {
		t.Fatalf("err = %v", err)
	}
	_, err = worker.New(worker.Config{ControllerURL: "ws://controller.example:7777/ws", Token: nodeToken,
		Dispatcher: newFake(), AllowInsecureController: true})
	if err != nil {
		t.Fatalf("with opt-in: %v", err)
	}
}

func TestCheckControllerURL(t *testing.T) {
	cases := []struct {
		url      string
		insecure bool
		ok       bool
	}{
		{"wss://controller.example/ws", false, true},
		{"ws://127.0.0.1:7777/ws", false, true},
		{"ws://127.9.9.9:7777/ws", false, true},
		{"ws://localhost:7777/ws", false, true},
		{"ws://LOCALHOST:7777/ws", false, true},
		{"ws://[::1]:7777/ws", false, true},
		{"ws://10.0.0.1:7777/ws", false, false},
		{"ws://localhost.evil.example/ws", false, false},
		{"ws://127.0.0.1.nip.io/ws", false, false},
		{"ws://10.0.0.1:7777/ws", true, true},
		{"http://127.0.0.1:7777/ws", false, false},
		{"wss://user:pass@controller.example/ws", false, false},
		{"wss:///ws", false, false},
		{"::bad", false, false},
	}
	for _, c := range cases {
		err := worker.CheckControllerURL(c.url, c.insecure)
		if (err == nil) != c.ok {
			t.Errorf("%s (insecure=%v): err = %v", c.url, c.insecure, err)
		}
		if err != nil && strings.Contains(err.Error(), "pass") {
			t.Errorf("%s: error echoes the URL", c.url)
		}
	}
}

func TestBackoffFullJitterBounds(t *testing.T) {
	b := worker.Backoff{Initial: 500 * time.Millisecond, Max: 30 * time.Second}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second,
		8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for n, w := range want {
		if got := b.Ceiling(n); got != w {
			t.Errorf("Ceiling(%d) = %v, want %v", n, got, w)
		}
	}
	if got := b.Ceiling(1000); got != 30*time.Second {
		t.Errorf("Ceiling(1000) = %v", got)
	}
	r := rand.New(rand.NewPCG(1, 2))
	// 1000 draws at the cap spread across [0, 30 s]: every tenth of the
	// range is hit, nothing falls outside it.
	var buckets [10]int
	for range 1000 {
		d := b.Delay(20, r)
		if d < 0 || d > 30*time.Second {
			t.Fatalf("delay %v out of range", d)
		}
		buckets[min(int(d/(3*time.Second)), 9)]++
	}
	for i, n := range buckets {
		if n == 0 {
			t.Errorf("bucket %d empty: %v", i, buckets)
		}
	}
	if d := (worker.Backoff{}).Ceiling(0); d != 500*time.Millisecond {
		t.Errorf("default initial = %v", d)
	}
}

// --- module set ---

type setFixture struct {
	manifest []byte
	digest   string
	modules  map[string][]byte // by sha256
	fetches  int
	mu       sync.Mutex
}

func newSetFixture(t *testing.T, corrupt bool) *setFixture {
	f := &setFixture{modules: map[string][]byte{}}
	var m moduleset.Manifest
	for _, fam := range []string{"hostinfo", "fs"} {
		b := []byte(strings.Repeat(fam, 3000)) // several chunks
		sum := sha256.Sum256(b)
		h := hex.EncodeToString(sum[:])
		m.Modules = append(m.Modules, moduleset.Module{Family: fam, Version: "1.0.0", SHA256: h,
			Size: int64(len(b)), File: fam + ".wasm", Methods: []moduleset.Method{{Name: "node." + fam + ".x", Version: 1}}})
		if corrupt && fam == "fs" {
			b = append([]byte("X"), b[1:]...)
		}
		f.modules[h] = b
	}
	f.manifest, _ = json.MarshalIndent(m, "", "  ")
	f.digest = m.Digest()
	return f
}

func (f *setFixture) handle(_ *fakecontrol.Conn, req protocol.Request) (any, *protocol.Error) {
	switch req.Method {
	case protocol.MethodModulesManifest:
		return protocol.ModulesManifestResult{Digest: f.digest, Manifest: f.manifest}, nil
	case protocol.MethodModulesFetch:
		var p protocol.ModulesFetchParams
		if perr := protocol.DecodeParams(req.Params, &p); perr != nil {
			return nil, perr
		}
		b, ok := f.modules[p.SHA256]
		if !ok {
			return nil, protocol.DomainError(protocol.CodeNotFound, protocol.DomainModuleNotInSet, "no")
		}
		f.mu.Lock()
		f.fetches++
		f.mu.Unlock()
		const chunk = 4000
		end := min(p.Offset+chunk, int64(len(b)))
		data := b[p.Offset:end]
		return protocol.ModulesFetchResult{SHA256: p.SHA256, Offset: p.Offset, Length: int64(len(data)),
			Size: int64(len(b)), EOF: end == int64(len(b)), DataBase64: base64.StdEncoding.EncodeToString(data)}, nil
	}
	return nil, protocol.Errorf(protocol.CodeMethodNotFound, "no")
}

// setDispatcher is what LoadModules builds: it serves the set's methods.
type setDispatcher struct {
	set    *worker.ModuleSet
	closed chan struct{}
}

func (d *setDispatcher) Methods() map[string]int {
	out := map[string]int{}
	for _, m := range d.set.Manifest.Modules {
		for _, meth := range m.Methods {
			out[meth.Name] = meth.Version
		}
	}
	return out
}

func (d *setDispatcher) Invoke(context.Context, protocol.InvokeRequest) (json.RawMessage, *protocol.Error) {
	return json.RawMessage(`{}`), nil
}

func (d *setDispatcher) Close(context.Context) error { close(d.closed); return nil }

func TestWorkerFetchesVerifiesAndCachesModuleSet(t *testing.T) {
	fx := newSetFixture(t, false)
	srv := fakecontrol.New(fakecontrol.Options{NodeToken: nodeToken,
		ModuleSet: &protocol.ModuleSetRef{Digest: fx.digest}, Handle: fx.handle})
	defer srv.Close()
	cache := filepath.Join(t.TempDir(), "modules")
	loaded := make(chan *worker.ModuleSet, 4)
	load := func(_ context.Context, set *worker.ModuleSet) (worker.Dispatcher, error) {
		loaded <- set
		return &setDispatcher{set: set, closed: make(chan struct{})}, nil
	}
	stop := startWorker(t, worker.Config{ControllerURL: srv.URL, ModuleCacheDir: cache, LoadModules: load})
	ctx := ctxT(t)
	c1, _ := srv.NextNode(ctx)
	if len(c1.Connect.Node.Methods) != 0 || c1.Connect.Node.ModuleSetDigest != "" {
		t.Fatalf("first connect advertises %+v", c1.Connect.Node)
	}
	set := <-loaded
	if set.Digest != fx.digest || len(set.Modules) != 2 {
		t.Fatalf("loaded %+v", set.Digest)
	}
	for _, mod := range set.Manifest.Modules {
		if err := mod.Verify(set.Modules[mod.Family]); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(cache, mod.SHA256+".wasm"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("cache file: %v %v", fi, err)
		}
	}
	// The worker reconnects advertising the set's methods and digest.
	c2, _ := srv.NextNode(ctx)
	if c2.Connect.Node.ModuleSetDigest != fx.digest || c2.Connect.Node.Methods["node.fs.x"] != 1 {
		t.Fatalf("second connect advertises %+v", c2.Connect.Node)
	}
	fetches := fx.fetches
	if fetches < 4 { // 6000 and 9000 bytes in 4000-byte chunks
		t.Fatalf("fetches = %d", fetches)
	}
	stop()

	// A restart loads the cache and fetches nothing.
	startWorker(t, worker.Config{ControllerURL: srv.URL, ModuleCacheDir: cache, LoadModules: load})
	<-loaded
	c3, _ := srv.NextNode(ctx)
	if c3.Connect.Node.ModuleSetDigest != fx.digest {
		t.Fatalf("restart advertises %+v", c3.Connect.Node)
	}
	fx.mu.Lock()
	defer fx.mu.Unlock()
	if fx.fetches != fetches {
		t.Fatalf("restart fetched again: %d -> %d", fetches, fx.fetches)
	}
}

// A module whose fetched bytes do not match its pin is refused alone:
// the rest of the set is installed and advertised, the bad bytes are not
// cached (a restart fetches them again), and the worker does not keep
// its old set (docs/PROTOCOL.md, "Module set").
func TestWorkerRefusesCorruptModuleAlone(t *testing.T) {
	fx := newSetFixture(t, true)
	srv := fakecontrol.New(fakecontrol.Options{NodeToken: nodeToken,
		ModuleSet: &protocol.ModuleSetRef{Digest: fx.digest}, Handle: fx.handle})
	defer srv.Close()
	cache := t.TempDir()
	loaded := make(chan *worker.ModuleSet, 4)
	load := func(_ context.Context, set *worker.ModuleSet) (worker.Dispatcher, error) {
		loaded <- set
		return &setDispatcher{set: set, closed: make(chan struct{})}, nil
	}
	startWorker(t, worker.Config{ControllerURL: srv.URL, ModuleCacheDir: cache, LoadModules: load})
	ctx := ctxT(t)
	srv.NextNode(ctx)
	var set *worker.ModuleSet
	select {
	case set = <-loaded:
	case <-ctx.Done():
		t.Fatal("the set with one corrupt module was not installed")
	}
	if _, ok := set.Modules["hostinfo"]; !ok || set.Digest != fx.digest {
		t.Fatalf("good module missing: %v", set.Digest)
	}
	if _, ok := set.Modules["fs"]; ok {
		t.Fatal("corrupt module bytes were installed")
	}
	c2, _ := srv.NextNode(ctx)
	if c2.Connect.Node.ModuleSetDigest != fx.digest {
		t.Fatalf("second connect advertises %+v", c2.Connect.Node)
	}
	fsMod, _ := set.Manifest.Find("fs")
	hiMod, _ := set.Manifest.Find("hostinfo")
	if _, err := os.Stat(filepath.Join(cache, fsMod.SHA256+".wasm")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("corrupt module cached: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cache, hiMod.SHA256+".wasm")); err != nil {
		t.Fatalf("good module not cached: %v", err)
	}
}

// An unusable CA file stops the node at once (docs/DEPLOY.md, "TLS").
func TestWorkerCAFile(t *testing.T) {
	t.Setenv(client.EnvCAFile, "")
	srv := fakecontrol.New(fakecontrol.Options{NodeToken: nodeToken})
	defer srv.Close()
	// The CA file is read for wss:// only; nothing is dialled.
	w, err := worker.New(worker.Config{ControllerURL: "wss" + strings.TrimPrefix(srv.URL, "ws"), Token: nodeToken,
		Dispatcher: newFake(), CAFile: filepath.Join(t.TempDir(), "missing.pem")})
	if err != nil {
		t.Fatal(err)
	}
	err = w.Run(ctxT(t))
	if !errors.Is(err, worker.ErrFatal) || !errors.Is(err, client.ErrCAFile) {
		t.Fatalf("Run = %v, want ErrFatal wrapping ErrCAFile", err)
	}
	if srv.Connects() != 0 {
		t.Fatalf("connects = %d, want 0", srv.Connects())
	}
}

// An untrusted controller certificate is retried and logged at warn, with
// the message that names --ca-file.
func TestWorkerUntrustedCertificateWarns(t *testing.T) {
	t.Setenv(client.EnvCAFile, "")
	ca, err := tlsdev.NewCA("test CA", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue([]string{"127.0.0.1"}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := fakecontrol.New(fakecontrol.Options{NodeToken: nodeToken, TLS: &tls.Config{Certificates: []tls.Certificate{pair}}})
	defer srv.Close()
	var logBuf strings.Builder
	var mu sync.Mutex
	w, err := worker.New(worker.Config{ControllerURL: srv.URL, Token: nodeToken, Dispatcher: newFake(),
		Backoff: worker.Backoff{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond},
		Logger:  slog.New(slog.NewTextHandler(lockedWriter{&mu, &logBuf}, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	want := `level=WARN msg="controller connection lost; reconnecting" reason="` + client.ReasonUnknownCA
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		got := logBuf.String()
		mu.Unlock()
		if strings.Count(got, want) >= 2 { // retried
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("log lacks two %q:\n%s", want, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}
