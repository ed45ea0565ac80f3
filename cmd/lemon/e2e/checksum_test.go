package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"lemon/host/hosttest"
	"lemon/host/moduleset"
	"lemon/protocol"
)

// goBuildEnv is the environment `lemon plugin build` of a package inside
// this checkout needs, offline: the caller's build and module caches
// (which hold the checkout's dependencies), no proxy, no toolchain switch.
func goBuildEnv(t *testing.T, home string) []string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	v := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(v) != 2 {
		t.Fatalf("go env: %q", out)
	}
	return env(home, "GOCACHE="+v[0], "GOMODCACHE="+v[1], "GOPROXY=off", "GOSUMDB=off",
		"GOFLAGS=-mod=readonly", "GOTOOLCHAIN=local")
}

// describeUntil polls node.describe of nodeID until ok holds of it.
func describeUntil(t *testing.T, c *cluster, nodeID string, node *proc, ok func(protocol.NodeDescription) bool) protocol.NodeDescription {
	t.Helper()
	conn := dialOperator(t, c.url, c.opToken)
	defer conn.Close()
	var d protocol.NodeDescription
	if !eventually(readyWait, func() bool {
		raw, perr := conn.Call(context.Background(), protocol.MethodNodeDescribe, protocol.NodeDescribeParams{NodeID: nodeID})
		d = protocol.NodeDescription{} // Unmarshal would merge into the last maps
		return perr == nil && json.Unmarshal(raw, &d) == nil && ok(d)
	}) {
		t.Fatalf("node.describe %s never matched: %+v\n%s", nodeID, d, node.output())
	}
	return d
}

// hostIO counts the node's execution_node.host_io records of method and
// hostcall.
func hostIO(node *proc, method, hostcall string) int {
	n := 0
	for _, ev := range slogEvents(node.output(), "execution_node.host_io") {
		if ev["method"] == method && ev["hostcall"] == hostcall {
			n++
		}
	}
	return n
}

// TestChecksumExampleThroughController ships examples/checksum, a family
// built only from the SDK and kept outside the built-in set, with the
// stock binary and no binary rebuilt: plugin build --set into an exported
// built-in set, its conformance cases, a controller pinned to the set
// with an admin and a read-only operator, a node with the default
// ceiling and one whose ceiling lacks checksum. node.checksum.sha256
// answers Go's own sha256 and size through lemon call and node.invoke
// (one chunk, exactly 1 MiB, several chunks); params breaking its schema
// are refused by the controller with INVALID_PARAMS naming the field,
// before the node reads anything; the read-only token is refused; the
// second node neither advertises nor runs it.
func TestChecksumExampleThroughController(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	environ := goBuildEnv(t, home)
	step := func(args ...string) result {
		t.Helper()
		r := run(t, base, environ, nil, args...)
		if r.code != 0 {
			t.Fatalf("lemon %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return r
	}
	example := filepath.Join(hosttest.RepoRoot(), "examples", "checksum")
	set := filepath.Join(base, "set")
	wasm := filepath.Join(base, "checksum.wasm")
	step("modules", "export", set)
	if r := step("plugin", "build", example, "--set", set, "-o", wasm); strings.Contains(r.stderr, "warning") {
		t.Fatalf("plugin build warned:\n%s", r.stderr)
	}
	if r := step("plugin", "conformance", wasm, "--cases", filepath.Join(example, "conformance")); !strings.Contains(r.stdout, "conformance: 20 passed, 0 failed") {
		t.Fatalf("conformance:\n%s", r.stdout)
	}
	man, _, err := moduleset.Load(os.DirFS(set))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := man.Find("checksum"); !ok || len(man.Modules) != 5 {
		t.Fatalf("set manifest: %+v", man)
	}

	readToken, tok1, tok2 := "lop_"+randHex(24), "lnt_"+randHex(24), "lnt_"+randHex(24)
	policy := `[[operators]]
name = "reader"
token_env = "E2E_READ_TOKEN"
scopes = ["operator.read"]
[[node_tokens]]
name = "w1"
token_env = "E2E_NODE_TOKEN_1"
[[node_tokens]]
name = "w2"
token_env = "E2E_NODE_TOKEN_2"
`
	c := startClusterWith(t, policy, []string{"E2E_READ_TOKEN=" + readToken, "E2E_NODE_TOKEN_1=" + tok1,
		"E2E_NODE_TOKEN_2=" + tok2}, "--module-set", set)
	c.nodeTokens = map[string]string{"w1": tok1, "w2": tok2}
	reader := newOperator(t, c.url, readToken)

	m1 := c.newMachine("w1", "")
	files := map[string]string{} // name → Go's sha256
	// One chunk, exactly one full chunk (1 MiB), three chunks.
	sizes := map[string]int64{"small.txt": 13, "one-mib.bin": 1 << 20, "chunks.bin": 5<<19 + 7}
	for name, n := range sizes {
		p := filepath.Join(m1.cwd, name)
		if name == "small.txt" {
			if err := os.WriteFile(p, []byte("checksum e2e\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		} else {
			writeRandomFile(t, p, n)
		}
		files[name] = fileSHA256(t, p)
	}
	node1, id1 := c.join(m1)
	d := describeUntil(t, c, id1, node1, func(d protocol.NodeDescription) bool {
		return d.Online && d.ModuleSetDigest == man.Digest()
	})
	if fmt.Sprint(d.Methods["node.checksum.sha256"]) != "1" {
		t.Fatalf("w1 does not advertise node.checksum.sha256: %v\n%+v", d.Methods, d.Modules)
	}

	// Params that break the schema: refused by the controller naming the
	// field, and the node reads nothing (no fs.read of the method, not
	// even the one a 4,097-byte path would fail).
	for _, tc := range []struct {
		name   string
		params map[string]any
		field  string
	}{
		{"unknown field", map[string]any{"nodeId": id1, "path": "small.txt", "algorithm": "md5"}, "algorithm"},
		{"path one byte too long", map[string]any{"nodeId": id1, "path": strings.Repeat("p", protocol.FSMaxPathBytes+1)}, "path"},
		{"empty path", map[string]any{"nodeId": id1, "path": ""}, "path"},
		{"path missing", map[string]any{"nodeId": id1}, "path"},
		{"path of the wrong type", map[string]any{"nodeId": id1, "path": 7}, "path"},
	} {
		e := c.op.callError(t, "node.checksum.sha256", tc.params)
		if e.Code != protocol.CodeInvalidParams || e.detail("field") != tc.field || !strings.Contains(e.Message, "params."+tc.field) {
			t.Fatalf("%s: %+v", tc.name, e)
		}
		args := map[string]any{}
		for k, v := range tc.params {
			if k != "nodeId" {
				args[k] = v
			}
		}
		e = c.op.callError(t, protocol.MethodNodeInvoke, map[string]any{"nodeId": id1, "method": "node.checksum.sha256", "args": args})
		if e.Code != protocol.CodeInvalidParams || e.detail("field") != tc.field || !strings.Contains(e.Message, "params."+tc.field) {
			t.Fatalf("node.invoke, %s: %+v", tc.name, e)
		}
	}
	// A path of exactly 4,096 bytes passes the bound and reaches the
	// node: its fs.read answers not_found, passed through unchanged.
	e := c.op.callError(t, "node.checksum.sha256", map[string]any{"nodeId": id1, "path": strings.Repeat("x/", 2047) + "xx"})
	if e.Code != protocol.CodeNotFound || e.detail("code") != protocol.DomainNotFound {
		t.Fatalf("4096-byte path: %+v", e)
	}
	if !eventually(callWait, func() bool { return hostIO(node1, "node.checksum.sha256", "fs.read") >= 1 }) {
		t.Fatalf("no fs.read audited for the 4096-byte path:\n%s", node1.output())
	}
	if n := hostIO(node1, "node.checksum.sha256", "fs.read"); n != 1 {
		t.Fatalf("%d fs.read audited: a refused call reached the node\n%s", n, node1.output())
	}

	// The read-only operator may describe but not call the admin-declared
	// method, directly or through node.invoke.
	reader.must(t, protocol.MethodNodeDescribe, map[string]any{"nodeId": id1})
	for _, call := range []struct {
		method string
		params map[string]any
	}{
		{"node.checksum.sha256", map[string]any{"nodeId": id1, "path": "small.txt"}},
		{protocol.MethodNodeInvoke, map[string]any{"nodeId": id1, "method": "node.checksum.sha256", "args": map[string]any{"path": "small.txt"}}},
	} {
		if e := reader.callError(t, call.method, call.params); e.Code != protocol.CodeForbidden {
			t.Fatalf("read-only %s: %+v", call.method, e)
		}
	}

	// The digests, relative and absolute, directly and through node.invoke.
	for name, want := range files {
		for _, path := range []string{name, filepath.Join(m1.cwd, name)} {
			got := c.op.must(t, "node.checksum.sha256", map[string]any{"nodeId": id1, "path": path})
			wantExactly(t, "node.checksum.sha256 "+name, got, fmt.Sprintf(`{"sha256":%q,"size":%d}`, want, sizes[name]))
		}
		got := c.op.must(t, protocol.MethodNodeInvoke, map[string]any{"nodeId": id1, "method": "node.checksum.sha256",
			"args": map[string]any{"path": name}})
		wantExactly(t, "node.invoke node.checksum.sha256 "+name, got, fmt.Sprintf(`{"sha256":%q,"size":%d}`, want, sizes[name]))
	}
	// fs.read's errors pass through: a directory, a missing file, a path
	// outside the allowed roots.
	for _, tc := range []struct{ path, code, domain string }{
		{m1.cwd, protocol.CodeInvalidRequest, protocol.DomainNotRegularFile},
		{"missing.bin", protocol.CodeNotFound, protocol.DomainNotFound},
		{c.dir, protocol.CodeForbidden, protocol.DomainPathNotAllowed},
	} {
		e := c.op.callError(t, "node.checksum.sha256", map[string]any{"nodeId": id1, "path": tc.path})
		if e.Code != tc.code || e.detail("code") != tc.domain || strings.Contains(e.Message, tc.path) {
			t.Fatalf("path %s: %+v", tc.path, e)
		}
	}

	// A node whose ceiling lacks checksum: it serves the set (fs reads)
	// but neither advertises nor runs the method.
	m2 := c.newMachine("w2", "")
	m2.args = []string{"--capabilities", "read,hostinfo"}
	if err := os.WriteFile(filepath.Join(m2.cwd, "small.txt"), []byte("checksum e2e\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	node2, id2 := c.join(m2)
	d = describeUntil(t, c, id2, node2, func(d protocol.NodeDescription) bool {
		return d.Online && d.ModuleSetDigest == man.Digest()
	})
	if _, ok := d.Methods["node.checksum.sha256"]; ok || d.Methods["node.fs.read"] != 1 || strings.Join(d.Capabilities, ",") != "hostinfo,read" {
		t.Fatalf("w2 under read,hostinfo: capabilities %v, methods %v", d.Capabilities, d.Methods)
	}
	for _, st := range d.Modules {
		if st.Family == "checksum" && st.State != protocol.ModuleLoaded {
			t.Fatalf("w2 checksum module: %+v", st)
		}
	}
	e = c.op.callError(t, "node.checksum.sha256", map[string]any{"nodeId": id2, "path": "small.txt"})
	if e.Code != protocol.CodeForbidden || e.detail("code") != protocol.DomainCapabilityDenied {
		t.Fatalf("w2 node.checksum.sha256: %+v", e)
	}
	if n := hostIO(node2, "node.checksum.sha256", "fs.read"); n != 0 {
		t.Fatalf("w2 read for a refused call:\n%s", node2.output())
	}
	c.op.must(t, "node.fs.stat", map[string]any{"nodeId": id2, "path": "small.txt"})
}
