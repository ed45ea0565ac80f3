package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"lemon/client"
)

// devNode is one running `lemon dev`: a controller and one node.
type devNode struct {
	p                                 *proc
	url, nodeID, token                string
	home, cwd, state                  string
	op                                *operator
	controllerAddr, nodeName, started string
}

var devReadyRE = regexp.MustCompile(`lemon dev: controller on (ws://(\S+)/ws), node "([^"]*)" \(nodeId (node-[0-9a-f]+)\) serving (\S+)\n`)

// startDev runs `lemon dev --listen 127.0.0.1:0 EXTRA...` in a fresh HOME under
// base whose cwd is HOME/work, with the operator token in
// LEMON_CONTROL_PLANE_OPERATOR_TOKEN (so dev never prints it), and waits
// until the node is connected. t's cleanup stops it.
func startDev(t tb, base string, extra ...string) *devNode {
	t.Helper()
	d, err := launchDev(base, extra...)
	if d != nil {
		t.Cleanup(d.p.kill)
	}
	if err != nil {
		t.Fatalf("%v", err)
	}
	d.op = newOperator(t, d.url, d.token)
	return d
}

// launchDev is startDev without a test: the caller stops d.p.
func launchDev(base string, extra ...string) (*devNode, error) {
	d := &devNode{home: filepath.Join(base, "home"), token: "lop_" + randHex(24)}
	d.cwd = filepath.Join(d.home, "work")
	d.state = filepath.Join(d.home, "state")
	for _, dir := range []string{d.cwd, d.state} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	if err := os.Symlink(wazeroCache, filepath.Join(d.state, "wazero-cache")); err != nil {
		return nil, err
	}
	p, err := launch("lemon dev", d.cwd, env(d.home, "LEMON_CONTROL_PLANE_OPERATOR_TOKEN="+d.token),
		append([]string{"dev", "--listen", "127.0.0.1:0", "--state", d.state}, extra...)...)
	if err != nil {
		return nil, err
	}
	d.p = p
	m, err := p.waitForE(devReadyRE, readyWait)
	if err != nil {
		return d, err
	}
	d.url, d.controllerAddr, d.nodeName, d.nodeID, d.started = m[1], m[2], m[3], m[4], m[5]
	return d, nil
}

// Shared `lemon dev` instances for benchmarks, keyed by purpose; stopped
// after m.Run.
var (
	sharedMu   sync.Mutex
	sharedDevs = map[string]*devNode{}
)

func sharedDev(b *testing.B, key string) *devNode {
	b.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if d := sharedDevs[key]; d != nil {
		return d
	}
	base, err := os.MkdirTemp(tmpRoot, "dev-"+key+"-")
	if err != nil {
		b.Fatal(err)
	}
	d, err := launchDev(base)
	if err != nil {
		if d != nil {
			d.p.kill()
		}
		b.Fatal(err)
	}
	sharedDevs[key] = d
	return d
}

// restartShared stops the shared instance of key and starts a fresh one
// (new state directory).
func restartShared(b *testing.B, key string) *devNode {
	b.Helper()
	sharedMu.Lock()
	if d := sharedDevs[key]; d != nil {
		d.p.kill()
		delete(sharedDevs, key)
	}
	sharedMu.Unlock()
	return sharedDev(b, key)
}

func stopSharedDevs() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	for k, d := range sharedDevs {
		d.p.kill()
		delete(sharedDevs, k)
	}
}

// dialOperator connects the in-process client to a controller.
func dialOperator(t tb, url, token string) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, url, client.Options{Token: token, ClientID: "lemon-e2e"})
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// cluster is a `lemon controller` and the nodes joined to it with interim
// node tokens from its policy.
type cluster struct {
	t         *testing.T
	dir       string
	ctl       *proc
	url       string
	opToken   string
	nodeToken string
	// nodeTokens are interim node tokens by node name, for a policy
	// with several; join falls back to nodeToken.
	nodeTokens map[string]string
	op         *operator
}

// listeningRE finds the controller's address in its text line ("listening
// on ws://...") or its JSON record ("url":"ws://...", --log-format json).
var listeningRE = regexp.MustCompile(`(?:listening on |"url":")(ws://[^\s"]+/ws)`)

// startCluster writes a controller policy with one interim node token
// (named nodeName, read from the environment variable E2E_NODE_TOKEN) and
// runs `lemon controller --listen 127.0.0.1:0`.
func startCluster(t *testing.T, nodeName string) *cluster {
	t.Helper()
	return startClusterPolicy(t, nodeName, "")
}

// startClusterPolicy is startCluster with extra top-level controller
// policy keys (e.g. "max_payload = 65536\n") before the node token.
func startClusterPolicy(t *testing.T, nodeName, extra string) *cluster {
	t.Helper()
	nodeToken := "lnt_" + randHex(24)
	text := extra + fmt.Sprintf("[[node_tokens]]\nname = %q\ntoken_env = \"E2E_NODE_TOKEN\"\n", nodeName)
	c := startClusterWith(t, text, []string{"E2E_NODE_TOKEN=" + nodeToken})
	c.nodeToken = nodeToken
	return c
}

// startClusterWith writes policy as the controller policy and runs
// `lemon controller --listen 127.0.0.1:0 --policy P ARGS...` with a fresh
// admin token in LEMON_CONTROL_PLANE_OPERATOR_TOKEN and the extra
// environment (the variables the policy's token_env keys name). The
// caller sets nodeToken or nodeTokens for join.
func startClusterWith(t *testing.T, policy string, extraEnv []string, args ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir(), opToken: "lop_" + randHex(24)}
	pol := filepath.Join(c.dir, "controller.toml")
	if err := os.WriteFile(pol, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(c.dir, "controller-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	c.ctl = start(t, "lemon controller", home,
		env(home, append([]string{"LEMON_CONTROL_PLANE_OPERATOR_TOKEN=" + c.opToken}, extraEnv...)...),
		append([]string{"controller", "--listen", "127.0.0.1:0", "--policy", pol}, args...)...)
	c.url = c.ctl.waitFor(t, listeningRE, readyWait)[1]
	c.op = newOperator(t, c.url, c.opToken)
	return c
}

// nodeMachine is one node's HOME (an allowed root), default cwd and state
// directory.
type nodeMachine struct {
	name, home, cwd, state, policy string
	args                           []string // extra `lemon node join` arguments
}

func (c *cluster) newMachine(name, policyText string) *nodeMachine {
	c.t.Helper()
	m := &nodeMachine{name: name, home: filepath.Join(c.dir, name)}
	m.cwd = filepath.Join(m.home, "work")
	if err := os.MkdirAll(m.cwd, 0o700); err != nil {
		c.t.Fatal(err)
	}
	m.state = newStateDir(c.t, filepath.Join(m.home, "state"))
	if policyText != "" {
		m.policy = filepath.Join(m.home, "worker.toml")
		if err := os.WriteFile(m.policy, []byte(policyText), 0o600); err != nil {
			c.t.Fatal(err)
		}
	}
	return m
}

// join runs `lemon node join` for m with the interim token and waits
// until node.list says the node is online; it returns the process and
// the node's ID.
func (c *cluster) join(m *nodeMachine) (*proc, string) {
	c.t.Helper()
	args := []string{"node", "join", "--controller", c.url, "--name", m.name, "--cwd", m.cwd, "--state", m.state}
	if m.policy != "" {
		args = append(args, "--policy", m.policy)
	}
	args = append(args, m.args...)
	token := c.nodeToken
	if tok, ok := c.nodeTokens[m.name]; ok {
		token = tok
	}
	p := start(c.t, "lemon node join", m.cwd, env(m.home, "LEMON_NODE_TOKEN="+token), args...)
	conn := dialOperator(c.t, c.url, c.opToken)
	var id string
	ok := eventually(readyWait, func() bool {
		if p.exited() {
			return true
		}
		raw, perr := conn.Call(context.Background(), "node.list", map[string]any{})
		if perr != nil {
			return false
		}
		var l struct {
			Nodes []struct {
				NodeID, Name string
				Online       bool
			}
		}
		if json.Unmarshal(raw, &l) != nil {
			return false
		}
		for _, n := range l.Nodes {
			if n.Name == m.name && n.Online {
				id = n.NodeID
				return true
			}
		}
		return false
	})
	conn.Close()
	if !ok || id == "" {
		c.t.Fatalf("node %s did not come online\n%s", m.name, p.output())
	}
	return p, id
}
