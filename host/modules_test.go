package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"lemon/host"
	"lemon/host/hosttest"
	"lemon/host/moduleset"
	"lemon/hostcalls"
	"lemon/hostcalls/store"
	"lemon/protocol"
)

func methodNames(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// kvHost loads kvmod (methods node.kv.get and node.kv.put need its own
// capability "kv", node.kv.stat needs "hostinfo"; get and stat call
// test.ping (hostinfo), put calls test.write (write)) under ceiling.
func kvHost(t *testing.T, ceiling []string) (*host.Host, *testTable) {
	t.Helper()
	ctx := context.Background()
	tt := &testTable{release: make(chan struct{})}
	h, err := host.New(ctx, host.Config{CacheDir: hosttest.CacheDir(t), Ceiling: ceiling, Tables: []hostcalls.Table{tt.table()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	wasm := hosttest.Build(t, "host/testdata/kvmod")
	if _, err := h.Load(ctx, hosttest.Pin("kv", wasm), wasm); err != nil {
		t.Fatal(err)
	}
	return h, tt
}

func invokeH(h *host.Host, method string) (json.RawMessage, *protocol.Error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "i1", NodeID: "n1", Method: method, Args: json.RawMessage(`{"nodeId":"n1"}`)})
}

func wantDomain(t *testing.T, perr *protocol.Error, code, domain string) {
	t.Helper()
	if perr == nil || perr.Code != code || perr.DomainCode() != domain {
		t.Fatalf("want %s/%s, got %+v", code, domain, perr)
	}
}

// Capabilities are open (docs/POLICY.md, "Capabilities"): a method runs
// only if its declared capability is within the ceiling, and each host
// call it makes still needs the host call's own capability. A node
// advertises only the methods its ceiling allows.
func TestOpenCapabilityCeiling(t *testing.T) {
	t.Run("kv,hostinfo,write serves the family", func(t *testing.T) {
		h, tt := kvHost(t, []string{"kv", "hostinfo", "write"})
		if got := methodNames(h.Methods()); !reflect.DeepEqual(got, []string{"node.kv.get", "node.kv.put", "node.kv.stat"}) {
			t.Fatalf("methods = %v", got)
		}
		if out, perr := invokeH(h, "node.kv.get"); perr != nil || !strings.Contains(string(out), `"module":"kv"`) {
			t.Fatalf("get: %s %v", out, perr)
		}
		if out, perr := invokeH(h, "node.kv.put"); perr != nil || string(out) != `{"stored":true}` || tt.writes != 1 {
			t.Fatalf("put: %s %v writes=%d", out, perr, tt.writes)
		}
	})
	t.Run("a ceiling without kv neither advertises nor runs kv methods", func(t *testing.T) {
		h, tt := kvHost(t, []string{"hostinfo", "write"})
		if got := methodNames(h.Methods()); !reflect.DeepEqual(got, []string{"node.kv.stat"}) {
			t.Fatalf("methods = %v", got)
		}
		_, perr := invokeH(h, "node.kv.put")
		wantDomain(t, perr, protocol.CodeForbidden, protocol.DomainCapabilityDenied)
		if tt.writes != 0 {
			t.Fatalf("writes = %d", tt.writes)
		}
		perr, ok := h.NotServed("node.kv.get")
		if !ok {
			t.Fatal("NotServed(node.kv.get) = false")
		}
		wantDomain(t, perr, protocol.CodeForbidden, protocol.DomainCapabilityDenied)
		if _, ok := h.NotServed("node.kv.stat"); ok {
			t.Fatal("NotServed of a served method")
		}
		if _, perr := invokeH(h, "node.kv.stat"); perr != nil {
			t.Fatal(perr)
		}
	})
	t.Run("kv alone admits the methods but not their host calls", func(t *testing.T) {
		h, tt := kvHost(t, []string{"kv"})
		if got := methodNames(h.Methods()); !reflect.DeepEqual(got, []string{"node.kv.get", "node.kv.put"}) {
			t.Fatalf("methods = %v", got)
		}
		_, perr := invokeH(h, "node.kv.get")
		wantDomain(t, perr, protocol.CodeForbidden, protocol.DomainCapabilityDenied)
		_, perr = invokeH(h, "node.kv.put")
		wantDomain(t, perr, protocol.CodeForbidden, protocol.DomainCapabilityDenied)
		if tt.writes != 0 || tt.pings != 0 {
			t.Fatalf("host calls ran: writes=%d pings=%d", tt.writes, tt.pings)
		}
	})
	t.Run("kv,write runs put but not get", func(t *testing.T) {
		h, tt := kvHost(t, []string{"kv", "write"})
		if _, perr := invokeH(h, "node.kv.put"); perr != nil || tt.writes != 1 {
			t.Fatalf("put: %v writes=%d", perr, tt.writes)
		}
		_, perr := invokeH(h, "node.kv.get")
		wantDomain(t, perr, protocol.CodeForbidden, protocol.DomainCapabilityDenied)
	})
	t.Run("all includes module-declared capabilities", func(t *testing.T) {
		h, _ := kvHost(t, []string{hostcalls.CapAll})
		if got := len(h.Methods()); got != 3 {
			t.Fatalf("methods = %v", h.Methods())
		}
		if _, perr := invokeH(h, "node.kv.get"); perr != nil {
			t.Fatal(perr)
		}
	})
	t.Run("the built-in list does not include kv", func(t *testing.T) {
		h, _ := kvHost(t, hostcalls.AllCapabilities)
		if got := methodNames(h.Methods()); !reflect.DeepEqual(got, []string{"node.kv.stat"}) {
			t.Fatalf("methods = %v", got)
		}
	})
	t.Run("an execution context narrows kv away", func(t *testing.T) {
		h, _ := kvHost(t, []string{hostcalls.CapAll})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, perr := h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "i1", NodeID: "n1", Method: "node.kv.get",
			Args: json.RawMessage(`{}`), ExecutionContext: hosttest.Context(t, "i1", "hostinfo")})
		wantDomain(t, perr, protocol.CodeForbidden, protocol.DomainCapabilityDenied)
	})
}

// Modules load one by one: a set holding one good module and modules
// that fail each check serves the good one; each other is refused alone
// with a bounded reason, and its declared methods answer UNAVAILABLE
// module_refused.
func TestLoadSetRefusesModulesAlone(t *testing.T) {
	ctx := context.Background()
	tt := &testTable{release: make(chan struct{})}
	h, err := host.New(ctx, host.Config{CacheDir: hosttest.CacheDir(t), Ceiling: []string{hostcalls.CapAll},
		Tables: []hostcalls.Table{tt.table()}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	kvWasm := hosttest.Build(t, "host/testdata/kvmod")
	kvMan, err := host.Inspect(ctx, kvWasm)
	if err != nil {
		t.Fatal(err)
	}
	good := hosttest.Pin("kv", kvWasm)
	good.Methods = kvMan.Methods // as mkset pins it

	garbage := []byte("\x00asm\x01\x00\x00\x00 this is not a module")
	broken := hosttest.Pin("broken", garbage)
	broken.Methods = []moduleset.Method{{Name: "node.broken.run", Version: 1, Capability: "kv"}}

	// testmod's bytes, pinned with declarations it does not describe.
	tmWasm := hosttest.Build(t, "host/testdata/testmod")
	liar := hosttest.Pin("testmod", tmWasm)
	liar.Methods = []moduleset.Method{{Name: "test.ping", Version: 2, Capability: "hostinfo"}}

	// Pinned, but the bytes given are another module's.
	swapped := hosttest.Pin("swapped", garbage)
	swapped.Methods = []moduleset.Method{{Name: "node.swapped.run", Version: 1, Capability: "kv"}}

	m := moduleset.Manifest{Modules: []moduleset.Module{good, broken, liar, swapped}}
	st := h.LoadSet(ctx, m, map[string][]byte{"kv": kvWasm, "broken": garbage, "testmod": tmWasm, "swapped": kvWasm})
	want := []struct{ family, state, reason string }{
		{"kv", protocol.ModuleLoaded, ""},
		{"broken", protocol.ModuleRefused, host.ReasonCompileFailed + ":"},
		{"testmod", protocol.ModuleRefused, host.ReasonDeclarationMismatch + ":"},
		{"swapped", protocol.ModuleRefused, host.ReasonDigestMismatch + ":"},
	}
	if len(st) != len(want) {
		t.Fatalf("statuses = %+v", st)
	}
	for i, w := range want {
		s := st[i]
		if s.Family != w.family || s.State != w.state || s.SHA256 != m.Modules[i].SHA256 || s.Version != "test" ||
			(w.reason == "" && s.Reason != "") || !strings.HasPrefix(s.Reason, w.reason) || len(s.Reason) > host.MaxReasonBytes {
			t.Fatalf("status %d = %+v, want %+v", i, s, w)
		}
	}
	if !reflect.DeepEqual(h.ModuleStatuses(), st) {
		t.Fatalf("ModuleStatuses = %+v", h.ModuleStatuses())
	}
	if got := methodNames(h.Methods()); !reflect.DeepEqual(got, []string{"node.kv.get", "node.kv.put", "node.kv.stat"}) {
		t.Fatalf("methods = %v", got)
	}
	if _, perr := invokeH(h, "node.kv.get"); perr != nil {
		t.Fatalf("good module: %v", perr)
	}
	for _, method := range []string{"node.broken.run", "test.ping", "node.swapped.run"} {
		_, perr := invokeH(h, method)
		wantDomain(t, perr, protocol.CodeUnavailable, protocol.DomainModuleRefused)
		if d := perr.Details; d == nil || d.RetrySafe == nil || !*d.RetrySafe {
			t.Fatalf("%s: retrySafe not true: %+v", method, perr)
		}
	}
	if _, perr := invokeH(h, "node.never.declared"); perr == nil || perr.Code != protocol.CodeMethodNotFound {
		t.Fatalf("unknown method: %+v", perr)
	}
}

// The reported case: a kv family whose methods declare the module's own
// capability "kv" and use the store host calls. Under kv,read,write it
// works; under read,write (no kv) its methods are neither advertised nor
// run. The store calls need no capability (the module's own namespace is
// its bookkeeping, docs/POLICY.md "The module's own store"), so under kv
// alone both methods work.
func TestKVFamilyOnTheStore(t *testing.T) {
	ctx := context.Background()
	wasm := hosttest.Build(t, "host/testdata/storekv")
	newKV := func(t *testing.T, ceiling []string) *host.Host {
		st, err := store.New(store.Config{Path: filepath.Join(t.TempDir(), "store.db")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		h, err := host.New(ctx, host.Config{CacheDir: hosttest.CacheDir(t), Ceiling: ceiling, Tables: []hostcalls.Table{st.Table()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close(ctx) })
		if _, err := h.Load(ctx, hosttest.Pin("kv", wasm), wasm); err != nil {
			t.Fatal(err)
		}
		return h
	}
	call := func(h *host.Host, method, args string) (string, *protocol.Error) {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		out, perr := h.Invoke(cctx, protocol.InvokeRequest{InvokeID: "i1", NodeID: "n1", Method: method, Args: json.RawMessage(args)})
		return string(out), perr
	}
	t.Run("kv,read,write", func(t *testing.T) {
		h := newKV(t, []string{"kv", "read", "write"})
		if got := methodNames(h.Methods()); !reflect.DeepEqual(got, []string{"node.kv.get", "node.kv.put"}) {
			t.Fatalf("methods = %v", got)
		}
		if out, perr := call(h, "node.kv.put", `{"nodeId":"n1","key":"color","value":"green"}`); perr != nil || out != `{"stored":true}` {
			t.Fatalf("put: %s %v", out, perr)
		}
		if out, perr := call(h, "node.kv.get", `{"nodeId":"n1","key":"color"}`); perr != nil || out != `{"found":true,"value":"green","revision":2}` {
			t.Fatalf("get: %s %v", out, perr)
		}
	})
	t.Run("read,write", func(t *testing.T) {
		h := newKV(t, []string{"read", "write"})
		if got := h.Methods(); len(got) != 0 {
			t.Fatalf("methods = %v", got)
		}
		_, perr := call(h, "node.kv.get", `{"nodeId":"n1","key":"color"}`)
		wantDomain(t, perr, protocol.CodeForbidden, protocol.DomainCapabilityDenied)
	})
	t.Run("kv", func(t *testing.T) {
		h := newKV(t, []string{"kv"})
		if out, perr := call(h, "node.kv.get", `{"nodeId":"n1","key":"color"}`); perr != nil || out != `{"found":false,"value":null}` {
			t.Fatalf("get before a put: %s %v", out, perr)
		}
		if out, perr := call(h, "node.kv.put", `{"nodeId":"n1","key":"color","value":"green"}`); perr != nil || out != `{"stored":true}` {
			t.Fatalf("put: %s %v", out, perr)
		}
		if out, perr := call(h, "node.kv.get", `{"nodeId":"n1","key":"color"}`); perr != nil || out != `{"found":true,"value":"green","revision":2}` {
			t.Fatalf("get: %s %v", out, perr)
		}
	})
}

// A module built for ABI 1 (JSON envelopes) or 2 (JSON host-call
// results) is refused at load with a reason that names its version and
// says to rebuild it (docs/ABI.md, "Versions"); nothing of it runs.
func TestLoadRefusesABI1Module(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{CacheDir: hosttest.CacheDir(t), Ceiling: hostcalls.AllCapabilities})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	for _, v := range []string{"1", "2"} {
		wasm := hosttest.Build(t, "host/testdata/abi"+v+"mod")
		_, err = h.Load(ctx, hosttest.Pin("old", wasm), wasm)
		if !errors.Is(err, host.ErrModuleRejected) {
			t.Fatalf("ABI %s: Load = %v, want a refusal", v, err)
		}
		want := host.ReasonABIMismatch + ": module built for ABI " + v + "; rebuild with the current SDK (this node runs ABI 3)"
		if got := host.ReasonOf(err); got != want {
			t.Fatalf("reason = %q, want %q", got, want)
		}
		if _, ok := h.Methods()["old.ping"]; ok {
			t.Fatal("a refused module's method is served")
		}
	}
}
