package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	bolt "go.etcd.io/bbolt"

	"lemon/client"
	"lemon/controller"
	"lemon/host/hosttest"
	"lemon/protocol"
	"lemon/worker"
)

const (
	// pairOpToken holds every operator scope (the approver's).
	pairOpToken = "pair-test-operator-token"
	// joinToken holds only operator.pairing (the joining host's).
	joinToken = "pair-test-join-token"
)

// realController runs the real controller on 127.0.0.1 with a durable
// store in dir; restart keeps the same address.
type realController struct {
	t    *testing.T
	dir  string
	addr string
	URL  string
	srv  *controller.Server
	done chan error
	once sync.Once
}

func startController(t *testing.T, dir, addr string) *realController {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	srv, err := controller.New(controller.Config{
		Operators: []controller.OperatorCredential{{Name: "op", TokenHash: controller.HashToken(pairOpToken),
			Scopes: append([]string(nil), protocol.OperatorScopes...)},
			{Name: "join", TokenHash: controller.HashToken(joinToken), Scopes: []string{protocol.ScopePairing}}},
		StateDir: dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	for range 50 { // the old listener's port may linger briefly after a restart
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	c := &realController{t: t, dir: dir, addr: ln.Addr().String(), srv: srv, done: make(chan error, 1)}
	c.URL = "ws://" + c.addr + "/ws"
	go func() { c.done <- srv.Serve(context.Background(), ln) }()
	t.Cleanup(c.stop)
	return c
}

func (c *realController) stop() {
	c.once.Do(func() {
		c.srv.Close()
		<-c.done
	})
}

func (c *realController) restart() *realController {
	c.stop()
	return startController(c.t, c.dir, c.addr)
}

// makeLegacy stops the controller, removes node nodeID's recovery
// credential from its durable store (a record written before credentials
// existed) and restarts it on the same address.
func (c *realController) makeLegacy(nodeID string) *realController {
	c.t.Helper()
	c.stop()
	db, err := bolt.Open(filepath.Join(c.dir, controller.StoreFile), 0o600, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("nodes"))
		var rec map[string]any
		if err := json.Unmarshal(b.Get([]byte(nodeID)), &rec); err != nil {
			return err
		}
		delete(rec, "recoveryHash")
		v, _ := json.Marshal(rec)
		return b.Put([]byte(nodeID), v)
	})
	db.Close()
	if err != nil {
		c.t.Fatal(err)
	}
	return startController(c.t, c.dir, c.addr)
}

func (c *realController) operator(t *testing.T) *client.Conn {
	conn, err := client.Dial(context.Background(), c.URL, client.Options{Token: pairOpToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// approver approves every code Pair shows, from another operator connection.
func approver(t *testing.T, c *realController) (onCode func(string, time.Time), codes func() []string) {
	var mu sync.Mutex
	var seen []string
	op := c.operator(t)
	return func(code string, _ time.Time) {
			mu.Lock()
			seen = append(seen, code)
			mu.Unlock()
			go op.Call(context.Background(), protocol.MethodPairApprove, protocol.PairDecisionParams{Code: code})
		}, func() []string {
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), seen...)
		}
}

func pairCfg(c *realController, store worker.TokenStore, name string) worker.PairConfig {
	return worker.PairConfig{ControllerURL: c.URL, OperatorToken: joinToken, Name: name,
		Methods: map[string]int{"fast": 1}, Store: store, PollInterval: 20 * time.Millisecond,
		Backoff: worker.Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond}}
}

// runPaired runs a worker with a stored session until the test ends.
// done yields Run's result once; stop cancels and waits.
func runPaired(t *testing.T, c *realController, rec *worker.NodeRecord, f *fakeDispatcher) (done <-chan error, stop func()) {
	w, err := worker.New(worker.Config{ControllerURL: c.URL, Name: rec.Name, NodeID: rec.NodeID, Token: rec.SessionToken,
		Dispatcher: f, Backoff: worker.Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	finished := make(chan struct{})
	go func() { result <- w.Run(ctx); close(finished) }()
	stop = func() {
		cancel()
		select {
		case <-finished:
		case <-time.After(30 * time.Second):
			buf := make([]byte, 1<<20)
			t.Errorf("worker Run did not return within 30 s of its cancel:\n%s", buf[:runtime.Stack(buf, true)])
		}
	}
	t.Cleanup(stop)
	return result, stop
}

// pairCtx bounds one Pair call, so a stuck pairing fails the test with its
// error instead of hanging the suite.
func pairCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func waitOnline(t *testing.T, op *client.Conn, nodeID string, want bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		raw, perr := op.Call(context.Background(), protocol.MethodNodeDescribe, protocol.NodeDescribeParams{NodeID: nodeID})
		if perr == nil {
			var d protocol.NodeDescription
			json.Unmarshal(raw, &d)
			if d.Online == want {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("node %s online != %v", nodeID, want)
}

func TestPairStoreRestartRepair(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	store, err := worker.DefaultTokenStore()
	if err != nil || !strings.HasPrefix(store.Dir, os.Getenv("HOME")) {
		t.Fatalf("store %q: %v", store.Dir, err)
	}
	c := startController(t, t.TempDir(), "")
	onCode, codes := approver(t, c)
	cfg := pairCfg(c, store, "  worker-1 ")
	cfg.OnCode = onCode
	rec, err := worker.Pair(pairCtx(t), cfg)
	if err != nil {
		t.Fatalf("Pair: %v", err)
	}
	if rec.Name != "worker-1" || rec.NodeID == "" || rec.SessionToken == "" || rec.RecoveryCredential == "" ||
		rec.ControllerURL != c.URL || len(codes()) != 1 {
		t.Fatalf("record %v, codes %v", rec, codes())
	}
	// Modes 0700 / 0600 and the path keyed by sha256(nodeId).
	fi, err := os.Stat(store.Dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v", fi.Mode())
	}
	fi, err = os.Stat(store.RecordPath(rec.NodeID))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v, %v", fi, err)
	}
	if got, err := store.FindByName("worker-1", c.URL); err != nil || got.SessionToken != rec.SessionToken {
		t.Fatalf("FindByName: %v", err)
	}
	if _, err := store.Load(rec.NodeID, "ws://127.0.0.1:1/ws"); !errors.Is(err, worker.ErrControllerMismatch) {
		t.Fatalf("other controller: %v", err)
	}

	f := newFake()
	_, stop1 := runPaired(t, c, rec, f)
	op := c.operator(t)
	waitOnline(t, op, rec.NodeID, true)

	// Controller restart: the node reconnects with its stored token.
	c = c.restart()
	op = c.operator(t)
	waitOnline(t, op, rec.NodeID, true)
	stop1()

	// Re-pair with the recovery credential: same ID and name, new token,
	// the old token refused.
	cfg = pairCfg(c, store, "")
	cfg.Existing = rec
	rec2, err := worker.Pair(pairCtx(t), cfg)
	if err != nil {
		t.Fatalf("re-pair: %v", err)
	}
	if rec2.NodeID != rec.NodeID || rec2.Name != "worker-1" || rec2.SessionToken == rec.SessionToken ||
		rec2.SessionGeneration <= rec.SessionGeneration || rec2.RecoveryCredential == "" || rec2.RecoveryCredential == rec.RecoveryCredential {
		t.Fatalf("re-paired record %v gen %d->%d", rec2, rec.SessionGeneration, rec2.SessionGeneration)
	}
	// The rotated credential replaced the old one in the store.
	if got, err := store.Load(rec.NodeID, c.URL); err != nil || got.RecoveryCredential != rec2.RecoveryCredential || got.SessionToken != rec2.SessionToken {
		t.Fatalf("stored after re-pair: %v", err)
	}
	// A copy of the old credential no longer works, and says why.
	cfg = pairCfg(c, store, "")
	cfg.Existing = rec
	if _, err := worker.Pair(pairCtx(t), cfg); err == nil || !strings.Contains(err.Error(), "another pairing has used it") {
		t.Fatalf("old credential: %v", err)
	}
	old, err := worker.New(worker.Config{ControllerURL: c.URL, NodeID: rec.NodeID, Token: rec.SessionToken, Dispatcher: f})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Run(context.Background()); !errors.Is(err, worker.ErrFatal) {
		t.Fatalf("old token: %v", err)
	}

	// A legacy record (no recovery credential) must take the repair path.
	legacy := *rec2
	legacy.RecoveryCredential = ""
	cfg = pairCfg(c, store, "")
	cfg.Existing = &legacy
	if _, err := worker.Pair(pairCtx(t), cfg); err == nil || !strings.Contains(err.Error(), "--repair --node-id") {
		t.Fatalf("legacy without --repair: %v", err)
	}
	// The controller refuses to repair a node that holds a credential
	// (the stored record is left as it was).
	cfg = pairCfg(c, store, "")
	cfg.Repair, cfg.NodeID = true, rec.NodeID
	cfg.OnCode = func(code string, _ time.Time) { t.Errorf("repair of a node with a credential showed code %s", code) }
	if _, err := worker.Pair(pairCtx(t), cfg); err == nil || !strings.Contains(err.Error(), "refuses to repair") {
		t.Fatalf("repair: %v", err)
	}
	if got, err := store.Load(rec.NodeID, c.URL); err != nil || got.RecoveryCredential != rec2.RecoveryCredential {
		t.Fatalf("stored after refused repair: %v", err)
	}
}

// A running worker whose session a re-pair revokes loses its socket and
// stops: it never keeps receiving requests beside the new session.
func TestRepairClosesOldSession(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	store, _ := worker.DefaultTokenStore()
	c := startController(t, t.TempDir(), "")
	onCode, _ := approver(t, c)
	cfg := pairCfg(c, store, "worker-2")
	cfg.OnCode = onCode
	rec, err := worker.Pair(pairCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	done, _ := runPaired(t, c, rec, newFake())
	waitOnline(t, c.operator(t), rec.NodeID, true)
	cfg = pairCfg(c, store, "")
	cfg.Existing = rec
	if _, err := worker.Pair(pairCtx(t), cfg); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var pe *protocol.Error
		if !errors.Is(err, worker.ErrFatal) || !errors.As(err, &pe) || pe.Code != protocol.CodeUnauthorized {
			t.Fatalf("old worker: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("old worker still running after its session was revoked")
	}
}

// An interrupted join resumes the same pairing (same code) from the store,
// and gets a fresh challenge although the first was never used.
func TestPairResumesAfterInterruption(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	store, _ := worker.DefaultTokenStore()
	c := startController(t, t.TempDir(), "")
	ctx, cancel := context.WithCancel(context.Background())
	var first string
	cfg := pairCfg(c, store, "worker-3")
	cfg.OnCode = func(code string, _ time.Time) { first = code; cancel() }
	if _, err := worker.Pair(ctx, cfg); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted: %v", err)
	}
	op := c.operator(t)
	if _, perr := op.Call(context.Background(), protocol.MethodPairApprove, protocol.PairDecisionParams{Code: first}); perr != nil {
		t.Fatal(perr)
	}
	// The restarted join resumes: approved, a fresh challenge, a session.
	cfg = pairCfg(c, store, "worker-3")
	cfg.OnCode = func(code string, _ time.Time) { t.Errorf("code shown again: %s", code) }
	rec, err := worker.Pair(pairCtx(t), cfg)
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if rec.Name != "worker-3" {
		t.Fatalf("record %v", rec)
	}
	entries, _ := os.ReadDir(store.Dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "pairing-") {
			t.Fatal("pending pairing left behind")
		}
	}
}

func TestPairOperatorCredentialErrorsDoNotEcho(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	store, _ := worker.DefaultTokenStore()
	c := startController(t, t.TempDir(), "")
	cfg := pairCfg(c, store, "worker-4")
	cfg.OperatorToken = ""
	if _, err := worker.Pair(pairCtx(t), cfg); err == nil || !strings.Contains(err.Error(), "LEMON_NODE_OPERATOR_TOKEN") {
		t.Fatalf("missing token: %v", err)
	}
	const wrong = "wrong-operator-token-xyz"
	cfg.OperatorToken = wrong
	_, err := worker.Pair(pairCtx(t), cfg)
	var pe *worker.PairError
	if !errors.As(err, &pe) || strings.Contains(err.Error(), wrong) || !strings.Contains(err.Error(), "not accept") {
		t.Fatalf("wrong token: %v", err)
	}
	cfg.ControllerURL = "ws://10.1.2.3:7777/ws"
	if _, err := worker.Pair(pairCtx(t), cfg); !errors.Is(err, worker.ErrInsecureController) {
		t.Fatalf("insecure: %v", err)
	}
}

// An unusable CA file ends pairing at once with a message naming the
// flag, not the path (docs/DEPLOY.md, "TLS").
func TestPairCAFileRefused(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv(client.EnvCAFile, "")
	store, _ := worker.DefaultTokenStore()
	missing := filepath.Join(t.TempDir(), "canary-dir", "ca.pem")
	_, err := worker.Pair(pairCtx(t), worker.PairConfig{ControllerURL: "wss://127.0.0.1:1/ws", OperatorToken: "op-token",
		Name: "worker-ca", Store: store, CAFile: missing})
	var pe *worker.PairError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "--ca-file") || strings.Contains(err.Error(), "canary-dir") {
		t.Fatalf("Pair = %v", err)
	}
}

// A record file copied over another node's file is refused.
func TestTokenStoreRefusesSwappedRecord(t *testing.T) {
	store := worker.TokenStore{Dir: filepath.Join(t.TempDir(), "execution")}
	a := &worker.NodeRecord{NodeID: "node-a", Name: "a", ControllerURL: "wss://c/ws", SessionToken: "tok-a"}
	b := &worker.NodeRecord{NodeID: "node-b", Name: "b", ControllerURL: "wss://c/ws", SessionToken: "tok-b"}
	if err := store.Save(a); err != nil {
		t.Fatal(err)
	}
	if err := store.Save(b); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(store.RecordPath("node-b"))
	os.WriteFile(store.RecordPath("node-a"), data, 0o600)
	if _, err := store.Load("node-a", "wss://c/ws"); !errors.Is(err, worker.ErrRecordWrongNode) {
		t.Fatalf("swapped: %v", err)
	}
	if got, err := store.FindByName("a", "wss://c/ws"); err == nil {
		t.Fatalf("FindByName found %v", got)
	}
	if _, err := store.Load("node-b", ""); !errors.Is(err, worker.ErrControllerMismatch) {
		t.Fatalf("no controller: %v", err)
	}
	if rec, _ := store.Load("node-b", "wss://c/ws"); rec == nil || strings.Contains(rec.String(), "tok-b") {
		t.Fatal("String leaks the token")
	}
	if _, err := store.Load("node-c", "wss://c/ws"); !errors.Is(err, worker.ErrNoRecord) {
		t.Fatalf("missing: %v", err)
	}
}

// A join that meets its token's bound of live pairings waits (with
// backoff) for a place instead of failing, and pairs once one frees.
func TestPairWaitsAtPairingBound(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	store, _ := worker.DefaultTokenStore()
	c := startController(t, t.TempDir(), "")
	onCode, _ := approver(t, c)
	cfg := pairCfg(c, store, "first")
	cfg.OnCode = onCode
	first, err := worker.Pair(pairCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Fill the join token's bound: one recovery (approved, not exchanged)
	// and MaxPendingPairingsPerCredential-1 pending new nodes.
	join, err := client.Dial(context.Background(), c.URL, client.Options{Token: joinToken, Scopes: []string{protocol.ScopePairing}})
	if err != nil {
		t.Fatal(err)
	}
	defer join.Close()
	call := func(method string, params any) json.RawMessage {
		t.Helper()
		raw, perr := join.Call(pairCtx(t), method, params)
		if perr != nil {
			t.Fatalf("%s: %s %s", method, perr.Code, perr.DomainCode())
		}
		return raw
	}
	var rec protocol.PairRequestResult
	json.Unmarshal(call(protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: first.NodeID, RecoveryCredential: first.RecoveryCredential}), &rec)
	for i := 1; i < protocol.MaxPendingPairingsPerCredential; i++ {
		call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "filler-" + string(rune('a'+i%26)) + string(rune('a'+i/26))})
	}
	var logs hosttest.LogBuffer
	cfg = pairCfg(c, store, "waiting")
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	codes := make(chan string, 1)
	cfg.OnCode = func(code string, _ time.Time) { codes <- code }
	type result struct {
		rec *worker.NodeRecord
		err error
	}
	done := make(chan result, 1)
	go func() { r, err := worker.Pair(pairCtx(t), cfg); done <- result{r, err} }()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs.String(), "too many pairings in progress; retrying") {
		select {
		case r := <-done:
			t.Fatalf("Pair returned at the bound: %v", r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("Pair never met the bound:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Completing the recovery frees a place: the waiting join shows its code.
	var rc protocol.PairRequestResult
	json.Unmarshal(call(protocol.MethodPairRequest, protocol.PairRequestParams{PairingID: rec.PairingID, RequestSecret: rec.RequestSecret}), &rc)
	call(protocol.MethodConnectChallenge, protocol.ConnectChallengeParams{PairingID: rc.PairingID, Challenge: rc.Challenge})
	var code string
	select {
	case code = <-codes:
	case r := <-done:
		t.Fatalf("Pair returned before its code: %v", r.err)
	case <-time.After(30 * time.Second):
		t.Fatal("no code after a place freed")
	}
	if _, perr := c.operator(t).Call(context.Background(), protocol.MethodPairApprove, protocol.PairDecisionParams{Code: code}); perr != nil {
		t.Fatal(perr)
	}
	r := <-done
	if r.err != nil || r.rec.Name != "waiting" {
		t.Fatalf("Pair: %v", r.err)
	}
}

// dropFirstSession is a net.Conn that fails the first read carrying a
// connect.challenge answer (a "sessionToken"), as a connection lost right
// after the controller committed the exchange.
type dropFirstSession struct {
	net.Conn
	dropped *atomic.Bool
}

func (c dropFirstSession) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && strings.Contains(string(b[:n]), `"sessionToken"`) && c.dropped.CompareAndSwap(false, true) {
		c.Conn.Close()
		return 0, io.ErrUnexpectedEOF
	}
	return n, err
}

// The answer to connect.challenge is lost after the controller committed
// it (the recovery credential rotated): the worker re-pairs with the
// credential it chose and saved before sending, so neither a new node nor
// a re-pair loses its identity.
func TestPairSurvivesLostChallengeAnswer(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	store, _ := worker.DefaultTokenStore()
	c := startController(t, t.TempDir(), "")
	var dropped atomic.Bool
	dialer := &websocket.Dialer{HandshakeTimeout: 10 * time.Second,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return dropFirstSession{conn, &dropped}, nil
		}}
	onCode, codes := approver(t, c)
	cfg := pairCfg(c, store, "lossy")
	cfg.OnCode, cfg.Dialer = onCode, dialer
	rec, err := worker.Pair(pairCtx(t), cfg)
	if err != nil {
		t.Fatalf("new node with a lost answer: %v", err)
	}
	if !dropped.Load() || rec.Name != "lossy" || rec.SessionGeneration != 2 || len(codes()) != 1 {
		t.Fatalf("new node: dropped %v, %v gen %d, codes %v", dropped.Load(), rec, rec.SessionGeneration, codes())
	}
	// A re-pair whose answer is lost keeps the identity too.
	dropped.Store(false)
	cfg = pairCfg(c, store, "")
	cfg.Existing, cfg.Dialer = rec, dialer
	rec2, err := worker.Pair(pairCtx(t), cfg)
	if err != nil {
		t.Fatalf("re-pair with a lost answer: %v", err)
	}
	if !dropped.Load() || rec2.NodeID != rec.NodeID || rec2.SessionGeneration != 4 || rec2.RecoveryCredential == rec.RecoveryCredential {
		t.Fatalf("re-pair: dropped %v, %v gen %d", dropped.Load(), rec2, rec2.SessionGeneration)
	}
	if got, err := store.Load(rec.NodeID, c.URL); err != nil || got.RecoveryCredential != rec2.RecoveryCredential || got.SessionToken != rec2.SessionToken {
		t.Fatalf("stored: %v", err)
	}
	// The stored session works.
	done, stop := runPaired(t, c, rec2, newFake())
	waitOnline(t, c.operator(t), rec.NodeID, true)
	stop()
	<-done
}

// A pending pairing whose challenge was sent but never reached the
// controller, and which then expired: the credential it would have set
// is refused, and the join pairs as planned, showing its new code.
func TestPairAfterUnsentChallengeExpired(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	store, _ := worker.DefaultTokenStore()
	c := startController(t, t.TempDir(), "")
	if err := store.SavePending(&worker.PendingPairing{ControllerURL: c.URL, Name: "name:unsent", NodeID: "node-0123456789abcdef0123456789abcdef",
		Kind: protocol.PairKindNew, PairingID: "pair-000000000000000000000000", RequestSecret: "lnq_gone", Code: "AAAA-AAAA",
		ExpiresAtMs: time.Now().Add(time.Minute).UnixMilli(), NextRecovery: "lnr_" + strings.Repeat("x", 43)}); err != nil {
		t.Fatal(err)
	}
	onCode, codes := approver(t, c)
	cfg := pairCfg(c, store, "unsent")
	cfg.OnCode = onCode
	rec, err := worker.Pair(pairCtx(t), cfg)
	if err != nil {
		t.Fatalf("Pair: %v", err)
	}
	if rec.Name != "unsent" || rec.NodeID == "node-0123456789abcdef0123456789abcdef" || rec.SessionGeneration != 1 ||
		len(codes()) != 1 || codes()[0] == "AAAA-AAAA" {
		t.Fatalf("record %v gen %d, codes %v", rec, rec.SessionGeneration, codes())
	}
}
