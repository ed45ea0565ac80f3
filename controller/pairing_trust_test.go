package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"lemon/protocol"
)

// Who may decide a pairing, which pairings are approved at once, how the
// recovery credential rotates and how many pairings one credential may
// hold (docs/THREAT_MODEL.md "Pairing").

// makeLegacy turns a paired node into a legacy record without a recovery
// credential, as written before credentials existed (durably).
func makeLegacy(t *testing.T, s *testServer, nodeID string) {
	t.Helper()
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	e := s.reg.nodes[nodeID]
	next := e.rec
	next.RecoveryHash = ""
	if err := s.reg.st.apply(op{bucketNodes, nodeID, next}); err != nil {
		t.Fatal(err)
	}
	e.rec = next
}

// echoOn makes one admin call to nodeID and returns the generation the
// node saw.
func echoOn(t *testing.T, s *testServer, n *fakeNode, nodeID string) uint64 {
	t.Helper()
	admin := connectOperator(t, s.url, adminToken)
	if f := admin.call(mEcho, map[string]any{"nodeId": nodeID}); !f.OK {
		t.Fatalf("call: %s", f.raw)
	}
	select {
	case r := <-n.requests:
		return r.SessionGeneration
	case <-timeAfter():
		t.Fatal("the node received no request")
	}
	return 0
}

// The reported takeover, step by step, with a token holding only
// operator.pairing: every step is refused and the victim keeps serving
// on the same session generation.
func TestPairingTokenCannotTakeOverNode(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_800_000_000_000)}
	s := startServer(t, pairingConfig("", clock))
	victim := pairNew(t, s, "victim")
	node := connectNode(t, s.url, victim.SessionToken, protocol.NodeAdvertise{NodeID: victim.NodeID}, echoHandler)
	if g := echoOn(t, s, node, victim.NodeID); g != 1 {
		t.Fatalf("generation %d", g)
	}

	// node.pair.request {nodeId: V, repair: true}: V holds a recovery
	// credential, so a repair is refused outright.
	att := connectOperator(t, s.url, pairToken)
	wantError(t, att.call(protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: victim.NodeID, Repair: true}),
		protocol.CodeConflict, protocol.DomainRepairRefused)

	// Against a legacy node (no credential) the repair is accepted but
	// stays pending: never approved at once.
	makeLegacy(t, s, victim.NodeID)
	req := decode[protocol.PairRequestResult](t, att.call(protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: victim.NodeID, Repair: true}))
	if req.Status != "pending" || req.Kind != "repair" || req.Challenge != "" {
		t.Fatalf("repair request: %+v", req)
	}
	// node.pair.approve {code} from a second connection with the same token.
	att2 := connectOperator(t, s.url, pairToken)
	wantError(t, att2.call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: req.Code}), protocol.CodeForbidden, "")
	wantError(t, att2.call(protocol.MethodPairReject, protocol.PairDecisionParams{Code: req.Code}), protocol.CodeForbidden, "")
	wantError(t, att2.call(protocol.MethodPairList, nil), protocol.CodeForbidden, "")
	// Poll for the challenge: still pending, no challenge.
	res := decode[protocol.PairRequestResult](t, att.call(protocol.MethodPairRequest,
		protocol.PairRequestParams{PairingID: req.PairingID, RequestSecret: req.RequestSecret}))
	if res.Status != "pending" || res.Challenge != "" {
		t.Fatalf("poll: %+v", res)
	}
	wantError(t, att.call(protocol.MethodConnectChallenge, protocol.ConnectChallengeParams{PairingID: req.PairingID, Challenge: "lnc_guess"}),
		protocol.CodeConflict, protocol.DomainPairingNotApproved)
	// An approvals-only approver may not approve a repair that revokes a
	// live session; the list says it would.
	ap := connectOperator(t, s.url, approverToken)
	l := decode[protocol.PairListResult](t, ap.call(protocol.MethodPairList, nil))
	if len(l.Pairings) != 1 || l.Pairings[0].Kind != "repair" || !l.Pairings[0].RevokesLiveSession {
		t.Fatalf("list: %+v", l)
	}
	wantError(t, ap.call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: req.Code}), protocol.CodeForbidden, protocol.DomainAdminRequired)
	// Rejecting needs no admin.
	if dec := decode[protocol.PairDecisionResult](t, ap.call(protocol.MethodPairReject, protocol.PairDecisionParams{Code: req.Code})); dec.Status != "rejected" {
		t.Fatalf("reject: %+v", dec)
	}
	wantError(t, att.call(protocol.MethodConnectChallenge, protocol.ConnectChallengeParams{PairingID: req.PairingID, Challenge: "lnc_guess"}),
		protocol.CodeForbidden, protocol.DomainPairingRejected)

	// connect as role node with nodeId V, holding only the pairing token.
	p := dialPeer(t, s.url)
	p.writeJSON(protocol.Request{Type: "req", ID: "c1", Method: "connect", Params: mustJSON(t, protocol.ConnectParams{
		Role: "node", Auth: protocol.ConnectAuth{Token: pairToken}, Node: &protocol.NodeAdvertise{NodeID: victim.NodeID, Methods: map[string]int{}}})})
	if f := p.next(); f.OK || f.Error == nil || f.Error.Code != protocol.CodeUnauthorized {
		t.Fatalf("connect as the victim with the pairing token: %s", f.raw)
	}

	// The victim never noticed: same socket, same generation, serving.
	if g := echoOn(t, s, node, victim.NodeID); g != 1 {
		t.Fatalf("generation after the attempt %d", g)
	}
	d := decode[protocol.NodeDescription](t, connectOperator(t, s.url, adminToken).call("node.describe", map[string]string{"nodeId": victim.NodeID}))
	if !d.Online {
		t.Fatalf("victim offline: %+v", d)
	}
}

// An admin approving a repair of a node with a live session is told it
// revokes that session; completing it does.
func TestAdminApprovesRepairRevokingLiveSession(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_800_000_000_000)}
	s := startServer(t, pairingConfig("", clock))
	v := pairNew(t, s, "legacy-live")
	node := connectNode(t, s.url, v.SessionToken, protocol.NodeAdvertise{NodeID: v.NodeID}, echoHandler)
	makeLegacy(t, s, v.NodeID)
	w := connectOperator(t, s.url, pairToken)
	req := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: v.NodeID, Repair: true}))
	admin := connectOperator(t, s.url, adminToken)
	dec := decode[protocol.PairDecisionResult](t, admin.call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: req.Code}))
	if dec.Status != "approved" || !dec.RevokesLiveSession || dec.NodeID != v.NodeID {
		t.Fatalf("approve: %+v", dec)
	}
	res := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest,
		protocol.PairRequestParams{PairingID: req.PairingID, RequestSecret: req.RequestSecret}))
	ch := decode[protocol.ConnectChallengeResult](t, w.call(protocol.MethodConnectChallenge,
		protocol.ConnectChallengeParams{PairingID: req.PairingID, Challenge: res.Challenge}))
	if ch.SessionGeneration != 2 || ch.RecoveryCredential == "" {
		t.Fatalf("repair: %+v", ch)
	}
	if code := node.waitClosed(); code != CloseSessionRevoked {
		t.Fatalf("old socket close %d", code)
	}
}

// Deciding needs operator.approvals (or admin) and a connection other
// than any that requested or resumed the pairing.
func TestPairDecisionNeedsOtherConnection(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_800_000_000_000)}
	s := startServer(t, pairingConfig("", clock))
	w := connectOperator(t, s.url, pairApproveToken)
	req := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "self"}))
	if req.Status != "pending" {
		t.Fatalf("request: %+v", req)
	}
	wantError(t, w.call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: req.Code}), protocol.CodeForbidden, protocol.DomainSelfDecision)
	wantError(t, w.call(protocol.MethodPairReject, protocol.PairDecisionParams{PairingID: req.PairingID}), protocol.CodeForbidden, protocol.DomainSelfDecision)
	// A connection that resumed it is a requester too.
	w2 := connectOperator(t, s.url, pairApproveToken)
	decode[protocol.PairRequestResult](t, w2.call(protocol.MethodPairRequest, protocol.PairRequestParams{PairingID: req.PairingID, RequestSecret: req.RequestSecret}))
	wantError(t, w2.call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: req.Code}), protocol.CodeForbidden, protocol.DomainSelfDecision)
	// A third connection with the same credential may.
	other := connectOperator(t, s.url, pairApproveToken)
	dec := decode[protocol.PairDecisionResult](t, other.call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: req.Code}))
	if dec.Status != "approved" || dec.RevokesLiveSession {
		t.Fatalf("approve: %+v", dec)
	}
	// An admin connection narrowed to operator.pairing holds no approvals.
	req2 := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "other"}))
	narrow := connectOperator(t, s.url, adminToken, protocol.ScopePairing)
	wantError(t, narrow.call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: req2.Code}), protocol.CodeForbidden, "")
	if f := connectOperator(t, s.url, adminToken).call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: req2.Code}); !f.OK {
		t.Fatalf("admin approve: %s", f.raw)
	}
}

// A new node requested with an admin credential is approved at once (the
// worker asks for operator.pairing only); a repair with the same
// credential still waits.
func TestAdminNewNodeIsOneStep(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_800_000_000_000)}
	s := startServer(t, pairingConfig("", clock))
	w := connectOperator(t, s.url, adminToken, protocol.ScopePairing)
	req := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest,
		protocol.PairRequestParams{Name: "one-step", NodeType: "execution", Methods: defaultMethods()}))
	if req.Status != "approved" || req.Kind != "new" || !strings.HasPrefix(req.NodeID, "node-") || !strings.HasPrefix(req.Challenge, "lnc_") {
		t.Fatalf("request: %+v", req)
	}
	// It reserves its name like any approved new pairing.
	wantError(t, connectOperator(t, s.url, pairToken).call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "ONE-STEP"}),
		protocol.CodeConflict, protocol.DomainNameTaken)
	// A retry by the same credential (its answer lost) replaces it.
	again := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "one-step", Methods: defaultMethods()}))
	if again.Status != "approved" || again.PairingID == req.PairingID {
		t.Fatalf("retry: %+v", again)
	}
	wantError(t, w.call(protocol.MethodConnectChallenge, protocol.ConnectChallengeParams{PairingID: req.PairingID, Challenge: req.Challenge}),
		protocol.CodeUnauthorized, protocol.DomainChallengeInvalid)
	ch := decode[protocol.ConnectChallengeResult](t, w.call(protocol.MethodConnectChallenge,
		protocol.ConnectChallengeParams{PairingID: again.PairingID, Challenge: again.Challenge}))
	if ch.NodeID != again.NodeID || ch.Name != "one-step" || ch.SessionGeneration != 1 || ch.RecoveryCredential == "" {
		t.Fatalf("challenge: %+v", ch)
	}
	// A pairing-only credential's new node waits.
	p := decode[protocol.PairRequestResult](t, connectOperator(t, s.url, pairToken).call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "waits"}))
	if p.Status != "pending" || p.Challenge != "" {
		t.Fatalf("pairing-token request: %+v", p)
	}
	// A repair requested with the admin credential waits too.
	makeLegacy(t, s, ch.NodeID)
	r := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: ch.NodeID, Repair: true}))
	if r.Status != "pending" || r.Challenge != "" {
		t.Fatalf("admin repair: %+v", r)
	}
}

// The recovery credential rotates at every use; the one it replaces stops
// working, including for a recovery pairing requested with it before the
// rotation. A stolen copy used first makes the legitimate re-pair fail.
func TestRecoveryCredentialRotates(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_800_000_000_000)}
	s := startServer(t, pairingConfig("", clock))
	first := pairNew(t, s, "rot")
	w := connectOperator(t, s.url, pairToken)
	recover := func(cred string) protocol.PairRequestResult {
		return decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: first.NodeID, RecoveryCredential: cred}))
	}
	exchange := func(req protocol.PairRequestResult) frame {
		return w.call(protocol.MethodConnectChallenge, protocol.ConnectChallengeParams{PairingID: req.PairingID, Challenge: req.Challenge})
	}
	// The legitimate node and a thief holding a copy both ask.
	legit, thief := recover(first.RecoveryCredential), recover(first.RecoveryCredential)
	if legit.Status != "approved" || thief.Status != "approved" {
		t.Fatalf("recover: %+v %+v", legit, thief)
	}
	second := decode[protocol.ConnectChallengeResult](t, exchange(legit))
	if second.RecoveryCredential == "" || second.RecoveryCredential == first.RecoveryCredential || second.SessionGeneration != 2 {
		t.Fatalf("re-pair: %+v", second)
	}
	// The thief's pairing was authorised by the old credential: refused.
	wantError(t, exchange(thief), protocol.CodeUnauthorized, protocol.DomainRecoveryInvalid)
	wantError(t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: first.NodeID, RecoveryCredential: first.RecoveryCredential}),
		protocol.CodeUnauthorized, protocol.DomainRecoveryInvalid)
	// A thief that uses the current credential first wins that round, and
	// the legitimate node's next re-pair is refused: the theft shows.
	stolen := decode[protocol.ConnectChallengeResult](t, exchange(recover(second.RecoveryCredential)))
	if stolen.SessionGeneration != 3 {
		t.Fatalf("stolen re-pair: %+v", stolen)
	}
	wantError(t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: first.NodeID, RecoveryCredential: second.RecoveryCredential}),
		protocol.CodeUnauthorized, protocol.DomainRecoveryInvalid)
}

// One credential holds at most MaxPendingPairingsPerCredential live
// pairings, recoveries included: N pass, N+1 is refused. At the bound
// another credential still pairs, resuming and a retry of the same name
// still pass, and a completed or expired pairing frees a place.
func TestPairingPerCredentialCap(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_800_000_000_000)}
	s := startServer(t, pairingConfig("", clock))
	node := pairNew(t, s, "cap-node") // completed: holds no place
	w := connectOperator(t, s.url, pairToken)
	rec := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest,
		protocol.PairRequestParams{NodeID: node.NodeID, RecoveryCredential: node.RecoveryCredential}))
	var reqs []protocol.PairRequestResult
	for i := 1; i < protocol.MaxPendingPairingsPerCredential; i++ {
		f := w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: fmt.Sprintf("flood-%d", i)})
		if !f.OK {
			t.Fatalf("pairing %d of %d: %s", i+1, protocol.MaxPendingPairingsPerCredential, f.raw)
		}
		reqs = append(reqs, decode[protocol.PairRequestResult](t, f))
	}
	over := w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "flood-over"})
	wantError(t, over, protocol.CodeRateLimited, protocol.DomainPairingQuota)
	wantRetry(t, over, true, false)
	// Another connection of the same credential is the same credential.
	wantError(t, connectOperator(t, s.url, pairToken).call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "flood-over"}),
		protocol.CodeRateLimited, protocol.DomainPairingQuota)
	// Resuming does not add a pairing.
	if f := w.call(protocol.MethodPairRequest, protocol.PairRequestParams{PairingID: reqs[0].PairingID, RequestSecret: reqs[0].RequestSecret}); !f.OK {
		t.Fatalf("resume at the cap: %s", f.raw)
	}
	// A retry for a name it already requested replaces that request.
	if f := w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "flood-1"}); !f.OK {
		t.Fatalf("retry at the cap: %s", f.raw)
	}
	// Other credentials are unaffected.
	if f := connectOperator(t, s.url, pair2Token).call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "other-host"}); !f.OK {
		t.Fatalf("other credential: %s", f.raw)
	}
	// Completing the recovery frees one place, exactly.
	decode[protocol.ConnectChallengeResult](t, w.call(protocol.MethodConnectChallenge,
		protocol.ConnectChallengeParams{PairingID: rec.PairingID, Challenge: rec.Challenge}))
	if f := w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "flood-over"}); !f.OK {
		t.Fatalf("after completion: %s", f.raw)
	}
	wantError(t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "flood-over-2"}), protocol.CodeRateLimited, protocol.DomainPairingQuota)
	// Expired pairings hold no place.
	clock.Add(protocol.PairingTTL)
	if f := w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "flood-over-2"}); !f.OK {
		t.Fatalf("after expiry: %s", f.raw)
	}
}

// The controller's own scope table agrees with protocol.RequiredScope for
// every pairing method.
func TestPairingMethodScopesMatchProtocol(t *testing.T) {
	for _, m := range []string{protocol.MethodPairRequest, protocol.MethodPairApprove, protocol.MethodPairReject,
		protocol.MethodPairList, protocol.MethodConnectChallenge} {
		want, ok := protocol.RequiredScope(m)
		if got := controllerMethods[m]; !ok || got != want {
			t.Errorf("%s: controller requires %q, protocol %q (%v)", m, got, want, ok)
		}
	}
}

// A node may choose its next recovery credential (stored before it asks,
// so a lost answer does not lose the identity): 32 and 256 bytes pass, 31
// and 257 bytes and a space are refused without consuming the pairing.
func TestNodeChosenRecoveryCredential(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_800_000_000_000)}
	s := startServer(t, pairingConfig("", clock))
	w := connectOperator(t, s.url, adminToken, protocol.ScopePairing)
	req := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "chooser"}))
	for _, bad := range []string{strings.Repeat("a", 31), strings.Repeat("a", 257), strings.Repeat("a", 20) + " " + strings.Repeat("a", 20)} {
		wantError(t, w.call(protocol.MethodConnectChallenge, protocol.ConnectChallengeParams{PairingID: req.PairingID, Challenge: req.Challenge,
			NextRecoveryCredential: bad}), protocol.CodeInvalidParams, "")
	}
	at32 := strings.Repeat("b", 32)
	ch := decode[protocol.ConnectChallengeResult](t, w.call(protocol.MethodConnectChallenge,
		protocol.ConnectChallengeParams{PairingID: req.PairingID, Challenge: req.Challenge, NextRecoveryCredential: at32}))
	if ch.RecoveryCredential != at32 {
		t.Fatalf("challenge: recovery credential not the chosen one")
	}
	// It works for the next re-pair, which may not keep it (rotation) and
	// chooses a 256-byte one.
	at256 := strings.Repeat("c", 256)
	rec := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: ch.NodeID, RecoveryCredential: at32}))
	wantError(t, w.call(protocol.MethodConnectChallenge, protocol.ConnectChallengeParams{PairingID: rec.PairingID, Challenge: rec.Challenge,
		NextRecoveryCredential: at32}), protocol.CodeInvalidParams, "")
	ch2 := decode[protocol.ConnectChallengeResult](t, w.call(protocol.MethodConnectChallenge,
		protocol.ConnectChallengeParams{PairingID: rec.PairingID, Challenge: rec.Challenge, NextRecoveryCredential: at256}))
	if ch2.RecoveryCredential != at256 || ch2.SessionGeneration != 2 {
		t.Fatalf("re-pair: generation %d", ch2.SessionGeneration)
	}
	wantError(t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: ch.NodeID, RecoveryCredential: at32}),
		protocol.CodeUnauthorized, protocol.DomainRecoveryInvalid)
	if f := w.call(protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: ch.NodeID, RecoveryCredential: at256}); !f.OK {
		t.Fatalf("chosen credential: %s", f.raw)
	}
}
