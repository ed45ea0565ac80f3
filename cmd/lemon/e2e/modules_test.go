package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lemon/host/hosttest"
	"lemon/host/moduleset"
	"lemon/protocol"
)

// brokenHostinfoSet copies the built module set into a new directory and
// replaces hostinfo.wasm by its first half (it no longer compiles),
// re-pinning its sha256 and size so the controller accepts the set: the
// node is the one that refuses it. It returns the directory and the set.
func brokenHostinfoSet(t *testing.T) (string, moduleset.Manifest) {
	t.Helper()
	src := filepath.Join(hosttest.RepoRoot(), "host", "moduleset", "defaultset", "set")
	m, mods, err := moduleset.Load(os.DirFS(src))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "set")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for i, mod := range m.Modules {
		b := mods[mod.Family]
		if mod.Family == "hostinfo" {
			b = b[:len(b)/2]
			sum := sha256.Sum256(b)
			m.Modules[i].SHA256, m.Modules[i].Size = hex.EncodeToString(sum[:]), int64(len(b))
		}
		if err := os.WriteFile(filepath.Join(dir, mod.File), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mj, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, moduleset.ManifestFile), mj, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// A set holding good modules and one broken one, with the stock binary:
// the node refuses hostinfo alone and serves the rest (secrets is
// refused too, as hostcall_unavailable: this node has no vault key); node.describe,
// `lemon modules` and `lemon modules --json` show the refusal and its
// reason; node.host.info answers UNAVAILABLE module_refused.
func TestModuleSetWithBrokenModule(t *testing.T) {
	dir, m := brokenHostinfoSet(t)
	c := startClusterPolicy(t, "w1", fmt.Sprintf("module_set = %q\n", dir))
	machine := c.newMachine("w1", "")
	node, nodeID := c.join(machine)

	conn := dialOperator(t, c.url, c.opToken)
	var d protocol.NodeDescription
	ok := eventually(readyWait, func() bool { // the node fetches the pinned set and reconnects
		raw, perr := conn.Call(context.Background(), protocol.MethodNodeDescribe, protocol.NodeDescribeParams{NodeID: nodeID})
		d = protocol.NodeDescription{} // Unmarshal would merge into the last map
		return perr == nil && json.Unmarshal(raw, &d) == nil && d.Online && d.ModuleSetDigest == m.Digest()
	})
	if !ok {
		t.Fatalf("the node did not switch to the pinned set: %+v\n%s", d, node.output())
	}
	var hostinfo *protocol.ModuleStatus
	for i, st := range d.Modules {
		switch {
		case st.Family == "hostinfo":
			hostinfo = &d.Modules[i]
		case st.Family == "secrets":
			if st.State != protocol.ModuleRefused || !strings.HasPrefix(st.Reason, "hostcall_unavailable") {
				t.Fatalf("secrets without a vault key: %+v", st)
			}
		case st.State != protocol.ModuleLoaded || st.Reason != "":
			t.Fatalf("module %s: %+v", st.Family, st)
		}
	}
	if len(d.Modules) != len(m.Modules) || hostinfo == nil || hostinfo.State != protocol.ModuleRefused ||
		!strings.HasPrefix(hostinfo.Reason, "compile_failed") {
		t.Fatalf("describe modules = %+v", d.Modules)
	}
	if _, ok := d.Methods["node.host.info"]; ok {
		t.Fatalf("refused method advertised: %v\n%+v\n%s", d.Methods, d.Modules, node.output())
	}
	if _, ok := d.Methods["node.fs.stat"]; !ok {
		t.Fatalf("good module not advertised: %v", d.Methods)
	}

	// The good modules serve; the refused one answers module_refused.
	c.op.must(t, "node.fs.stat", map[string]any{"nodeId": nodeID, "path": machine.cwd})
	e := c.op.callError(t, "node.host.info", map[string]any{"nodeId": nodeID})
	if e.Code != protocol.CodeUnavailable || e.detail("code") != protocol.DomainModuleRefused ||
		!strings.Contains(e.Message, "compile_failed") {
		t.Fatalf("node.host.info: %+v", e)
	}

	environ := env(c.op.home, "LEMON_OPERATOR_TOKEN="+c.opToken)
	r := run(t, c.op.home, environ, nil, "modules", "--controller", c.url)
	if r.code != 0 {
		t.Fatalf("lemon modules: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"pinned set " + m.Digest(), "hostinfo", "refusals:", "compile_failed",
		"current (" + m.Digest()[:12] + ")", nodeID} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("lemon modules output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = run(t, c.op.home, environ, nil, "modules", "--json", "--controller", c.url)
	var flat struct {
		SetDigest string `json:"setDigest"`
		Modules   []struct {
			Family, SHA256 string
		} `json:"modules"`
		Nodes []struct {
			NodeID  string `json:"nodeId"`
			Current bool   `json:"current"`
			Refused int    `json:"refused"`
		} `json:"nodes"`
		Refusals []struct {
			NodeID string `json:"nodeId"`
			Family string `json:"family"`
			SHA256 string `json:"sha256"`
			Reason string `json:"reason"`
		} `json:"refusals"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &flat) != nil {
		t.Fatalf("lemon modules --json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	hm, _ := m.Find("hostinfo")
	if flat.SetDigest != m.Digest() || len(flat.Modules) != len(m.Modules) || len(flat.Nodes) != 1 ||
		!flat.Nodes[0].Current || flat.Nodes[0].Refused != 2 || len(flat.Refusals) != 2 {
		t.Fatalf("lemon modules --json: %s", r.stdout)
	}
	found := false
	for _, rf := range flat.Refusals {
		if rf.Family == "hostinfo" {
			found = rf.NodeID == nodeID && rf.SHA256 == hm.SHA256 && strings.HasPrefix(rf.Reason, "compile_failed")
		}
	}
	if !found {
		t.Fatalf("lemon modules --json lacks the hostinfo refusal: %s", r.stdout)
	}
	if r := run(t, c.op.home, environ, nil, "modules", "bogus"); r.code != 2 || !strings.Contains(r.stderr, "unknown subcommand") {
		t.Fatalf("lemon modules bogus: exit %d %s", r.code, r.stderr)
	}
	// The node kept serving throughout: no "module set not updated".
	if strings.Contains(node.output(), "module set not updated") {
		t.Fatalf("node log:\n%s", node.output())
	}
}

// A ceiling may name a module's own capability: `--capabilities kv,read`
// is accepted, the node advertises only the methods it allows (the read
// methods of fs, not node.fs.write nor node.host.info) and the
// controller refuses the others with FORBIDDEN capability_denied; a
// malformed name is refused at start.
func TestNodeCeilingOpenCapabilities(t *testing.T) {
	c := startCluster(t, "w1")
	machine := c.newMachine("w1", "")
	bad := run(t, machine.cwd, env(machine.home, "LEMON_NODE_TOKEN="+c.nodeToken), nil,
		"node", "join", "--controller", c.url, "--name", "w1", "--cwd", machine.cwd, "--state", machine.state,
		"--capabilities", "read,Bad!")
	if bad.code == 0 || !strings.Contains(bad.stderr, "malformed capability") {
		t.Fatalf("malformed capability: exit %d\n%s", bad.code, bad.stderr)
	}
	args := []string{"node", "join", "--controller", c.url, "--name", "w1", "--cwd", machine.cwd, "--state", machine.state,
		"--capabilities", "kv,read"}
	p := start(t, "lemon node join", machine.cwd, env(machine.home, "LEMON_NODE_TOKEN="+c.nodeToken), args...)
	conn := dialOperator(t, c.url, c.opToken)
	var d protocol.NodeDescription
	nodeID := ""
	ok := eventually(readyWait, func() bool {
		raw, perr := conn.Call(context.Background(), protocol.MethodNodeList, protocol.NodeListParams{})
		var l protocol.NodeListResult
		if perr != nil || json.Unmarshal(raw, &l) != nil || len(l.Nodes) != 1 || !l.Nodes[0].Online {
			return false
		}
		nodeID = l.Nodes[0].NodeID
		raw, perr = conn.Call(context.Background(), protocol.MethodNodeDescribe, protocol.NodeDescribeParams{NodeID: nodeID})
		d = protocol.NodeDescription{}
		return perr == nil && json.Unmarshal(raw, &d) == nil && len(d.Methods) > 0
	})
	if !ok {
		t.Fatalf("node did not come online:\n%s", p.output())
	}
	if strings.Join(d.Capabilities, ",") != "kv,read" {
		t.Fatalf("capabilities = %v", d.Capabilities)
	}
	for _, m := range []string{"node.fs.stat", "node.fs.list", "node.fs.read"} {
		if _, ok := d.Methods[m]; !ok {
			t.Fatalf("%s not advertised: %v", m, d.Methods)
		}
	}
	for _, m := range []string{"node.host.info", "node.fs.write", "node.process.run", "node.secrets.set"} {
		if _, ok := d.Methods[m]; ok {
			t.Fatalf("%s advertised under kv,read: %v", m, d.Methods)
		}
	}
	// The controller knows the pinned declaration (capability hostinfo)
	// and the node's ceiling: FORBIDDEN without a round trip.
	e := c.op.callError(t, "node.host.info", map[string]any{"nodeId": nodeID})
	if e.Code != protocol.CodeForbidden || e.detail("code") != protocol.DomainCapabilityDenied {
		t.Fatalf("node.host.info: %+v", e)
	}
	c.op.must(t, "node.fs.stat", map[string]any{"nodeId": nodeID, "path": machine.cwd})
}
