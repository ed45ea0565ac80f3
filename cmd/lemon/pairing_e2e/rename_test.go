package pairinge2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenameRepairJoinOriginalName: an operator renames a paired node
// (`lemon nodes rename`), the node re-pairs with its recovery credential
// and learns the new name, and afterwards the join command it was set up
// with (`--name ORIGINAL`) still finds its identity: without --pair it
// reconnects with the stored session, with --pair it recovers the same
// node ID again (no operator, no new enrolment). The new name finds it
// too; another controller URL never does. The default state directory
// stays that of the original name.
func TestRenameRepairJoinOriginalName(t *testing.T) {
	h := newHarness(t)
	h.startController()
	a := h.newNodeHome("machine-a")
	n1, rec := h.pairNew("node a", a, "worker-1")
	h.waitOnline(rec.NodeID, n1)
	if rec.JoinName != "worker-1" {
		t.Fatalf("stored join name %q", rec.JoinName)
	}
	h.mustCLI("nodes", "rename", rec.NodeID, "build-box")
	if code := n1.stop(); code != 0 {
		t.Fatalf("node exit %d\n%s", code, n1.out.String())
	}

	// Re-pair with the original name: same ID, the controller-side name.
	n2 := h.startNode("node a (re-pair)", a, "worker-1", true)
	if m := n2.waitFor(pairedRE, startWait); m[1] != "build-box" || m[2] != rec.NodeID {
		t.Fatalf("re-paired as %s %s, want build-box %s", m[1], m[2], rec.NodeID)
	}
	if strings.Contains(n2.out.String(), "pairing code:") {
		t.Fatal("a recovery re-pairing waited for an operator")
	}
	h.waitOnline(rec.NodeID, n2)
	if code := n2.stop(); code != 0 {
		t.Fatalf("node exit %d\n%s", code, n2.out.String())
	}
	cur := h.loadRecord(a, rec.NodeID)
	if cur.Name != "build-box" || cur.JoinName != "worker-1" || cur.SessionGeneration != rec.SessionGeneration+1 ||
		cur.RecoveryCredential == "" || cur.RecoveryCredential == rec.RecoveryCredential { // rotated
		t.Fatalf("record after re-pairing: %s join %q gen %d", cur, cur.JoinName, cur.SessionGeneration)
	}

	// Join with the original name, no --pair: the stored session.
	n3 := h.startNode("node a (original name)", a, "worker-1", false)
	h.waitOnline(rec.NodeID, n3)
	if cwd := h.hostInfo(rec.NodeID); cwd != a.cwd {
		t.Fatalf("node.host.info answered from %s", cwd)
	}
	if strings.Contains(n3.out.String(), "pairing") {
		t.Fatalf("the node paired again:\n%s", n3.out.String())
	}
	if code := n3.stop(); code != 0 {
		t.Fatalf("node exit %d\n%s", code, n3.out.String())
	}

	// --pair --name ORIGINAL once more: a recovery of the same ID.
	n4 := h.startNode("node a (re-pair, original name)", a, "worker-1", true)
	if m := n4.waitFor(pairedRE, startWait); m[1] != "build-box" || m[2] != rec.NodeID {
		t.Fatalf("second re-pairing as %s %s, want build-box %s", m[1], m[2], rec.NodeID)
	}
	if strings.Contains(n4.out.String(), "pairing code:") {
		t.Fatal("the second re-pairing started a new enrolment")
	}
	h.waitOnline(rec.NodeID, n4)
	if code := n4.stop(); code != 0 {
		t.Fatalf("node exit %d\n%s", code, n4.out.String())
	}
	h.loadRecord(a, rec.NodeID)

	// The controller-side name finds the identity too; the default state
	// directory (no --state) is still the original name's.
	stateRoot := filepath.Join(a.home, ".lemon", "nodes", "state")
	if err := os.MkdirAll(filepath.Join(stateRoot, "worker-1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(wazeroCache, filepath.Join(stateRoot, "worker-1", "wazero-cache")); err != nil {
		t.Fatal(err)
	}
	n5 := h.start("node a (new name, default state)", baseEnv(a.home),
		"node", "join", "--controller", h.url, "--name", "build-box", "--cwd", a.cwd)
	h.waitOnline(rec.NodeID, n5)
	if code := n5.stop(); code != 0 {
		t.Fatalf("node exit %d\n%s", code, n5.out.String())
	}
	if _, err := os.Stat(filepath.Join(stateRoot, "build-box")); !os.IsNotExist(err) {
		t.Fatalf("the renamed node moved its state directory (%v)", err)
	}

	// Another controller URL: no stored identity under either name.
	otherURL := fmt.Sprintf("ws://127.0.0.1:%d/ws", freePort(t))
	for _, name := range []string{"worker-1", "build-box"} {
		_, errOut, code := h.run("node a (other controller) "+name, baseEnv(a.home),
			"node", "join", "--controller", otherURL, "--name", name, "--cwd", a.cwd, "--state", a.state)
		if code != 1 || !strings.Contains(errOut, "no node token") {
			t.Fatalf("join %s at another controller: exit %d\n%s", name, code, errOut)
		}
	}

	// One identity on both sides.
	checkStoreModes(t, a, rec.NodeID)
	nodes := h.nodeList()
	if len(nodes) != 1 || nodes[0].NodeID != rec.NodeID || nodes[0].Name != "build-box" {
		t.Fatalf("registry: %+v", nodes)
	}
}
