package pairinge2e

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"lemon/controller"
	"lemon/protocol"
)

// TestPairingTokenCannotTakeOverNode: the joining hosts' token, which
// holds only operator.pairing, tries to take over a paired node the way
// reported (repair request, approval from a second connection,
// polling for the challenge, connect.challenge, connecting as the node)
// and is refused at every step, also against a legacy node without a
// recovery credential; it cannot fill more than its own bound of pending
// pairings, and an admin-token join stays one step meanwhile. Throughout,
// the victim node keeps its socket and session: same process, same
// connection, same stored session and generation, still answering calls.
func TestPairingTokenCannotTakeOverNode(t *testing.T) {
	h := newHarness(t)
	h.startController()
	a := h.newNodeHome("victim-host")
	victim, rec := h.pairNew("victim node", a, "victim")
	h.waitOnline(rec.NodeID, victim)

	var connectedAt int64
	connects := 0
	rebase := func() {
		t.Helper()
		connectedAt = h.summary(rec.NodeID).ConnectedAtMs
		connects = victim.count("connected to controller")
	}
	rebase()
	stillServing := func(step string) {
		t.Helper()
		if victim.exited() {
			t.Fatalf("%s: the victim node exited\n%s", step, victim.out.String())
		}
		if s := h.summary(rec.NodeID); !s.Online || s.ConnectedAtMs != connectedAt {
			t.Fatalf("%s: victim online %v, connected at %d (was %d)", step, s.Online, s.ConnectedAtMs, connectedAt)
		}
		if n := victim.count("connected to controller"); n != connects {
			t.Fatalf("%s: the victim reconnected (%d connections, was %d)\n%s", step, n, connects, victim.out.String())
		}
		if strings.Contains(victim.out.String(), "revoked") {
			t.Fatalf("%s: the victim's session was revoked\n%s", step, victim.out.String())
		}
		if cur := h.loadRecord(a, rec.NodeID); cur.SessionToken != rec.SessionToken || cur.SessionGeneration != rec.SessionGeneration {
			t.Fatalf("%s: the victim's stored session changed: generation %d (was %d)", step, cur.SessionGeneration, rec.SessionGeneration)
		}
		if cwd := h.hostInfo(rec.NodeID); cwd != a.cwd {
			t.Fatalf("%s: node.host.info answered from %s, not the victim", step, cwd)
		}
	}
	wantErr := func(step string, perr *protocol.Error, code, domain string) {
		t.Helper()
		if perr == nil || perr.Code != code || (domain != "" && perr.DomainCode() != domain) {
			t.Fatalf("%s: got %v, want %s %s", step, perr, code, domain)
		}
	}
	att := h.operatorWith(h.pairToken)
	att2 := h.operatorWith(h.pairToken)

	// 1. node.pair.request {nodeId: V, repair: true}: refused, V holds a
	// recovery credential.
	_, perr := callOn(att, protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: rec.NodeID, Repair: true})
	wantErr("repair request", perr, protocol.CodeConflict, protocol.DomainRepairRefused)
	// The same through `lemon node join --pair --repair` on another host.
	b := h.newNodeHome("attacker-host")
	j := h.startNodeWith("attacker join --repair", b, "victim", h.pairToken, "--repair", "--node-id", rec.NodeID)
	if code := j.exitCode(); code != 1 || !strings.Contains(j.out.String(), "refuses to repair this node") ||
		strings.Contains(j.out.String(), "pairing code:") {
		t.Fatalf("attacker join --repair: exit %d\n%s", code, j.out.String())
	}
	// A guessed recovery credential.
	_, perr = callOn(att, protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: rec.NodeID, RecoveryCredential: "lnr_guess"})
	wantErr("recovery with a guessed credential", perr, protocol.CodeUnauthorized, protocol.DomainRecoveryInvalid)
	stillServing("after the repair request")

	// 2. The token cannot approve, reject or list pairings, not even its
	// own from a second connection, nor through `lemon nodes approve`.
	raw, perr := callOn(att, protocol.MethodPairRequest, protocol.PairRequestParams{Name: "attacker-box"})
	own := mustDecode[protocol.PairRequestResult](t, raw, perr)
	h.addSecret("request secret", own.RequestSecret)
	if own.Status != protocol.PairStatusPending || own.Challenge != "" {
		t.Fatalf("attacker's own pairing: status %s, challenge %v", own.Status, own.Challenge != "")
	}
	for _, m := range []string{protocol.MethodPairApprove, protocol.MethodPairReject} {
		_, perr = callOn(att2, m, protocol.PairDecisionParams{Code: own.Code})
		wantErr(m+" from a second connection", perr, protocol.CodeForbidden, "")
	}
	_, perr = callOn(att2, protocol.MethodPairList, protocol.PairListParams{})
	wantErr("node.pair.list", perr, protocol.CodeForbidden, "")
	_, errOut, code := h.run("attacker lemon nodes approve", baseEnv(filepath.Join(h.root, "attacker-cli"), "LEMON_OPERATOR_TOKEN="+h.pairToken),
		"nodes", "--controller", h.url, "approve", own.Code)
	if code != 1 || !strings.Contains(errOut, protocol.CodeForbidden) {
		t.Fatalf("lemon nodes approve with the pairing token: exit %d %q", code, errOut)
	}
	// 3. Polling gives no challenge; connect.challenge with a guess is refused.
	raw, perr = callOn(att, protocol.MethodPairRequest, protocol.PairRequestParams{PairingID: own.PairingID, RequestSecret: own.RequestSecret})
	if r := mustDecode[protocol.PairRequestResult](t, raw, perr); r.Status != protocol.PairStatusPending || r.Challenge != "" {
		t.Fatalf("poll: status %s, challenge %v", r.Status, r.Challenge != "")
	}
	_, perr = callOn(att, protocol.MethodConnectChallenge, protocol.ConnectChallengeParams{PairingID: own.PairingID, Challenge: "lnc_guess"})
	wantErr("connect.challenge before approval", perr, protocol.CodeConflict, protocol.DomainPairingNotApproved)
	// 4. connect as role node with nodeId V and the operator token.
	if _, err := h.dialNode(h.pairToken, rec.NodeID); err == nil {
		t.Fatal("the pairing token connected as the victim node")
	} else if pe := (*protocol.Error)(nil); !errors.As(err, &pe) || pe.Code != protocol.CodeUnauthorized {
		t.Fatalf("connect as the victim node: %v", err)
	}
	stillServing("after the approval and connect attempts")

	// 5. A legacy victim (no recovery credential on the controller): the
	// repair request is accepted but waits; neither the pairing token nor
	// an approvals-only approver can approve it (it would revoke a live
	// session); an admin rejects it.
	h.makeLegacy(rec.NodeID)
	h.waitOnline(rec.NodeID, victim)
	rebase()
	att = h.operatorWith(h.pairToken)
	att2 = h.operatorWith(h.pairToken)
	raw, perr = callOn(att, protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: rec.NodeID, Repair: true})
	rep := mustDecode[protocol.PairRequestResult](t, raw, perr)
	h.addSecret("request secret", rep.RequestSecret)
	if rep.Status != protocol.PairStatusPending || rep.Kind != protocol.PairKindRepair || rep.Challenge != "" {
		t.Fatalf("legacy repair request: status %s kind %s, challenge %v", rep.Status, rep.Kind, rep.Challenge != "")
	}
	_, perr = callOn(att2, protocol.MethodPairApprove, protocol.PairDecisionParams{Code: rep.Code})
	wantErr("approve the repair with the pairing token", perr, protocol.CodeForbidden, "")
	_, perr = h.callWith(h.approveToken, protocol.MethodPairApprove, protocol.PairDecisionParams{Code: rep.Code})
	wantErr("approve the repair with operator.approvals", perr, protocol.CodeForbidden, protocol.DomainAdminRequired)
	raw, perr = h.callWith(h.approveToken, protocol.MethodPairList, protocol.PairListParams{})
	if l := mustDecode[protocol.PairListResult](t, raw, perr); len(l.Pairings) != 2 || !hasRevokingRepair(l, rep.PairingID) {
		t.Fatalf("node.pair.list for the approver: %+v", l)
	}
	if table := h.mustCLI("nodes"); !strings.Contains(table, rep.Code) || !strings.Contains(table, "approving revokes its live session") {
		t.Fatalf("lemon nodes does not flag the repair:\n%s", table)
	}
	raw, perr = callOn(att, protocol.MethodPairRequest, protocol.PairRequestParams{PairingID: rep.PairingID, RequestSecret: rep.RequestSecret})
	if r := mustDecode[protocol.PairRequestResult](t, raw, perr); r.Status != protocol.PairStatusPending || r.Challenge != "" {
		t.Fatalf("repair poll: status %s, challenge %v", r.Status, r.Challenge != "")
	}
	_, perr = callOn(att, protocol.MethodConnectChallenge, protocol.ConnectChallengeParams{PairingID: rep.PairingID, Challenge: "lnc_guess"})
	wantErr("connect.challenge of the repair", perr, protocol.CodeConflict, protocol.DomainPairingNotApproved)
	if out := h.mustCLI("nodes", "reject", rep.Code); !strings.Contains(out, "rejected") {
		t.Fatalf("reject: %q", out)
	}
	_, perr = callOn(att, protocol.MethodConnectChallenge, protocol.ConnectChallengeParams{PairingID: rep.PairingID, Challenge: "lnc_guess"})
	wantErr("connect.challenge of the rejected repair", perr, protocol.CodeForbidden, protocol.DomainPairingRejected)
	stillServing("after the legacy repair attempt")

	// 6. The token fills only its own bound of live pairings (two are
	// live: its own new pairing and the rejected repair).
	accepted := 0
	for i := 0; ; i++ {
		_, perr = callOn(att, protocol.MethodPairRequest, protocol.PairRequestParams{Name: "flood-" + randHex(4)})
		if perr != nil {
			wantErr("flood", perr, protocol.CodeRateLimited, protocol.DomainPairingQuota)
			break
		}
		accepted++
		if accepted > protocol.MaxPendingPairingsPerCredential {
			t.Fatalf("more than %d pairings accepted for one token", protocol.MaxPendingPairingsPerCredential)
		}
	}
	if accepted != protocol.MaxPendingPairingsPerCredential-2 {
		t.Fatalf("flood: %d accepted, want %d", accepted, protocol.MaxPendingPairingsPerCredential-2)
	}
	// Meanwhile a host joining with the admin token pairs in one step.
	c := h.newNodeHome("admin-host")
	fresh := h.startNodeWith("admin-token join", c, "fresh", h.opToken)
	m := fresh.waitFor(pairedRE, startWait)
	if strings.Contains(fresh.out.String(), "pairing code:") {
		t.Fatalf("an admin-token join waited for approval:\n%s", fresh.out.String())
	}
	h.loadRecord(c, m[2])
	h.waitOnline(m[2], fresh)
	stillServing("at the end")
}

// hasRevokingRepair reports whether l lists pairingID as a repair whose
// approval revokes a live session.
func hasRevokingRepair(l protocol.PairListResult, pairingID string) bool {
	for _, p := range l.Pairings {
		if p.PairingID == pairingID {
			return p.Kind == protocol.PairKindRepair && p.RevokesLiveSession
		}
	}
	return false
}

// summary is node.list's entry for nodeID.
func (h *harness) summary(nodeID string) protocol.NodeSummary {
	h.t.Helper()
	for _, n := range h.nodeList() {
		if n.NodeID == nodeID {
			return n
		}
	}
	h.t.Fatalf("node %s not listed", nodeID)
	return protocol.NodeSummary{}
}

// makeLegacy restarts the controller with node nodeID's recovery
// credential removed from its durable store, as a record written before
// recovery credentials existed. The node's sessions are untouched.
func (h *harness) makeLegacy(nodeID string) {
	h.t.Helper()
	if code := h.ctl.stop(); code != 0 {
		h.t.Fatalf("controller exit %d\n%s", code, h.ctl.out.String())
	}
	db, err := bolt.Open(filepath.Join(h.stateDir, controller.StoreFile), 0o600, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte("nodes"))
		var rec map[string]any
		if err := json.Unmarshal(bk.Get([]byte(nodeID)), &rec); err != nil {
			return err
		}
		delete(rec, "recoveryHash")
		v, _ := json.Marshal(rec)
		return bk.Put([]byte(nodeID), v)
	})
	db.Close()
	if err != nil {
		h.t.Fatal(err)
	}
	h.startController()
}

// TestLegacyRepairOfLiveNodeNeedsAdmin: the legitimate repair of a legacy
// node (no recovery credential on the controller) that is still online:
// `lemon node join --pair --repair --node-id` with the joining hosts'
// token shows a code; an approvals-only approver is refused because the
// approval revokes the live session; `lemon nodes approve` with the admin
// token says it will; the repair completes, the live session's socket is
// closed (4002), and the node holds a recovery credential. The live
// session is held by a raw client, so the repairing process can open the
// node's state directory.
func TestLegacyRepairOfLiveNodeNeedsAdmin(t *testing.T) {
	h := newHarness(t)
	h.startController()
	a := h.newNodeHome("legacy-host")
	n1, rec := h.pairNew("node a", a, "legacy")
	h.waitOnline(rec.NodeID, n1)
	if c := n1.stop(); c != 0 {
		t.Fatalf("node exit %d", c)
	}
	h.makeLegacy(rec.NodeID)
	live, err := h.dialNode(rec.SessionToken, rec.NodeID)
	if err != nil {
		t.Fatalf("live session: %v", err)
	}
	h.waitOnline(rec.NodeID, nil)

	n2 := h.startNode("node a (repair)", a, "legacy", true, "--repair", "--node-id", rec.NodeID)
	code := n2.waitFor(codeRE, startWait)[1]
	_, errOut, exit := h.run("lemon nodes approve (approvals token)", baseEnv(filepath.Join(h.root, "approver-cli"),
		"LEMON_OPERATOR_TOKEN="+h.approveToken), "nodes", "--controller", h.url, "approve", code)
	if exit != 1 || !strings.Contains(errOut, protocol.DomainAdminRequired) {
		t.Fatalf("approvals-only approve of a live repair: exit %d %q", exit, errOut)
	}
	select {
	case <-live.Done():
		t.Fatalf("the refused approval disconnected the node: %v", live.Err())
	default:
	}
	out := h.mustCLI("nodes", "approve", code)
	if !strings.Contains(out, "approved") || !strings.Contains(out, "revokes the live session of node "+rec.NodeID) {
		t.Fatalf("admin approve output: %q", out)
	}
	if m := n2.waitFor(pairedRE, startWait); m[2] != rec.NodeID {
		t.Fatalf("repaired as %s, want %s", m[2], rec.NodeID)
	}
	select {
	case <-live.Done():
	case <-time.After(startWait):
		t.Fatal("the revoked session's socket stayed open")
	}
	if c := closeCode(live.Err()); c != 4002 {
		t.Fatalf("revoked socket closed with %d (%v), want 4002", c, live.Err())
	}
	cur := h.loadRecord(a, rec.NodeID)
	if cur.RecoveryCredential == "" || cur.RecoveryCredential == rec.RecoveryCredential || cur.SessionGeneration != rec.SessionGeneration+1 {
		t.Fatalf("repaired record: generation %d (was %d), new credential %v", cur.SessionGeneration, rec.SessionGeneration,
			cur.RecoveryCredential != rec.RecoveryCredential)
	}
	h.waitOnline(rec.NodeID, n2)
	if cwd := h.hostInfo(rec.NodeID); cwd != a.cwd {
		t.Fatalf("node.host.info answered from %s", cwd)
	}
	// Now it holds a credential: a second repair is refused.
	raw, perr := h.callWith(h.pairToken, protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: rec.NodeID, Repair: true})
	if perr == nil || perr.DomainCode() != protocol.DomainRepairRefused {
		t.Fatalf("second repair: %s %v", raw, perr)
	}
}
