package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"lemon/host/moduleset"
	"lemon/protocol"
)

func ptrInt(n int) *int    { return &n }
func ptrBool(b bool) *bool { return &b }

// kvSchema is {nodeId, key (1..16 bytes)[, value]} without other fields.
func kvSchema(withValue bool) *protocol.Schema {
	props := map[string]*protocol.Schema{
		"nodeId": {Type: "string", MinLength: ptrInt(1), MaxLength: ptrInt(256)},
		"key":    {Type: "string", MinLength: ptrInt(1), MaxLength: ptrInt(16)},
	}
	req := []string{"nodeId", "key"}
	if withValue {
		props["value"] = &protocol.Schema{Type: "string", MaxLength: ptrInt(64)}
		req = append(req, "value")
	}
	return &protocol.Schema{Type: "object", AdditionalProperties: ptrBool(false), Required: req, Properties: props}
}

// kvMethods is a team's own family, declared in its module's manifest:
// get is an operator.read pure read, put an operator.write mutation, and
// delete an operator.admin mutation with a 1.5 s deadline.
func kvMethods() []moduleset.Method {
	return []moduleset.Method{
		{Name: "node.kv.get", Version: 1, Capability: "kv", Scope: protocol.ScopeRead, Retry: protocol.RetryRead, Params: kvSchema(false)},
		{Name: "node.kv.put", Version: 1, Capability: "kv", Scope: protocol.ScopeWrite, Retry: protocol.RetryMutation, Params: kvSchema(true)},
		{Name: "node.kv.delete", Version: 2, Capability: "kv", Scope: protocol.ScopeAdmin, DeadlineMs: 1500, Params: kvSchema(false)},
	}
}

func fakeModule(family string, methods []moduleset.Method, salt string) (moduleset.Module, []byte) {
	data := []byte("module " + family + salt)
	sum := sha256.Sum256(data)
	return moduleset.Module{Family: family, Version: "1.0.0", SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data)),
		File: family + ".wasm", Methods: methods}, data
}

func kvSet(t *testing.T, salt string, methods []moduleset.Method) (*ModuleSet, moduleset.Manifest) {
	t.Helper()
	mod, data := fakeModule("kv", methods, salt)
	m := moduleset.Manifest{Modules: []moduleset.Module{mod}}
	ms, err := NewModuleSet(m, map[string][]byte{"kv": data})
	if err != nil {
		t.Fatal(err)
	}
	return ms, m
}

func kvAdvertise() map[string]int {
	return map[string]int{"node.kv.get": 1, "node.kv.put": 1, "node.kv.delete": 2}
}

// A pinned set with a non-first-party module declaring node.kv.* routes
// its calls: directly and through node.invoke, params checked against the
// declared schema (INVALID_PARAMS naming the field, nothing dispatched),
// the declared scope enforced, the declared deadline sent to the node.
func TestDeclaredMethodRouting(t *testing.T) {
	cfg := testConfig()
	cfg.ModuleSet, _ = kvSet(t, "", kvMethods())
	s := startServer(t, cfg)
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{Methods: kvAdvertise()},
		func(req protocol.InvokeRequest) (any, *protocol.Error, bool) {
			return map[string]any{"method": req.Method, "args": req.Args}, nil, true
		})
	admin := connectOperator(t, s.url, adminToken)
	reader := connectOperator(t, s.url, readToken)
	node := nodeIDOf("worker-1")

	// A direct call routes.
	f := reader.call("node.kv.get", map[string]any{"nodeId": node, "key": "k1"})
	if !f.OK || !strings.Contains(string(f.Payload), `"node.kv.get"`) || !strings.Contains(string(f.Payload), `"k1"`) {
		t.Fatalf("node.kv.get: %s", f.raw)
	}
	if req := <-n.requests; req.Method != "node.kv.get" || req.TimeoutMs != protocol.DefaultTimeoutMs {
		t.Fatalf("dispatched %+v", req)
	}

	// Params breaking the schema: INVALID_PARAMS naming the field, and
	// no dispatch (the next request the node sees is the valid one).
	for _, c := range []struct {
		params any
		field  string
	}{
		{map[string]any{"nodeId": node, "key": strings.Repeat("k", 17)}, "key"},
		{map[string]any{"nodeId": node, "key": ""}, "key"},
		{map[string]any{"nodeId": node, "key": 5}, "key"},
		{map[string]any{"nodeId": node}, "key"},
		{map[string]any{"nodeId": node, "key": "k", "extra": true}, "extra"},
		{`{"nodeId":"` + node + `","key":"a","key":"b"}`, "key"},
		{map[string]any{"key": "k"}, "nodeId"},
	} {
		f := admin.call("node.kv.get", c.params)
		wantError(t, f, protocol.CodeInvalidParams, "")
		if f.Error.Details == nil || f.Error.Details.Field != c.field || !strings.Contains(f.Error.Message, "params."+c.field) {
			t.Fatalf("%v: want field %s, got %s", c.params, c.field, f.raw)
		}
	}
	// At the limit (16 bytes) the key passes.
	if f := admin.call("node.kv.get", map[string]any{"nodeId": node, "key": strings.Repeat("k", 16)}); !f.OK {
		t.Fatalf("16-byte key: %s", f.raw)
	}
	if req := <-n.requests; !strings.Contains(string(req.Args), strings.Repeat("k", 16)) {
		t.Fatalf("a refused call was dispatched: %s", req.Args)
	}

	// Declared scopes: read may get but not put (write) or delete (admin).
	wantError(t, reader.call("node.kv.put", map[string]any{"nodeId": node, "key": "k", "value": "v"}), protocol.CodeForbidden, "")
	f = reader.call("node.kv.delete", map[string]any{"nodeId": node, "key": "k"})
	wantError(t, f, protocol.CodeForbidden, "")
	if !strings.Contains(f.Error.Message, protocol.ScopeAdmin) {
		t.Fatalf("scope not named: %s", f.raw)
	}
	// Declared deadline and version.
	if f := admin.call("node.kv.delete", map[string]any{"nodeId": node, "key": "k"}); !f.OK {
		t.Fatalf("delete: %s", f.raw)
	}
	if req := <-n.requests; req.Method != "node.kv.delete" || req.TimeoutMs != 1500 {
		t.Fatalf("delete dispatched with %+v", req)
	}

	// node.invoke routes the same declarations.
	f = admin.call(protocol.MethodNodeInvoke, map[string]any{"nodeId": node, "method": "node.kv.put",
		"args": map[string]any{"key": "k", "value": "v"}})
	if !f.OK || !strings.Contains(string(f.Payload), `"node.kv.put"`) {
		t.Fatalf("node.invoke node.kv.put: %s", f.raw)
	}
	<-n.requests
	f = admin.call(protocol.MethodNodeInvoke, map[string]any{"nodeId": node, "method": "node.kv.put",
		"args": map[string]any{"key": "k", "value": strings.Repeat("v", 65)}})
	wantError(t, f, protocol.CodeInvalidParams, "")
	if f.Error.Details.Field != "value" {
		t.Fatalf("node.invoke field: %s", f.raw)
	}
	// node.invoke needs operator.admin and then the inner method's scope.
	wantError(t, reader.call(protocol.MethodNodeInvoke, map[string]any{"nodeId": node, "method": "node.kv.get",
		"args": map[string]any{"key": "k"}}), protocol.CodeForbidden, "")

	// Only what the set declares routes: first-party methods the set
	// lacks are unknown, as is anything else.
	wantError(t, admin.call("node.host.info", map[string]any{"nodeId": node}), protocol.CodeMethodNotFound, "")
	wantError(t, admin.call("node.kv.scan", map[string]any{"nodeId": node}), protocol.CodeMethodNotFound, "")
	f = admin.call(protocol.MethodNodeInvoke, map[string]any{"nodeId": node, "method": "node.kv.scan"})
	wantError(t, f, protocol.CodeInvalidParams, "")

	// hello-ok lists the declared methods for operators.
	if !containsStr(reader.call(protocol.MethodNodeList, nil).raw, "nodes") {
		t.Fatal("node.list")
	}
}

func containsStr(b []byte, s string) bool { return strings.Contains(string(b), s) }

// The retry class comes from the declaration: a disconnect during a
// declared pure read is retry-safe, during a declared mutation it may have
// applied.
func TestDeclaredRetryClass(t *testing.T) {
	cfg := testConfig()
	cfg.ModuleSet, _ = kvSet(t, "", kvMethods())
	s := startServer(t, cfg)
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{Methods: kvAdvertise()}, silentHandler)
	admin := connectOperator(t, s.url, adminToken)
	node := nodeIDOf("worker-1")
	get := admin.start("node.kv.get", map[string]any{"nodeId": node, "key": "k"})
	put := admin.start("node.kv.put", map[string]any{"nodeId": node, "key": "k", "value": "v"})
	<-n.requests
	<-n.requests
	n.ws.Close()
	f := admin.await(get)
	wantError(t, f, protocol.CodeUnavailable, protocol.DomainNodeDisconnected)
	wantRetry(t, f, true, false)
	f = admin.await(put)
	wantError(t, f, protocol.CodeUnavailable, protocol.DomainNodeDisconnected)
	wantRetry(t, f, false, true)
}

func TestModuleSetRefusesBadDeclarations(t *testing.T) {
	good := kvMethods()
	fsRead := moduleset.Method{Name: "node.fs.read", Version: 1, Capability: "read", Scope: protocol.ScopeAdmin, Retry: protocol.RetryRead}
	cases := []struct {
		name string
		mods map[string][]moduleset.Method
		want []string // substrings of the error
	}{
		{"two modules claim one method", map[string][]moduleset.Method{"kv": good, "fs": {fsRead, {Name: "node.kv.get", Version: 1, Capability: "read"}}},
			[]string{"node.kv.get"}},
		{"non-first-party declares a first-party method", map[string][]moduleset.Method{"kv": append(good[:1:1], fsRead)},
			[]string{"module kv", "node.fs.read", "first-party family fs"}},
		{"non-first-party declares node.host.info", map[string][]moduleset.Method{"kv": {{Name: "node.host.info", Version: 1, Capability: "kv", Scope: protocol.ScopeRead, Retry: protocol.RetryRead}}},
			[]string{"module kv", "node.host.info", "hostinfo"}},
		{"outside its namespace", map[string][]moduleset.Method{"kv": {{Name: "node.store.get", Version: 1, Capability: "kv"}}},
			[]string{"module kv", "node.store.get", "node.kv.*"}},
		{"family is a first-party namespace", map[string][]moduleset.Method{"host": {{Name: "node.host.extra", Version: 1, Capability: "x"}}},
			[]string{"module host", "first-party"}},
		{"family is a reserved namespace", map[string][]moduleset.Method{"pair": {{Name: "node.pair.steal", Version: 1, Capability: "x"}}},
			[]string{"module pair", "reserved"}},
		{"first-party outside its namespace", map[string][]moduleset.Method{"fs": {{Name: "node.kv.get", Version: 1, Capability: "read"}}},
			[]string{"module fs", "node.kv.get", "node.fs.*"}},
		{"first-party disagrees with protocol scope", map[string][]moduleset.Method{"fs": {{Name: "node.fs.read", Version: 1, Capability: "read", Scope: protocol.ScopeRead, Retry: protocol.RetryRead}}},
			[]string{"module fs", "node.fs.read", "scope"}},
		{"first-party disagrees with protocol version", map[string][]moduleset.Method{"fs": {{Name: "node.fs.read", Version: 2, Capability: "read", Scope: protocol.ScopeAdmin, Retry: protocol.RetryRead}}},
			[]string{"node.fs.read", "version"}},
		{"first-party disagrees with protocol retry", map[string][]moduleset.Method{"fs": {{Name: "node.fs.read", Version: 1, Capability: "read", Scope: protocol.ScopeAdmin}}},
			[]string{"node.fs.read", "retry"}},
		{"bad scope", map[string][]moduleset.Method{"kv": {{Name: "node.kv.get", Version: 1, Capability: "kv", Scope: protocol.ScopePairing}}},
			[]string{"module kv", "node.kv.get", "scope"}},
		{"bad schema", map[string][]moduleset.Method{"kv": {{Name: "node.kv.get", Version: 1, Capability: "kv",
			Params: &protocol.Schema{Type: "object", Required: []string{"nodeId", "key"}, Properties: map[string]*protocol.Schema{"nodeId": {Type: "string"}}}}}},
			[]string{"module kv", "node.kv.get", "required key"}},
		{"schema without nodeId", map[string][]moduleset.Method{"kv": {{Name: "node.kv.get", Version: 1, Capability: "kv",
			Params: &protocol.Schema{Type: "object"}}}},
			[]string{"node.kv.get", "nodeId"}},
		{"version 0", map[string][]moduleset.Method{"kv": {{Name: "node.kv.get", Version: 0, Capability: "kv"}}},
			[]string{"node.kv.get", "version"}},
		{"deadline past the bound", map[string][]moduleset.Method{"kv": {{Name: "node.kv.get", Version: 1, Capability: "kv", DeadlineMs: protocol.MaxDeclaredDeadlineMs + 1}}},
			[]string{"node.kv.get", "deadlineMs"}},
		{"new fs method below admin", map[string][]moduleset.Method{"fs": {fsRead, {Name: "node.fs.slurp", Version: 1, Capability: "read", Scope: protocol.ScopeRead, Retry: protocol.RetryRead}}},
			[]string{"module fs", "node.fs.slurp", "operator.admin"}},
		{"new secrets method below admin", map[string][]moduleset.Method{"secrets": {{Name: "node.secrets.peek", Version: 1, Capability: "secrets", Scope: protocol.ScopeWrite}}},
			[]string{"module secrets", "node.secrets.peek", "operator.admin"}},
		{"family not a plain name", map[string][]moduleset.Method{"a/b": {{Name: "node.kv.get", Version: 1, Capability: "kv"}}},
			[]string{"family"}},
		{"family with a control character", map[string][]moduleset.Method{"x\x1b": {{Name: "node.kv.get", Version: 1, Capability: "kv"}}},
			[]string{"family"}},
		{"uses all", map[string][]moduleset.Method{"kv": {{Name: "node.kv.get", Version: 1, Capability: "kv", Uses: []string{"all"}}}},
			[]string{"node.kv.get", "uses: a malformed capability"}},
		{"uses its own capability", map[string][]moduleset.Method{"kv": {{Name: "node.kv.get", Version: 1, Capability: "kv", Uses: []string{"kv"}}}},
			[]string{"node.kv.get", "uses: a capability given twice"}},
		{"uses one past its bound", map[string][]moduleset.Method{"kv": {{Name: "node.kv.get", Version: 1, Capability: "kv",
			Uses: []string{"a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9", "b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8"}}}},
			[]string{"node.kv.get", "uses: at most 16"}},
	}
	for _, c := range cases {
		var m moduleset.Manifest
		bytes := map[string][]byte{}
		fams := make([]string, 0, len(c.mods))
		for fam := range c.mods {
			fams = append(fams, fam)
		}
		sort.Strings(fams)
		for _, fam := range fams {
			methods, ok := c.mods[fam]
			if !ok {
				continue
			}
			mod, data := fakeModule(fam, methods, "")
			m.Modules = append(m.Modules, mod)
			bytes[fam] = data
		}
		_, err := NewModuleSet(m, bytes)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", c.name, err, w)
			}
		}
	}
	// The deadline bound itself passes.
	ok := []moduleset.Method{{Name: "node.kv.get", Version: 1, Capability: "kv", DeadlineMs: protocol.MaxDeclaredDeadlineMs}}
	mod, data := fakeModule("kv", ok, "")
	if _, err := NewModuleSet(moduleset.Manifest{Modules: []moduleset.Module{mod}}, map[string][]byte{"kv": data}); err != nil {
		t.Fatal(err)
	}
}

// A manifest.json declaring a schema keyword outside the subset, an
// unknown declaration field or a repeated key is refused when loaded.
func TestLoadModuleSetStrictDeclarations(t *testing.T) {
	mod, data := fakeModule("kv", kvMethods(), "")
	good, err := json.Marshal(moduleset.Manifest{Modules: []moduleset.Module{mod}})
	if err != nil {
		t.Fatal(err)
	}
	write := func(manifest string) string {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, moduleset.ManifestFile), []byte(manifest), 0o600)
		os.WriteFile(filepath.Join(dir, "kv.wasm"), data, 0o600)
		return dir
	}
	if _, err := LoadModuleSetDir(write(string(good))); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ from, to, want string }{
		"unknown schema keyword": {`"maxLength":16`, `"maxLength":16,"format":"email"`, "format"},
		"unknown field":          {`"name":"node.kv.get"`, `"name":"node.kv.get","idempotent":true`, "idempotent"},
		"repeated key":           {`"name":"node.kv.get"`, `"name":"node.kv.get","name":"node.kv.get"`, "twice"},
	} {
		bad := strings.Replace(string(good), c.from, c.to, 1)
		if bad == string(good) {
			t.Fatalf("%s: no replacement", name)
		}
		_, err := LoadModuleSetDir(write(bad))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Re-pinning swaps the routes at once, tells every connected node the new
// digest, and leaves calls already in flight to complete.
func TestSetModuleSetRepins(t *testing.T) {
	cfg := testConfig()
	old, oldM := kvSet(t, "", kvMethods())
	cfg.ModuleSet = old
	s := startServer(t, cfg)
	release := make(chan struct{})
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{Methods: kvAdvertise()},
		func(req protocol.InvokeRequest) (any, *protocol.Error, bool) {
			<-release
			return map[string]any{"ok": req.Method}, nil, true
		})
	admin := connectOperator(t, s.url, adminToken)
	node := nodeIDOf("worker-1")
	inflight := admin.start("node.kv.put", map[string]any{"nodeId": node, "key": "k", "value": "v"})
	<-n.requests

	// The new set drops put and adds list.
	methods := append(kvMethods()[:1:1], moduleset.Method{Name: "node.kv.list", Version: 1, Capability: "kv",
		Scope: protocol.ScopeRead, Retry: protocol.RetryRead})
	next, nextM := kvSet(t, "v2", methods)
	if nextM.Digest() == oldM.Digest() {
		t.Fatal("digests equal")
	}
	if err := s.SetModuleSet(next); err != nil {
		t.Fatal(err)
	}
	if err := s.SetModuleSet(nil); err == nil {
		t.Fatal("nil set accepted")
	}
	var ev frame
	select {
	case ev = <-n.other:
	case <-timeAfter():
		t.Fatal("node not told of the re-pin")
	}
	var ref protocol.ModuleSetRef
	if ev.Event != protocol.EventModulesChanged || json.Unmarshal(ev.Payload, &ref) != nil || ref.Digest != nextM.Digest() {
		t.Fatalf("event: %s", ev.raw)
	}
	// The manifest served is the new one.
	f := n.call(protocol.MethodModulesManifest, nil)
	var mr protocol.ModulesManifestResult
	if json.Unmarshal(f.Payload, &mr) != nil || mr.Digest != nextM.Digest() {
		t.Fatalf("manifest: %s", f.raw)
	}
	// New calls route by the new declarations.
	wantError(t, admin.call("node.kv.put", map[string]any{"nodeId": node, "key": "k", "value": "v"}), protocol.CodeMethodNotFound, "")
	// The node still advertises the old methods until it reconnects.
	wantError(t, admin.call("node.kv.list", map[string]any{"nodeId": node}), protocol.CodeUnavailable, protocol.DomainNodeMethodUnavailable)
	// The call in flight during the re-pin completes.
	close(release)
	if f := admin.await(inflight); !f.OK || !strings.Contains(string(f.Payload), "node.kv.put") {
		t.Fatalf("in-flight call: %s", f.raw)
	}
	// A node connecting now is told the new digest in hello-ok.
	n2 := connectNode(t, s.url, node2Token, protocol.NodeAdvertise{Methods: map[string]int{"node.kv.list": 1}}, echoHandler)
	if n2.hello.Module == nil || n2.hello.Module.Digest != nextM.Digest() {
		t.Fatalf("hello-ok: %s", n2.hello.raw)
	}
	if f := admin.call("node.kv.list", map[string]any{"nodeId": nodeIDOf("worker-2")}); !f.OK {
		t.Fatalf("list: %s", f.raw)
	}
}
