package worker_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"lemon/client"
	"lemon/controller"
	"lemon/host/moduleset"
	"lemon/protocol"
	"lemon/worker"
)

const adminTok = "admin-token-for-repin-0123456789"

// repinSet is a one-module set of family kv declaring methods; salt makes
// its bytes (and digest) differ.
func repinSet(t *testing.T, salt string, methods ...string) (moduleset.Manifest, map[string][]byte) {
	t.Helper()
	data := []byte("kv module " + salt)
	sum := sha256.Sum256(data)
	mod := moduleset.Module{Family: "kv", Version: "1.0." + salt, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data)), File: "kv.wasm"}
	for _, m := range methods {
		mod.Methods = append(mod.Methods, moduleset.Method{Name: m, Version: 1, Capability: "kv", Scope: protocol.ScopeAdmin})
	}
	return moduleset.Manifest{Modules: []moduleset.Module{mod}}, map[string][]byte{"kv": data}
}

// blockingDispatcher serves its set's methods; node.kv.slow waits for
// release and answers with the digest of the set that served it.
type blockingDispatcher struct {
	set     *worker.ModuleSet
	started chan struct{}
	release chan struct{}
}

func (d *blockingDispatcher) Methods() map[string]int {
	out := map[string]int{}
	for _, m := range d.set.Manifest.Modules {
		for _, meth := range m.Methods {
			out[meth.Name] = meth.Version
		}
	}
	return out
}

func (d *blockingDispatcher) Invoke(ctx context.Context, req protocol.InvokeRequest) (json.RawMessage, *protocol.Error) {
	if req.Method == "node.kv.slow" {
		d.started <- struct{}{}
		select {
		case <-d.release:
		case <-ctx.Done():
			return nil, protocol.Errorf(protocol.CodeUnavailable, "cancelled")
		}
	}
	b, _ := json.Marshal(map[string]string{"set": d.set.Digest})
	return b, nil
}

// A controller re-pinned while a call is in flight: the node is told,
// fetches and installs the new set, lets the call finish on the old one,
// and reconnects serving the new set's methods.
func TestRepinKeepsCallsInFlight(t *testing.T) {
	ctx := ctxT(t)
	mA, bA := repinSet(t, "1", "node.kv.slow")
	mB, bB := repinSet(t, "2", "node.kv.slow", "node.kv.added")
	setA, err := controller.NewModuleSet(mA, bA)
	if err != nil {
		t.Fatal(err)
	}
	setB, err := controller.NewModuleSet(mB, bB)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := controller.New(controller.Config{
		Operators:  []controller.OperatorCredential{{Name: "admin", TokenHash: controller.HashToken(adminTok), Scopes: []string{protocol.ScopeAdmin}}},
		NodeTokens: []controller.NodeCredential{{Name: "n1", TokenHash: controller.HashToken(nodeToken)}},
		ModuleSet:  setA,
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(context.Background(), ln) }()
	t.Cleanup(func() { srv.Close(); <-served })
	url := "ws://" + ln.Addr().String() + "/ws"

	started := make(chan struct{}, 4)
	release := make(chan struct{})
	loaded := make(chan string, 4)
	load := func(_ context.Context, set *worker.ModuleSet) (worker.Dispatcher, error) {
		loaded <- set.Digest
		return &blockingDispatcher{set: set, started: started, release: release}, nil
	}
	initial, err := worker.NewModuleSet(mA, bA)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, worker.Config{ControllerURL: url, AllowInsecureController: true, Name: "n1",
		LoadModules: load, InitialSet: initial})
	if d := <-loaded; d != mA.Digest() {
		t.Fatalf("loaded %s first", d)
	}

	op, err := client.Dial(ctx, url, client.Options{Token: adminTok, ClientID: "test", ClientVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	var nodeID string
	waitFor(t, ctx, func() bool {
		raw, perr := op.Call(ctx, protocol.MethodNodeList, nil)
		var l protocol.NodeListResult
		if perr != nil || json.Unmarshal(raw, &l) != nil || len(l.Nodes) != 1 || !l.Nodes[0].Online {
			return false
		}
		nodeID = l.Nodes[0].NodeID
		return true
	})
	type outcome struct {
		raw  json.RawMessage
		perr *protocol.Error
	}
	inflight := make(chan outcome, 1)
	go func() {
		raw, perr := op.Call(ctx, "node.kv.slow", map[string]string{"nodeId": nodeID})
		inflight <- outcome{raw, perr}
	}()
	<-started

	if err := srv.SetModuleSet(setB); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-loaded:
		if d != mB.Digest() {
			t.Fatalf("loaded %s", d)
		}
	case <-ctx.Done():
		t.Fatal("the node did not load the re-pinned set")
	}
	// The call in flight completes, served by the set it started on.
	close(release)
	o := <-inflight
	if o.perr != nil || !strings.Contains(string(o.raw), mA.Digest()) {
		t.Fatalf("in-flight call: %s %v", o.raw, o.perr)
	}
	// The node reconnects serving the new set.
	waitFor(t, ctx, func() bool {
		raw, perr := op.Call(ctx, protocol.MethodNodeDescribe, map[string]string{"nodeId": nodeID})
		var d protocol.NodeDescription
		return perr == nil && json.Unmarshal(raw, &d) == nil && d.Online && d.ModuleSetDigest == mB.Digest() && d.Methods["node.kv.added"] == 1
	})
	raw, perr := op.Call(ctx, "node.kv.added", map[string]string{"nodeId": nodeID})
	if perr != nil || !strings.Contains(string(raw), mB.Digest()) {
		t.Fatalf("new method: %s %v", raw, perr)
	}
}

// waitFor polls cond until it holds or ctx ends (a hang guard, not a timing assertion).
func waitFor(t *testing.T, ctx context.Context, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("condition not reached")
		case <-time.After(5 * time.Millisecond):
		}
	}
}
