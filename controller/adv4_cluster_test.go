package controller

import (
	"testing"
	"time"

	"lemon/protocol"
)

// TestAdv4RevokedSessionRefusedBeforeWatch: a node session revoked by a
// re-pairing on controller 0 is refused on controller 1 even while
// controller 1's registry still holds the old session unrevoked (its KV
// watch lags): the claim reads the node's generation from KV. The old
// token was accepted in that window (the holder record only learns the
// new generation once the new session connects).
func TestAdv4RevokedSessionRefusedBeforeWatch(t *testing.T) {
	base := pairingConfig("", &testClock{t: time.Now()})
	base.Now = nil
	ms := startCluster(t, 2, func(int) Config { return base })
	first := pairNew(t, ms[0].srv, "adv4-paired")
	held := connectNode(t, ms[0].srv.url, first.SessionToken, protocol.NodeAdvertise{}, echoHandler)
	clusterWait(t, "holder seen on c1", func() bool { return ms[1].srv.fed.holderOf(first.NodeID) == "c0" })

	// Re-pair on controller 0: the old session is revoked.
	w := connectOperator(t, ms[0].srv.url, pairToken)
	req := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest,
		protocol.PairRequestParams{NodeID: first.NodeID, RecoveryCredential: first.RecoveryCredential}))
	decode[protocol.ConnectChallengeResult](t, w.call(protocol.MethodConnectChallenge,
		protocol.ConnectChallengeParams{PairingID: req.PairingID, Challenge: req.Challenge}))
	if code := held.waitClosed(); code != CloseSessionRevoked {
		t.Fatalf("revoked socket close code %d", code)
	}
	key := hashHex(first.SessionToken)
	clusterWait(t, "revocation on c1", func() bool {
		ms[1].srv.reg.mu.Lock()
		defer ms[1].srv.reg.mu.Unlock()
		s := ms[1].srv.reg.sessions[key]
		return s != nil && s.Revoked
	})
	// Controller 1 as it was a moment earlier: the watch has not brought
	// the revocation or the node's new generation yet.
	ms[1].srv.reg.mu.Lock()
	ms[1].srv.reg.sessions[key].Revoked = false
	if e := ms[1].srv.reg.nodes[first.NodeID]; e != nil {
		e.rec.Generation = ms[1].srv.reg.sessions[key].Generation
	}
	ms[1].srv.reg.mu.Unlock()

	p := dialPeer(t, ms[1].srv.url)
	p.writeJSON(protocol.Request{Type: "req", ID: "c1", Method: "connect", Params: mustJSON(t, protocol.ConnectParams{
		Role: "node", Auth: protocol.ConnectAuth{Token: first.SessionToken}, Node: &protocol.NodeAdvertise{Methods: map[string]int{}}})})
	wantError(t, p.next(), protocol.CodeUnauthorized, protocol.DomainSessionRevoked)
}
