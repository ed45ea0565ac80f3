//go:build !wasip1

package plugins_test

import (
	"encoding/json"
	"io/fs"
	"sort"
	"strings"
	"testing"
	"time"

	"lemon/controller"
	"lemon/host/conformance"
	"lemon/host/moduleset"
	"lemon/host/moduleset/defaultset"
	"lemon/plugins"
	"lemon/protocol"
)

// The first-party declarations, as the built set carries them (mkset
// copies each module's lemon_describe), must agree with protocol: every
// method protocol registers is declared by exactly one first-party module
// at protocol's version, scope and retry class, with a deadline no shorter
// than protocol's broker deadline, and a params schema that accepts
// everything protocol's validator accepts. Rebuild the set (./build.sh)
// after editing plugins/<family>/manifest.go.
func firstPartyManifest(t *testing.T) moduleset.Manifest {
	t.Helper()
	m, b, err := defaultset.Load()
	if err != nil {
		t.Fatalf("default set: %v", err)
	}
	// The controller accepts the set: namespaces, duplicates and the
	// protocol cross-checks of buildMethodTable.
	if _, err := controller.NewModuleSet(m, b); err != nil {
		t.Fatalf("the controller refuses the built-in set: %v", err)
	}
	raw, err := fs.ReadFile(defaultset.FS(), moduleset.ManifestFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := controller.CheckManifestDeclarations(raw); err != nil {
		t.Fatal(err)
	}
	return m
}

func declared(t *testing.T) map[string]moduleset.Method {
	m := firstPartyManifest(t)
	out := map[string]moduleset.Method{}
	var fams []string
	for _, mod := range m.Modules {
		fams = append(fams, mod.Family)
		if _, ok := controller.FirstPartyFamilies[mod.Family]; !ok {
			t.Errorf("built-in module %s is not in controller.FirstPartyFamilies", mod.Family)
		}
		for _, ms := range mod.Methods {
			if _, dup := out[ms.Name]; dup {
				t.Errorf("%s declared twice", ms.Name)
			}
			out[ms.Name] = ms
		}
	}
	if len(fams) != len(controller.FirstPartyFamilies) {
		sort.Strings(fams)
		t.Errorf("built-in families %v, first-party list has %d", fams, len(controller.FirstPartyFamilies))
	}
	return out
}

func TestFirstPartyDeclarationsAgreeWithProtocol(t *testing.T) {
	decl := declared(t)
	for _, name := range protocol.MethodNames() {
		spec, _ := protocol.LookupMethod(name)
		d, ok := decl[name]
		if !ok {
			t.Errorf("%s: registered in protocol but declared by no first-party module", name)
			continue
		}
		if err := protocol.CheckMethodDeclaration(d.Name, d.Version, d.Scope, d.Retry, d.Params, d.DeadlineMs); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if d.Version != spec.Version {
			t.Errorf("%s: declared version %d, protocol %d", name, d.Version, spec.Version)
		}
		want, ok := protocol.RequiredScope(name)
		if !ok || d.Scope != want {
			t.Errorf("%s: declared scope %q, protocol %q", name, d.Scope, want)
		}
		if (d.Retry == protocol.RetryRead) != protocol.PureRead(name) {
			t.Errorf("%s: declared retry %q, protocol pure read %v", name, d.Retry, protocol.PureRead(name))
		}
		if d.Retry == "" {
			t.Errorf("%s: no retry class declared", name)
		}
		if d.Params == nil {
			t.Errorf("%s: no params schema declared", name)
		}
		if d.DeadlineMs == 0 {
			t.Errorf("%s: no deadline declared", name)
		}
		if spec.Deadline == nil && time.Duration(d.DeadlineMs)*time.Millisecond != spec.BrokerDeadline(nil) {
			t.Errorf("%s: declared deadline %d ms, protocol %v", name, d.DeadlineMs, spec.BrokerDeadline(nil))
		}
	}
	for name := range decl {
		if _, ok := protocol.LookupMethod(name); !ok {
			t.Errorf("%s: a first-party method protocol does not register", name)
		}
	}
}

// seeds are params protocol's validators accept (or nearly: mutations
// of them reach both sides of each limit).
var seeds = []string{
	`{"nodeId":"n"}`,
	`{"nodeId":"n","path":"a/b"}`,
	`{"nodeId":"n","path":"a","showHidden":true}`,
	`{"nodeId":"n","path":"a/b","offset":0,"length":10}`,
	`{"nodeId":"n","path":"a","dataBase64":"QQ==","offset":3,"truncate":false,"mkdirs":true,"expectedModifiedAtMs":5}`,
	`{"nodeId":"n","path":"a","dataBase64":""}`,
	`{"nodeId":"n","path":"a","destination":"b","expectedModifiedAtMs":0,"overwrite":true}`,
	`{"nodeId":"n","path":"a","recursive":true}`,
	`{"nodeId":"n","path":"a","confirm":"a","confirmationToken":"t"}`,
	`{"nodeId":"n","processId":"p:1-x_y","cwd":".","argv":["echo","hi"],"stdinBase64":"","timeoutMs":1000,"maxOutputBytes":1}`,
	`{"nodeId":"n","processId":"p","cwd":"/","argv":["/bin/true"],"stdinBase64":"SGVsbG8K","timeoutMs":1800000,"maxOutputBytes":1048576}`,
	`{"nodeId":"n","processId":"p"}`,
	`{"nodeId":"n","name":"a","value":"v"}`,
	`{"nodeId":"n","name":" a ","value":"","operationId":"op-1"}`,
	`{"nodeId":"n","name":"lemon_bot/invocations/r1","value":"v","operationId":"r1"}`,
	`{"nodeId":"n","name":"a"}`,
	`{"nodeId":"n","operationId":"op_1"}`,
	`{"nodeId":"n","path":"a","transferKey":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","offset":3,"prefixSha256":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}`,
	`{"nodeId":"n","path":"a/b","transferKey":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","tree":true}`,
	`{"nodeId":"n","path":"a","transferKey":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","size":5,"mode":420,"mtimeMs":1,"overwrite":true,"mkdirs":true,"resume":true}`,
	`{"nodeId":"n","path":"a","transferKey":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","tree":true,"overwrite":false}`,
}

// alternatives replace one field's value in a mutation: both sides of
// every limit the first-party families have, and wrong types.
func alternatives() []string {
	s := func(n int) string { b, _ := json.Marshal(strings.Repeat("a", n)); return string(b) }
	out := []string{`"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"`, `"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"`, `4095`, `4096`, `null`, `""`, `" "`, `"a"`, `"a/b"`, `"/x"`, `"a\u0000b"`, `"\u00e9"`, `"QQ=="`, `"QQ"`, `"p:1"`, `"p 1"`,
		`0`, `-0`, `-1`, `1`, `999`, `1000`, `1.5`, `1e3`, `1.0`, `1800000`, `1800001`, `1048576`, `1048577`,
		`9007199254740991`, `9007199254740992`, `true`, `false`, `[]`, `["a"]`, `[""]`, `["/bin/x","y"]`, `[1]`, `{}`, `{"a":1}`}
	for _, n := range []int{127, 128, 129, 255, 256, 257, 4095, 4096, 4097} {
		out = append(out, s(n))
	}
	return out
}

func mutations(base string) []string {
	var fields map[string]json.RawMessage
	if json.Unmarshal([]byte(base), &fields) != nil {
		return nil
	}
	out := []string{base}
	put := func(f map[string]json.RawMessage) {
		b, _ := json.Marshal(f)
		out = append(out, string(b))
	}
	for k := range fields {
		for _, alt := range alternatives() {
			f := map[string]json.RawMessage{}
			for k2, v := range fields {
				f[k2] = v
			}
			f[k] = json.RawMessage(alt)
			put(f)
		}
		f := map[string]json.RawMessage{}
		for k2, v := range fields {
			if k2 != k {
				f[k2] = v
			}
		}
		put(f)
	}
	extra := map[string]json.RawMessage{"unknownField": json.RawMessage(`1`)}
	for k, v := range fields {
		extra[k] = v
	}
	put(extra)
	return out
}

// conformanceParams are the params of every step of every first-party
// conformance case, with placeholders filled in.
func conformanceParams(t *testing.T) []string {
	var out []string
	for fam := range controller.FirstPartyFamilies {
		sub := plugins.Conformance(fam)
		if sub == nil {
			continue
		}
		files, err := conformance.LoadFS(sub)
		if err != nil {
			t.Fatalf("%s conformance: %v", fam, err)
		}
		for _, f := range files {
			for _, c := range f.Cases {
				for _, st := range append([]conformance.Step{c.Step}, c.Then...) {
					p := strings.NewReplacer("${TMP}", "/tmp/x", "${NODE}", "n1").Replace(string(st.Params))
					out = append(out, p)
				}
			}
		}
	}
	return out
}

func TestFirstPartySchemasAcceptWhatProtocolAccepts(t *testing.T) {
	decl := declared(t)
	var vectors []string
	for _, s := range seeds {
		vectors = append(vectors, mutations(s)...)
	}
	cp := conformanceParams(t)
	if len(cp) < 20 {
		t.Fatalf("only %d conformance params found", len(cp))
	}
	// Conformance params as they are; mutations of the seeds reach both
	// sides of every limit.
	vectors = append(vectors, cp...)
	seen := map[string]bool{}
	uniq := vectors[:0]
	for _, v := range vectors {
		if !seen[v] {
			seen[v] = true
			uniq = append(uniq, v)
		}
	}
	vectors = uniq
	accepted := map[string]int{}
	for _, name := range protocol.MethodNames() {
		spec, _ := protocol.LookupMethod(name)
		d := decl[name]
		if spec.Validate == nil || d.Params == nil {
			continue
		}
		for _, v := range vectors {
			if spec.Validate(json.RawMessage(v)) != nil {
				continue
			}
			accepted[name]++
			if e := d.Params.Validate(json.RawMessage(v)); e != nil {
				t.Errorf("%s: protocol accepts %s but the declared schema refuses it: %s", name, v, e.Message)
			}
			if spec.Deadline != nil && spec.BrokerDeadline(json.RawMessage(v)) > time.Duration(d.DeadlineMs)*time.Millisecond {
				t.Errorf("%s: broker deadline %v exceeds the declared %d ms", name, spec.BrokerDeadline(json.RawMessage(v)), d.DeadlineMs)
			}
		}
	}
	// Each method met accepted vectors, so the check above is not empty.
	for _, name := range protocol.MethodNames() {
		if accepted[name] < 5 {
			t.Errorf("%s: only %d accepted vectors", name, accepted[name])
		}
	}
}

// The schemas are not vacuous: each refuses params that break its
// declared bounds, with the field named.
func TestFirstPartySchemasRefuse(t *testing.T) {
	decl := declared(t)
	long := func(n int) string { return strings.Repeat("a", n) }
	for _, c := range []struct{ method, params, field string }{
		{"node.host.info", `{}`, "nodeId"},
		{"node.host.info", `{"nodeId":"n","x":1}`, "x"},
		{"node.fs.read", `{"nodeId":"n","path":"a","length":1048577}`, "length"},
		{"node.fs.stat", `{"nodeId":"n","path":"` + long(4097) + `"}`, "path"},
		{"node.process.run", `{"nodeId":"n","processId":"p","cwd":".","argv":["x"],"stdinBase64":"","timeoutMs":999,"maxOutputBytes":1}`, "timeoutMs"},
		{"node.process.get", `{"nodeId":"n","processId":"a b"}`, "processId"},
		{"node.secrets.set", `{"nodeId":"n","name":"` + long(257) + `","value":"v"}`, "name"},
	} {
		e := decl[c.method].Params.Validate(json.RawMessage(c.params))
		if e == nil || e.Details == nil || e.Details.Field != c.field {
			t.Errorf("%s %s: got %v, want field %s", c.method, c.params, e, c.field)
		}
	}
}
