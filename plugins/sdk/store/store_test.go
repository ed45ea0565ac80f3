//go:build !wasip1

package store_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"lemon/host"
	"lemon/host/hosttest"
	"lemon/hostcalls"
	"lemon/hostcalls/store"
	"lemon/policies/authority"
	"lemon/protocol"
)

// TestStoreWrapperThroughHost runs a module written only against the SDK
// and its store wrapper through the real host and store table: every
// wrapper sends the args the table decodes and reads the result it
// encodes, and host errors arrive as *protocol.Error.
func TestStoreWrapperThroughHost(t *testing.T) {
	ctx := context.Background()
	st, err := store.New(store.Config{Path: filepath.Join(t.TempDir(), "store.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := host.New(ctx, host.Config{CacheDir: hosttest.CacheDir(t), Ceiling: hostcalls.AllCapabilities,
		Tables: []hostcalls.Table{st.Table()}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	wasm := hosttest.Build(t, "plugins/sdk/store/testdata/kvmod")
	if _, err := h.Load(ctx, hosttest.Pin("kv", wasm), wasm); err != nil {
		t.Fatal(err)
	}
	call := func(method, args string) (string, *protocol.Error) {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		out, perr := h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "i1", NodeID: "n1", Method: method, Args: json.RawMessage(args)})
		return string(out), perr
	}
	// Durable revisions start at 2 (1 is the revision of values written
	// before revisions existed); volatile ones at 1.
	steps := []struct{ method, args, want string }{
		{"node.kv.get", `{"key":"a"}`, `{"found":false,"value":null}`},
		{"node.kv.put", `{"key":"a","value":{"n":1}}`, `{"revision":2}`},
		{"node.kv.put", `{"key":"b","value":"two"}`, `{"revision":3}`},
		{"node.kv.get", `{"key":"a"}`, `{"found":true,"value":{"n":1},"revision":2}`},
		{"node.kv.list", `{"prefix":"","limit":1}`, `{"keys":["a"],"more":true}`},
		{"node.kv.list", `{"after":"a"}`, `{"keys":["b"],"more":false}`},
		{"node.kv.scan", `{"limit":1}`, `{"entries":[{"key":"a","value":{"n":1},"revision":2}],"more":true}`},
		{"node.kv.scan", `{"after":"a"}`, `{"entries":[{"key":"b","value":"two","revision":3}],"more":false}`},
		{"node.kv.cas", `{"key":"a","expected":3,"value":7}`, `{"swapped":false,"revision":2}`},
		{"node.kv.cas", `{"key":"a","expected":2,"value":7}`, `{"swapped":true,"revision":4}`},
		{"node.kv.cas", `{"key":"a","expected":4,"delete":true}`, `{"swapped":true,"revision":0}`},
		{"node.kv.create", `{"key":"a","value":1}`, `{"revision":5}`},
		{"node.kv.delete", `{"key":"a"}`, `{"deleted":true}`},
		{"node.kv.delete", `{"key":"a"}`, `{"deleted":false}`},
		{"node.kv.putdefault", `{"key":"d","value":true}`, `{"found":true,"value":true,"revision":6}`},
		// The volatile namespace: separate keys and revisions, expiry.
		{"node.kv.get", `{"key":"b","volatile":true}`, `{"found":false,"value":null}`},
		{"node.kv.put", `{"key":"b","value":"v","volatile":true}`, `{"revision":1}`},
		{"node.kv.put", `{"key":"t","value":"tok","volatile":true,"expiresAtMs":4102444800000}`, `{"revision":2}`},
		{"node.kv.get", `{"key":"t","volatile":true}`, `{"found":true,"value":"tok","revision":2,"expiresAtMs":4102444800000}`},
		{"node.kv.cas", `{"key":"b","expected":1,"value":"w","volatile":true}`, `{"swapped":true,"revision":3}`},
		{"node.kv.scan", `{"volatile":true}`, `{"entries":[{"key":"b","value":"w","revision":3},{"key":"t","value":"tok","revision":2,"expiresAtMs":4102444800000}],"more":false}`},
		{"node.kv.list", `{"volatile":true}`, `{"keys":["b","t"],"more":false}`},
		{"node.kv.create", `{"key":"c","value":0,"volatile":true}`, `{"revision":4}`},
		{"node.kv.delete", `{"key":"c","volatile":true}`, `{"deleted":true}`},
		{"node.kv.get", `{"key":"b"}`, `{"found":true,"value":"two","revision":3}`},
	}
	for _, s := range steps {
		out, perr := call(s.method, s.args)
		if perr != nil || out != s.want {
			t.Fatalf("%s %s = %s, %v; want %s", s.method, s.args, out, perr, s.want)
		}
	}
	if _, perr := call("node.kv.create", `{"key":"b","value":1}`); perr == nil || perr.Code != protocol.CodeConflict ||
		perr.DomainCode() != protocol.DomainAlreadyExists {
		t.Fatalf("create of an existing key: %v", perr)
	}
	if _, perr := call("node.kv.get", `{"key":""}`); perr == nil || perr.Code != protocol.CodeInvalidParams ||
		perr.Details == nil || perr.Details.Field != "key" {
		t.Fatalf("empty key: %v", perr)
	}
	if _, perr := call("node.kv.put", `{"key":"x","value":1,"expiresAtMs":4102444800000}`); perr == nil ||
		perr.Code != protocol.CodeInvalidParams || perr.Details.Field != "expiresAtMs" {
		t.Fatalf("expiresAtMs on the durable namespace: %v", perr)
	}
	for _, m := range []string{"node.kv.list", "node.kv.scan"} {
		if _, perr := call(m, `{"limit":1001}`); perr == nil || perr.Code != protocol.CodeInvalidParams ||
			perr.Details.Field != "limit" {
			t.Fatalf("%s limit 1001: %v", m, perr)
		}
	}
	if out, perr := call("node.kv.list", `{"limit":1000}`); perr != nil || out != `{"keys":["b","d"],"more":false}` {
		t.Fatalf("limit 1000: %s, %v", out, perr)
	}
	if out, perr := call("node.kv.scan", `{"limit":1000,"prefix":"d"}`); perr != nil || out != `{"entries":[{"key":"d","value":true,"revision":6}],"more":false}` {
		t.Fatalf("scan limit 1000: %s, %v", out, perr)
	}
}

// kvHost runs kvmod on a host over the store at path.
func kvHost(t *testing.T, path string, ceiling []string) (*host.Host, func()) {
	t.Helper()
	ctx := context.Background()
	st, err := store.New(store.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(ctx, host.Config{CacheDir: hosttest.CacheDir(t), Ceiling: ceiling, Tables: []hostcalls.Table{st.Table()}})
	if err != nil {
		t.Fatal(err)
	}
	wasm := hosttest.Build(t, "plugins/sdk/store/testdata/kvmod")
	if _, err := h.Load(ctx, hosttest.Pin("kv", wasm), wasm); err != nil {
		t.Fatal(err)
	}
	return h, func() { h.Close(ctx); st.Close() }
}

func invoke(h *host.Host, req protocol.InvokeRequest) (string, *protocol.Error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if req.InvokeID == "" {
		req.InvokeID = "i1"
	}
	req.NodeID = "n1"
	out, perr := h.Invoke(ctx, req)
	return string(out), perr
}

// The store is the module's bookkeeping (docs/POLICY.md, "The module's own
// store"): a read-class method under a read_only workspace whose context
// grants only "read" writes its volatile token and durable receipt, and
// neither its success nor its later failure says a mutation may have
// applied.
func TestStoreIsBookkeeping(t *testing.T) {
	h, closeKV := kvHost(t, filepath.Join(t.TempDir(), "store.db"), []string{"read"})
	defer closeKV()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ec := func(id string) json.RawMessage {
		return hosttest.ContextOf(t, authority.ExecutionContext{RunID: id, Principal: "reader", Capabilities: []string{"read"},
			Workspace: &authority.Workspace{Root: ws, Mode: authority.WorkspaceReadOnly}})
	}
	outcome := &protocol.InvokeOutcome{}
	out, perr := invoke(h, protocol.InvokeRequest{InvokeID: "t1", Method: "node.kv.token", Args: json.RawMessage(`{"key":"a"}`),
		ExecutionContext: ec("t1"), Outcome: outcome})
	if perr != nil || out != `{"receipt":{"swapped":true,"revision":2},"token":1}` {
		t.Fatalf("token: %s %v", out, perr)
	}
	if outcome.Applied() {
		t.Fatal("bookkeeping writes marked the request applied")
	}
	outcome = &protocol.InvokeOutcome{}
	_, perr = invoke(h, protocol.InvokeRequest{InvokeID: "t2", Method: "node.kv.token", Args: json.RawMessage(`{"key":"b","delete":true}`),
		ExecutionContext: ec("t2"), Outcome: outcome})
	if perr == nil || perr.Code != protocol.CodeInternal || outcome.Applied() ||
		(perr.Details != nil && perr.Details.MutationMayHaveApplied != nil && *perr.Details.MutationMayHaveApplied) {
		t.Fatalf("failure after bookkeeping: %+v applied=%v", perr, outcome.Applied())
	}
	for key, want := range map[string]string{
		`{"key":"token/a","volatile":true}`: `{"found":true,"value":"t","revision":1}`,
		`{"key":"receipt/a"}`:               `{"found":true,"value":{"state":"done"},"revision":2}`,
		`{"key":"receipt/b"}`:               `{"found":true,"value":{"state":"done"},"revision":3}`,
	} {
		if out, perr := invoke(h, protocol.InvokeRequest{Method: "node.kv.get", Args: json.RawMessage(key)}); perr != nil || out != want {
			t.Fatalf("get %s: %s %v, want %s", key, out, perr, want)
		}
	}
}

// Across a node restart (host and store closed and opened again on the
// same file) the durable namespace is kept and the volatile one is gone.
func TestStoreAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	h, closeKV := kvHost(t, path, []string{hostcalls.CapAll})
	for _, args := range []string{`{"key":"d","value":"durable"}`, `{"key":"v","value":"volatile","volatile":true}`} {
		if _, perr := invoke(h, protocol.InvokeRequest{Method: "node.kv.put", Args: json.RawMessage(args)}); perr != nil {
			t.Fatal(perr)
		}
	}
	closeKV()
	h, closeKV = kvHost(t, path, []string{hostcalls.CapAll})
	defer closeKV()
	for args, want := range map[string]string{
		`{"key":"d"}`:                 `{"found":true,"value":"durable","revision":2}`,
		`{"key":"v","volatile":true}`: `{"found":false,"value":null}`,
	} {
		if out, perr := invoke(h, protocol.InvokeRequest{Method: "node.kv.get", Args: json.RawMessage(args)}); perr != nil || out != want {
			t.Fatalf("get %s after restart: %s %v, want %s", args, out, perr, want)
		}
	}
}
