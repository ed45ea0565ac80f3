package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lemon/protocol"
)

// layerDirs makes base/home/work, base/srv and base/mnt (canonical) and a
// worker policy whose allowed_roots is [srv] and capabilities read, write.
func layerDirs(t *testing.T) (home, srv, mnt, policy string) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home, srv, mnt = filepath.Join(base, "home"), filepath.Join(base, "srv"), filepath.Join(base, "mnt")
	for _, d := range []string{filepath.Join(home, "work"), filepath.Join(srv, "a"), mnt} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	policy = filepath.Join(base, "worker.toml")
	text := "allowed_roots = [\"" + srv + "\"]\ncapabilities = [\"read\", \"write\"]\n"
	if err := os.WriteFile(policy, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return home, srv, mnt, policy
}

// TestPolicyCheckRefusesWideningLayer: `lemon policy check` takes the
// node's layers; one that widens the file is refused (exit 1) with a
// message naming the layer and the file key; narrowing layers print the
// effective policy.
func TestPolicyCheckRefusesWideningLayer(t *testing.T) {
	home, srv, mnt, policy := layerDirs(t)
	for _, c := range []struct {
		name  string
		extra []string
		args  []string
		want  []string
	}{
		{"root outside", nil, []string{"--allowed-root", mnt}, []string{"--allowed-root " + mnt, "allowed_roots"}},
		{"capability outside", nil, []string{"--capabilities", "read,exec"}, []string{"--capabilities", `"exec"`, "capabilities"}},
		{"env capability outside", []string{"LEMON_NODE_CAPABILITIES=secrets"}, nil, []string{"LEMON_NODE_CAPABILITIES", `"secrets"`, "capabilities"}},
		{"cwd outside", nil, []string{"--cwd", mnt}, []string{"--cwd " + mnt, "outside"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"policy", "check", "--worker", policy}, c.args...)
			r := run(t, home, env(home, c.extra...), nil, args...)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
		})
	}
	r := run(t, home, env(home, "LEMON_NODE_CAPABILITIES=read"), nil,
		"policy", "check", policy, "--allowed-root", filepath.Join(srv, "a"), "--cwd", filepath.Join(srv, "a"))
	if r.code != 0 {
		t.Fatalf("narrowing layers: exit %d\n%s", r.code, r.stderr)
	}
	for _, w := range []string{`allowed_roots = ["` + filepath.Join(srv, "a") + `"]`, `capabilities = ["read"]`} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("effective policy lacks %q:\n%s", w, r.stdout)
		}
	}
}

// TestNodeRefusesWideningRoot: `lemon node join` with an --allowed-root
// outside the policy file's allowed_roots does not start; the error names
// the flag and the file key.
func TestNodeRefusesWideningRoot(t *testing.T) {
	home, srv, mnt, policy := layerDirs(t)
	link := filepath.Join(srv, "link")
	if err := os.Symlink(mnt, link); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{mnt, link} {
		r := run(t, home, env(home, "LEMON_NODE_TOKEN=lnt_"+randHex(24)), nil,
			"node", "join", "--controller", "ws://127.0.0.1:1/ws", "--name", "w1", "--policy", policy,
			"--cwd", srv, "--allowed-root", root, "--state", filepath.Join(home, "state"))
		if r.code != 1 || !strings.Contains(r.stderr, "--allowed-root "+mnt) || !strings.Contains(r.stderr, "allowed_roots") {
			t.Fatalf("--allowed-root %s: exit %d\n%s", root, r.code, r.stderr)
		}
	}
}

// TestNodeEnvCapabilities: LEMON_NODE_CAPABILITIES narrows a node's
// ceiling like --capabilities: the node advertises only what it allows and
// the controller refuses the rest.
func TestNodeEnvCapabilities(t *testing.T) {
	c := startCluster(t, "w1")
	m := c.newMachine("w1", "")
	p := start(t, "lemon node join", m.cwd, env(m.home, "LEMON_NODE_TOKEN="+c.nodeToken, "LEMON_NODE_CAPABILITIES=hostinfo"),
		"node", "join", "--controller", c.url, "--name", "w1", "--cwd", m.cwd, "--state", m.state)
	var nodeID string
	if !eventually(readyWait, func() bool {
		l := c.op.must(t, protocol.MethodNodeList, map[string]any{})
		nodes, _ := l["nodes"].([]any)
		if len(nodes) != 1 {
			return false
		}
		n, _ := nodes[0].(map[string]any)
		nodeID, _ = n["nodeId"].(string)
		return n["online"] == true
	}) {
		t.Fatalf("node did not come online:\n%s", p.output())
	}
	d := describeUntil(t, c, nodeID, p, func(d protocol.NodeDescription) bool { return len(d.Methods) > 0 })
	if strings.Join(d.Capabilities, ",") != "hostinfo" {
		t.Fatalf("capabilities = %v", d.Capabilities)
	}
	c.op.must(t, "node.host.info", map[string]any{"nodeId": nodeID})
	e := c.op.callError(t, "node.fs.stat", map[string]any{"nodeId": nodeID, "path": m.cwd})
	if e.Code != protocol.CodeForbidden || e.detail("code") != protocol.DomainCapabilityDenied {
		t.Fatalf("node.fs.stat under hostinfo: %+v", e)
	}
	// A malformed environment value stops the node at start.
	r := run(t, m.cwd, env(m.home, "LEMON_NODE_TOKEN="+c.nodeToken, "LEMON_NODE_CAPABILITIES=Read"), nil,
		"node", "join", "--controller", c.url, "--name", "w2", "--cwd", m.cwd, "--state", m.state+"2")
	if r.code != 1 || !strings.Contains(r.stderr, "LEMON_NODE_CAPABILITIES") {
		t.Fatalf("malformed LEMON_NODE_CAPABILITIES: exit %d\n%s", r.code, r.stderr)
	}
}
