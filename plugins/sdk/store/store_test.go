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
	steps := []struct{ method, args, want string }{
		{"node.kv.get", `{"key":"a"}`, `{"found":false,"value":null}`},
		{"node.kv.put", `{"key":"a","value":{"n":1}}`, `{"ok":true}`},
		{"node.kv.put", `{"key":"b","value":"two"}`, `{"ok":true}`},
		{"node.kv.get", `{"key":"a"}`, `{"found":true,"value":{"n":1}}`},
		{"node.kv.list", `{"prefix":"","limit":1}`, `{"keys":["a"],"more":true}`},
		{"node.kv.list", `{"after":"a"}`, `{"keys":["b"],"more":false}`},
		{"node.kv.delete", `{"key":"a"}`, `{"deleted":true}`},
		{"node.kv.delete", `{"key":"a"}`, `{"deleted":false}`},
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
	if _, perr := call("node.kv.list", `{"limit":1001}`); perr == nil || perr.Code != protocol.CodeInvalidParams ||
		perr.Details.Field != "limit" {
		t.Fatalf("limit 1001: %v", perr)
	}
	if out, perr := call("node.kv.list", `{"limit":1000}`); perr != nil || out != `{"keys":["b"],"more":false}` {
		t.Fatalf("limit 1000: %s, %v", out, perr)
	}
}
