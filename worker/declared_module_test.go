package worker_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"lemon/client"
	"lemon/controller"
	"lemon/host"
	"lemon/host/hosttest"
	"lemon/host/moduleset"
	"lemon/protocol"
	"lemon/worker"
)

const readTok = "read-token-for-declared-0123456789"

// TestMain removes the modules hosttest built.
func TestMain(m *testing.M) { hosttest.Main(m) }

// A family declared only in its module's manifest (worker/testdata/kvmod)
// works end to end through the real host: the controller routes what the
// pinned set declares, checks the schema and the declared scopes, and the
// node serves it, directly and through node.invoke.
func TestDeclaredFamilyEndToEnd(t *testing.T) {
	ctx := ctxT(t)
	wasm := hosttest.Build(t, "worker/testdata/kvmod")
	man, err := host.Inspect(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	mod := hosttest.Pin("kv", wasm)
	mod.Version, mod.Methods = man.Version, man.Methods
	m := moduleset.Manifest{Modules: []moduleset.Module{mod}}
	bytes := map[string][]byte{"kv": wasm}
	pinned, err := controller.NewModuleSet(m, bytes)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := controller.New(controller.Config{
		Operators: []controller.OperatorCredential{
			{Name: "admin", TokenHash: controller.HashToken(adminTok), Scopes: []string{protocol.ScopeAdmin}},
			{Name: "reader", TokenHash: controller.HashToken(readTok), Scopes: []string{protocol.ScopeRead}},
		},
		NodeTokens: []controller.NodeCredential{{Name: "n1", TokenHash: controller.HashToken(nodeToken)}},
		ModuleSet:  pinned,
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

	nh, err := worker.NewNodeHost(worker.HostOptions{DefaultCwd: t.TempDir(), StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nh.Close() })
	initial, err := worker.NewModuleSet(m, bytes)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, worker.Config{ControllerURL: url, AllowInsecureController: true, Name: "n1",
		LoadModules: nh.LoadModules, InitialSet: initial})

	dial := func(tok string) *client.Conn {
		c, err := client.Dial(ctx, url, client.Options{Token: tok, ClientID: "test", ClientVersion: "1"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	admin, reader := dial(adminTok), dial(readTok)
	var nodeID string
	waitFor(t, ctx, func() bool {
		raw, perr := admin.Call(ctx, protocol.MethodNodeList, nil)
		var l protocol.NodeListResult
		if perr != nil || json.Unmarshal(raw, &l) != nil || len(l.Nodes) != 1 || !l.Nodes[0].Online {
			return false
		}
		nodeID = l.Nodes[0].NodeID
		raw, perr = admin.Call(ctx, protocol.MethodNodeDescribe, map[string]string{"nodeId": nodeID})
		var d protocol.NodeDescription
		return perr == nil && json.Unmarshal(raw, &d) == nil && d.Methods["node.kv.get"] == 1
	})

	// Direct call with a read token (the declared scope).
	raw, perr := reader.Call(ctx, "node.kv.get", map[string]string{"nodeId": nodeID, "key": "k1"})
	if perr != nil || !strings.Contains(string(raw), `"value":"v-k1"`) {
		t.Fatalf("node.kv.get: %s %v", raw, perr)
	}
	// Through node.invoke.
	raw, perr = admin.Call(ctx, protocol.MethodNodeInvoke, map[string]any{"nodeId": nodeID, "method": "node.kv.get",
		"args": map[string]string{"key": "k2"}})
	if perr != nil || !strings.Contains(string(raw), `"value":"v-k2"`) {
		t.Fatalf("node.invoke node.kv.get: %s %v", raw, perr)
	}
	// Params breaking the schema: refused naming the field.
	_, perr = admin.Call(ctx, "node.kv.get", map[string]string{"nodeId": nodeID, "key": strings.Repeat("k", 17)})
	if perr == nil || perr.Code != protocol.CodeInvalidParams || perr.Details == nil || perr.Details.Field != "key" ||
		!strings.Contains(perr.Message, "params.key") {
		t.Fatalf("long key: %v", perr)
	}
	// A read token is refused for the admin-declared method; admin may call it.
	if _, perr := reader.Call(ctx, "node.kv.wipe", map[string]string{"nodeId": nodeID}); perr == nil || perr.Code != protocol.CodeForbidden {
		t.Fatalf("read token on node.kv.wipe: %v", perr)
	}
	if raw, perr := admin.Call(ctx, "node.kv.wipe", map[string]string{"nodeId": nodeID}); perr != nil || !strings.Contains(string(raw), "wiped") {
		t.Fatalf("node.kv.wipe: %s %v", raw, perr)
	}
}
