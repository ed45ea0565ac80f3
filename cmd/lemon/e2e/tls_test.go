package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"lemon/client"
)

var wssListeningRE = regexp.MustCompile(`listening on (wss://\S+/ws)`)

// TestTLSDevCAEndToEnd: `lemon tls dev` makes a CA and a certificate; a
// controller serves wss:// with it; a node pairs and serves through it
// with --ca-file; the CLI calls through it with --ca-file and with
// LEMON_CA_FILE. Without the CA the CLI says the certificate's authority
// is unknown and names --ca-file; ws:// against the TLS listener says to
// use wss:// (docs/DEPLOY.md, "wss in a minute").
func TestTLSDevCAEndToEnd(t *testing.T) {
	base := t.TempDir()
	tlsDir := filepath.Join(base, "tls")
	home := filepath.Join(base, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	r := run(t, home, env(home), nil, "tls", "dev", "--dir", tlsDir)
	caFile, cert, key := filepath.Join(tlsDir, "ca.pem"), filepath.Join(tlsDir, "server.pem"), filepath.Join(tlsDir, "server-key.pem")
	for _, want := range []string{"new CA in " + tlsDir, "--tls-cert " + cert + " --tls-key " + key, "--ca-file " + caFile,
		client.EnvCAFile + "=" + caFile} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("tls dev: exit %d, stdout lacks %q\n%s%s", r.code, want, r.stdout, r.stderr)
		}
	}
	caBefore, _ := os.ReadFile(caFile)
	if r = run(t, home, env(home), nil, "tls", "dev", "--dir", tlsDir); r.code != 0 || !strings.Contains(r.stdout, "kept the CA") {
		t.Fatalf("tls dev again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if caAfter, _ := os.ReadFile(caFile); string(caAfter) != string(caBefore) {
		t.Fatal("tls dev replaced the CA")
	}

	opToken := "lop_" + randHex(24)
	ctlHome := filepath.Join(base, "controller-home")
	os.MkdirAll(ctlHome, 0o700)
	ctl := start(t, "lemon controller", ctlHome, env(ctlHome, "LEMON_CONTROL_PLANE_OPERATOR_TOKEN="+opToken),
		"controller", "--listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key)
	url := ctl.waitFor(t, wssListeningRE, readyWait)[1]

	// The node pairs (an admin token pairs at once) and serves, over wss.
	nodeHome := filepath.Join(base, "node-home")
	cwd := filepath.Join(nodeHome, "work")
	os.MkdirAll(cwd, 0o700)
	state := newStateDir(t, filepath.Join(nodeHome, "state"))
	node := start(t, "lemon node join", cwd, env(nodeHome, "LEMON_NODE_OPERATOR_TOKEN="+opToken),
		"node", "join", "--pair", "--controller", url, "--name", "tls-node", "--cwd", cwd, "--state", state, "--ca-file", caFile)

	opHome := filepath.Join(base, "operator-home")
	os.MkdirAll(opHome, 0o700)
	opEnv := env(opHome, "LEMON_OPERATOR_TOKEN="+opToken)
	var nodeID string
	if !eventually(readyWait, func() bool {
		if node.exited() {
			return true
		}
		r := run(t, opHome, opEnv, nil, "nodes", "--controller", url, "--ca-file", caFile, "--json")
		var l struct {
			Nodes []struct {
				NodeID, Name string
				Online       bool
			}
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &l) != nil {
			return false
		}
		for _, n := range l.Nodes {
			if n.Name == "tls-node" && n.Online {
				nodeID = n.NodeID
				return true
			}
		}
		return false
	}) || nodeID == "" {
		t.Fatalf("the node did not come online over wss\n%s", node.output())
	}

	// The CLI with --ca-file, then with LEMON_CA_FILE.
	params := `{"nodeId":"` + nodeID + `"}`
	if r := run(t, opHome, opEnv, nil, "call", "--controller", url, "--ca-file", caFile, "node.host.info", params); r.code != 0 ||
		!strings.Contains(r.stdout, "lemonVersion") {
		t.Fatalf("call --ca-file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := run(t, opHome, append(opEnv, client.EnvCAFile+"="+caFile), nil, "call", "--controller", url, "node.host.info", params); r.code != 0 {
		t.Fatalf("call with %s: exit %d\n%s%s", client.EnvCAFile, r.code, r.stdout, r.stderr)
	}

	if r := run(t, opHome, opEnv, nil, "run", "--controller", url, "--ca-file", caFile, "-n", "tls-node", "--", "echo", "over-wss"); r.code != 0 ||
		r.stdout != "over-wss\n" {
		t.Fatalf("run --ca-file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Without the CA: the trust message, naming --ca-file; never the token.
	r = run(t, opHome, opEnv, nil, "call", "--controller", url, "node.list", "{}")
	if r.code != 1 || !strings.Contains(r.stderr, "TLS certificate signed by an unknown authority") ||
		!strings.Contains(r.stderr, "--ca-file") || strings.Contains(r.stderr, opToken) {
		t.Fatalf("call without the CA: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = run(t, opHome, opEnv, nil, "nodes", "--controller", url)
	if r.code != 1 || !strings.Contains(r.stderr, "unknown authority") {
		t.Fatalf("nodes without the CA: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// ws:// against the TLS listener.
	plain := "ws://" + strings.TrimPrefix(url, "wss://")
	r = run(t, opHome, opEnv, nil, "call", "--controller", plain, "--ca-file", caFile, "node.list", "{}")
	if r.code != 1 || !strings.Contains(r.stderr, "use wss:// instead of ws://") {
		t.Fatalf("ws:// against TLS: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if node.exited() {
		t.Fatalf("the node stopped\n%s", node.output())
	}
}
