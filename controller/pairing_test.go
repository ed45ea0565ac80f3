package controller

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"lemon/protocol"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

const (
	pairToken     = "pairing-operator-token-0123456789"
	pair2Token    = "pairing-operator-token-2-0123456789"
	approverToken = "approver-operator-token-0123456789"
	// pairApproveToken holds operator.pairing and operator.approvals.
	pairApproveToken = "pair-approve-operator-token-0123456789"
)

func pairingConfig(dir string, clock *testClock) Config {
	cfg := testConfig()
	cfg.Operators = append(cfg.Operators,
		OperatorCredential{Name: "pairer", TokenHash: HashToken(pairToken), Scopes: []string{protocol.ScopePairing}},
		OperatorCredential{Name: "pairer2", TokenHash: HashToken(pair2Token), Scopes: []string{protocol.ScopePairing}},
		OperatorCredential{Name: "approver", TokenHash: HashToken(approverToken), Scopes: []string{protocol.ScopeApprovals}},
		OperatorCredential{Name: "pair-approver", TokenHash: HashToken(pairApproveToken), Scopes: []string{protocol.ScopePairing, protocol.ScopeApprovals}},
		OperatorCredential{Name: "writer", TokenHash: HashToken("writer-token-0123456789"), Scopes: []string{protocol.ScopeWrite, protocol.ScopeRead}})
	cfg.StateDir = dir
	cfg.Now = clock.Now
	return cfg
}

func decode[T any](t testing.TB, f frame) T {
	t.Helper()
	var v T
	if !f.OK {
		t.Fatalf("want ok, got %s", f.raw)
	}
	if err := json.Unmarshal(f.Payload, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// pairNew runs a full new-node pairing and returns the challenge result.
func pairNew(t *testing.T, s *testServer, name string) protocol.ConnectChallengeResult {
	t.Helper()
	w := connectOperator(t, s.url, pairToken)
	req := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest,
		protocol.PairRequestParams{Name: name, NodeType: "execution", Methods: defaultMethods()}))
	op := connectOperator(t, s.url, approverToken)
	decode[protocol.PairDecisionResult](t, op.call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: req.Code}))
	res := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest,
		protocol.PairRequestParams{PairingID: req.PairingID, RequestSecret: req.RequestSecret}))
	return decode[protocol.ConnectChallengeResult](t, w.call(protocol.MethodConnectChallenge,
		protocol.ConnectChallengeParams{PairingID: req.PairingID, Challenge: res.Challenge}))
}

func TestPairNewNode(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_800_000_000_000)}
	s := startServer(t, pairingConfig(t.TempDir(), clock))
	w := connectOperator(t, s.url, pairToken)
	f := w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "  build-1 ", NodeType: "execution", Methods: map[string]int{mEcho: 1}})
	req := decode[protocol.PairRequestResult](t, f)
	if req.Status != "pending" || req.Kind != "new" || req.Name != "build-1" || len(req.Code) != 9 || req.RequestSecret == "" ||
		req.ExpiresAtMs != clock.Now().UnixMilli()+5*60*1000 || req.Challenge != "" || req.NodeID != "" {
		t.Fatalf("request: %s", f.raw)
	}
	op := connectOperator(t, s.url, approverToken)
	f = op.call(protocol.MethodPairList, nil)
	list := decode[protocol.PairListResult](t, f)
	if len(list.Pairings) != 1 || list.Pairings[0].Code != req.Code || list.Pairings[0].Methods[mEcho] != 1 ||
		bytes.Contains(f.raw, []byte(req.RequestSecret)) {
		t.Fatalf("list: %s", f.raw)
	}
	// Resuming before approval: still pending, no challenge.
	res := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest,
		protocol.PairRequestParams{PairingID: req.PairingID, RequestSecret: req.RequestSecret}))
	if res.Status != "pending" || res.Challenge != "" || res.RequestSecret != "" {
		t.Fatalf("resume: %+v", res)
	}
	// connect.challenge before approval.
	wantError(t, w.call(protocol.MethodConnectChallenge, protocol.ConnectChallengeParams{PairingID: req.PairingID, Challenge: "x"}),
		protocol.CodeConflict, protocol.DomainPairingNotApproved)
	// Approve with the code as typed by a person: lower case, no dash.
	typed := strings.ToLower(strings.ReplaceAll(req.Code, "-", ""))
	dec := decode[protocol.PairDecisionResult](t, op.call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: typed}))
	if dec.Status != "approved" || !strings.HasPrefix(dec.NodeID, "node-") || dec.Name != "build-1" {
		t.Fatalf("approve: %+v", dec)
	}
	ev := w.next()
	var resolved protocol.PairResolvedEvent
	json.Unmarshal(ev.Payload, &resolved)
	if ev.Event != protocol.EventPairResolved || resolved.Status != "approved" || resolved.NodeID != dec.NodeID || resolved.PairingID != req.PairingID {
		t.Fatalf("event: %s", ev.raw)
	}
	res = decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest,
		protocol.PairRequestParams{PairingID: req.PairingID, RequestSecret: req.RequestSecret}))
	if res.Status != "approved" || res.NodeID != dec.NodeID || !strings.HasPrefix(res.Challenge, "lnc_") ||
		res.ChallengeExpiresAtMs != clock.Now().UnixMilli()+60_000 {
		t.Fatalf("approved resume: %+v", res)
	}
	ch := decode[protocol.ConnectChallengeResult](t, w.call(protocol.MethodConnectChallenge,
		protocol.ConnectChallengeParams{PairingID: req.PairingID, Challenge: res.Challenge}))
	if ch.NodeID != dec.NodeID || ch.Name != "build-1" || !strings.HasPrefix(ch.SessionToken, "lns_") ||
		!strings.HasPrefix(ch.RecoveryCredential, "lnr_") || ch.SessionGeneration != 1 ||
		ch.ExpiresAtMs != clock.Now().UnixMilli()+7*24*3600*1000 {
		t.Fatalf("challenge: %+v", ch)
	}
	// Replay: refused.
	wantError(t, w.call(protocol.MethodConnectChallenge, protocol.ConnectChallengeParams{PairingID: req.PairingID, Challenge: res.Challenge}),
		protocol.CodeUnauthorized, protocol.DomainChallengeInvalid)
	// The completed pairing is gone from the list.
	if l := decode[protocol.PairListResult](t, op.call(protocol.MethodPairList, nil)); len(l.Pairings) != 0 {
		t.Fatalf("list after completion: %+v", l)
	}
	// The node connects with its session token and serves calls.
	n := connectNode(t, s.url, ch.SessionToken, protocol.NodeAdvertise{NodeID: ch.NodeID, Name: "build-1"}, echoHandler)
	if n.hello.Auth.NodeID != ch.NodeID {
		t.Fatalf("hello: %s", n.hello.raw)
	}
	admin := connectOperator(t, s.url, adminToken)
	if f := admin.call(mEcho, map[string]any{"nodeId": ch.NodeID}); !f.OK {
		t.Fatalf("call: %s", f.raw)
	}
	if r := <-n.requests; r.SessionGeneration != 1 {
		t.Fatalf("generation %d", r.SessionGeneration)
	}
	d := decode[protocol.NodeDescription](t, admin.call("node.describe", map[string]string{"nodeId": ch.NodeID}))
	if !d.Online || d.Identity != protocol.NodeIdentityPaired || d.Name != "build-1" {
		t.Fatalf("describe: %+v", d)
	}
}

func TestPairRequestValidation(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_800_000_000_000)}
	s := startServer(t, pairingConfig("", clock))
	w := connectOperator(t, s.url, pairToken)
	cases := []struct {
		name   string
		params any
		code   string
		domain string
	}{
		{"no name", protocol.PairRequestParams{NodeType: "execution"}, protocol.CodeInvalidParams, ""},
		{"blank name", protocol.PairRequestParams{Name: "   "}, protocol.CodeInvalidParams, ""},
		{"name too long", protocol.PairRequestParams{Name: strings.Repeat("n", protocol.MaxNodeNameBytes+1)}, protocol.CodeInvalidParams, ""},
		{"control char", protocol.PairRequestParams{Name: "a\x01b"}, protocol.CodeInvalidParams, ""},
		{"bad node type", protocol.PairRequestParams{Name: "x", NodeType: "gpu"}, protocol.CodeInvalidParams, ""},
		{"bad method version", protocol.PairRequestParams{Name: "x", Methods: map[string]int{"m": 0}}, protocol.CodeInvalidParams, ""},
		{"name of a token node", protocol.PairRequestParams{Name: "WORKER-1"}, protocol.CodeConflict, protocol.DomainNameTaken},
		{"recovery without nodeId", protocol.PairRequestParams{Name: "x", RecoveryCredential: "c"}, protocol.CodeInvalidParams, ""},
		{"both recovery and repair", protocol.PairRequestParams{NodeID: "node-x", RecoveryCredential: "c", Repair: true}, protocol.CodeInvalidParams, ""},
		{"recover unknown node", protocol.PairRequestParams{NodeID: "node-x", RecoveryCredential: "c"}, protocol.CodeUnauthorized, protocol.DomainRecoveryInvalid},
		{"recover a token node", protocol.PairRequestParams{NodeID: nodeIDOf("worker-1"), RecoveryCredential: "c"}, protocol.CodeUnauthorized, protocol.DomainRecoveryInvalid},
		{"repair unknown node", protocol.PairRequestParams{NodeID: "node-x", Repair: true}, protocol.CodeNotFound, protocol.DomainRecoveryInvalid},
		{"resume unknown", protocol.PairRequestParams{PairingID: "pair-x", RequestSecret: "s"}, protocol.CodeNotFound, protocol.DomainPairingNotFound},
		{"secret without id", protocol.PairRequestParams{Name: "x", RequestSecret: "s"}, protocol.CodeInvalidParams, ""},
		{"unknown field", `{"name":"x","extra":1}`, protocol.CodeInvalidParams, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, w.call(protocol.MethodPairRequest, tc.params), tc.code, tc.domain)
		})
	}
	// A name at the limit is accepted.
	if f := w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: strings.Repeat("n", protocol.MaxNodeNameBytes)}); !f.OK {
		t.Fatalf("name at limit: %s", f.raw)
	}
	// Scopes: a reader cannot pair or approve.
	r := connectOperator(t, s.url, readToken)
	wantError(t, r.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "x"}), protocol.CodeForbidden, "")
	wantError(t, r.call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: "AAAA-AAAA"}), protocol.CodeForbidden, "")
	wantError(t, r.call(protocol.MethodConnectChallenge, protocol.ConnectChallengeParams{}), protocol.CodeForbidden, "")
	// Approve needs exactly one of pairingId and code.
	ap := connectOperator(t, s.url, approverToken)
	wantError(t, ap.call(protocol.MethodPairApprove, protocol.PairDecisionParams{}), protocol.CodeInvalidParams, "")
	wantError(t, ap.call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: "AAAA-AAAA", PairingID: "p"}), protocol.CodeInvalidParams, "")
	wantError(t, ap.call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: "ZZZZ-ZZZZ"}), protocol.CodeNotFound, protocol.DomainPairingNotFound)
}

func TestPairingResumeAndReissue(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_800_000_000_000)}
	s := startServer(t, pairingConfig("", clock))
	w := connectOperator(t, s.url, pairToken)
	req := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "n1"}))
	// The requesting connection drops; a new one resumes the same pairing.
	w.ws.Close()
	w2 := connectOperator(t, s.url, pairToken)
	wantError(t, w2.call(protocol.MethodPairRequest, protocol.PairRequestParams{PairingID: req.PairingID, RequestSecret: "lnq_wrong"}),
		protocol.CodeNotFound, protocol.DomainPairingNotFound)
	res := decode[protocol.PairRequestResult](t, w2.call(protocol.MethodPairRequest,
		protocol.PairRequestParams{PairingID: req.PairingID, RequestSecret: req.RequestSecret}))
	if res.PairingID != req.PairingID || res.Code != req.Code {
		t.Fatalf("resume: %+v", res)
	}
	op := connectOperator(t, s.url, approverToken)
	decode[protocol.PairDecisionResult](t, op.call(protocol.MethodPairApprove, protocol.PairDecisionParams{PairingID: req.PairingID}))
	// The resuming connection gets the event.
	if ev := w2.next(); ev.Event != protocol.EventPairResolved {
		t.Fatalf("event: %s", ev.raw)
	}
	resume := func() protocol.PairRequestResult {
		return decode[protocol.PairRequestResult](t, w2.call(protocol.MethodPairRequest,
			protocol.PairRequestParams{PairingID: req.PairingID, RequestSecret: req.RequestSecret}))
	}
	first := resume()
	// The first challenge was "lost": asking again reissues; the old one stops working.
	second := resume()
	if first.Challenge == second.Challenge {
		t.Fatal("challenge not reissued")
	}
	wantError(t, w2.call(protocol.MethodConnectChallenge, protocol.ConnectChallengeParams{PairingID: req.PairingID, Challenge: first.Challenge}),
		protocol.CodeUnauthorized, protocol.DomainChallengeInvalid)
	// A challenge expires after 60 s.
	clock.Add(protocol.ChallengeTTL)
	wantError(t, w2.call(protocol.MethodConnectChallenge, protocol.ConnectChallengeParams{PairingID: req.PairingID, Challenge: second.Challenge}),
		protocol.CodeUnauthorized, protocol.DomainChallengeInvalid)
	third := resume()
	clock.Add(protocol.ChallengeTTL - time.Millisecond) // just inside its lifetime
	if f := w2.call(protocol.MethodConnectChallenge, protocol.ConnectChallengeParams{PairingID: req.PairingID, Challenge: third.Challenge}); !f.OK {
		t.Fatalf("challenge within 60 s: %s", f.raw)
	}
}

func TestPairingExpiryAndReject(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_800_000_000_000)}
	dir := t.TempDir()
	s := startServer(t, pairingConfig(dir, clock))
	w := connectOperator(t, s.url, pairToken)
	a := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "a"}))
	b := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "b"}))
	ap := connectOperator(t, s.url, approverToken)
	// Reject b: the requester is told, and the challenge path is closed.
	dec := decode[protocol.PairDecisionResult](t, ap.call(protocol.MethodPairReject, protocol.PairDecisionParams{Code: b.Code}))
	if dec.Status != "rejected" {
		t.Fatalf("reject: %+v", dec)
	}
	if ev := w.next(); !bytes.Contains(ev.Payload, []byte(`"rejected"`)) {
		t.Fatalf("event: %s", ev.raw)
	}
	wantError(t, ap.call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: b.Code}), protocol.CodeConflict, "")
	wantError(t, w.call(protocol.MethodConnectChallenge, protocol.ConnectChallengeParams{PairingID: b.PairingID, Challenge: "x"}),
		protocol.CodeForbidden, protocol.DomainPairingRejected)
	// One millisecond before five minutes: a is still live.
	clock.Add(protocol.PairingTTL - time.Millisecond)
	if l := decode[protocol.PairListResult](t, ap.call(protocol.MethodPairList, nil)); len(l.Pairings) != 2 {
		t.Fatalf("list before expiry: %+v", l)
	}
	clock.Add(time.Millisecond)
	wantError(t, ap.call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: a.Code}), protocol.CodeNotFound, protocol.DomainPairingNotFound)
	wantError(t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{PairingID: a.PairingID, RequestSecret: a.RequestSecret}),
		protocol.CodeNotFound, protocol.DomainPairingNotFound)
	// The janitor deletes expired records, durably.
	s.reg.expire()
	s.reg.mu.Lock()
	left := len(s.reg.pairings)
	s.reg.mu.Unlock()
	n := 0
	s.store.load(bucketPairings, func(string, []byte) error { n++; return nil })
	if left != 0 || n != 0 {
		t.Fatalf("after expiry: %d in memory, %d stored", left, n)
	}
}

func TestRepairRevokesOlderSessions(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_800_000_000_000)}
	s := startServer(t, pairingConfig("", clock))
	first := pairNew(t, s, "gpu-1")
	node := connectNode(t, s.url, first.SessionToken, protocol.NodeAdvertise{}, silentHandler)
	admin := connectOperator(t, s.url, adminToken)
	inflight := admin.start(mEcho, map[string]any{"nodeId": first.NodeID})
	<-node.requests

	// Re-pair with the recovery credential: approved at once, same ID.
	w := connectOperator(t, s.url, pairToken)
	wantError(t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: first.NodeID, RecoveryCredential: "lnr_wrong"}),
		protocol.CodeUnauthorized, protocol.DomainRecoveryInvalid)
	req := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest,
		protocol.PairRequestParams{NodeID: first.NodeID, RecoveryCredential: first.RecoveryCredential}))
	if req.Kind != "recover" || req.Status != "approved" || req.NodeID != first.NodeID || req.Name != "gpu-1" || req.Challenge == "" {
		t.Fatalf("recover request: %+v", req)
	}
	second := decode[protocol.ConnectChallengeResult](t, w.call(protocol.MethodConnectChallenge,
		protocol.ConnectChallengeParams{PairingID: req.PairingID, Challenge: req.Challenge}))
	if second.NodeID != first.NodeID || second.SessionGeneration != 2 || !strings.HasPrefix(second.RecoveryCredential, "lnr_") ||
		second.RecoveryCredential == first.RecoveryCredential {
		t.Fatalf("re-pair: %+v", second)
	}
	// The old socket is closed, its call failed, its token refused.
	if code := node.waitClosed(); code != CloseSessionRevoked {
		t.Fatalf("old socket close code %d", code)
	}
	f := admin.await(inflight)
	wantError(t, f, protocol.CodeUnavailable, protocol.DomainNodeDisconnected)
	p := dialPeer(t, s.url)
	p.writeJSON(protocol.Request{Type: "req", ID: "c1", Method: "connect", Params: mustJSON(t, protocol.ConnectParams{
		Role: "node", Auth: protocol.ConnectAuth{Token: first.SessionToken}, Node: &protocol.NodeAdvertise{Methods: map[string]int{}}})})
	wantError(t, p.next(), protocol.CodeUnauthorized, protocol.DomainSessionRevoked)

	// Two workers presenting the new identity: only the latest receives requests.
	a := connectNode(t, s.url, second.SessionToken, protocol.NodeAdvertise{}, echoHandler)
	b := connectNode(t, s.url, second.SessionToken, protocol.NodeAdvertise{}, echoHandler)
	if code := a.waitClosed(); code != CloseSessionReplaced {
		t.Fatalf("duplicate close code %d", code)
	}
	for i := 0; i < 5; i++ {
		if f := admin.call(mEcho, map[string]any{"nodeId": first.NodeID}); !f.OK {
			t.Fatalf("call: %s", f.raw)
		}
		if r := <-b.requests; r.SessionGeneration != 2 {
			t.Fatalf("generation %d", r.SessionGeneration)
		}
	}
	select {
	case <-a.requests:
		t.Fatal("replaced worker received a request")
	default:
	}
	// A token that authenticates as another node ID is refused.
	p = dialPeer(t, s.url)
	p.writeJSON(protocol.Request{Type: "req", ID: "c1", Method: "connect", Params: mustJSON(t, protocol.ConnectParams{
		Role: "node", Auth: protocol.ConnectAuth{Token: second.SessionToken}, Node: &protocol.NodeAdvertise{NodeID: "node-other", Methods: map[string]int{}}})})
	wantError(t, p.next(), protocol.CodeUnauthorized, protocol.DomainNodeIdentityMismatch)
}

// A repair is for a legacy node without a recovery credential: it waits
// for an approver (even when requested with an admin credential) and
// issues the node's first credential.
func TestRepairRotatesRecoveryCredential(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_800_000_000_000)}
	s := startServer(t, pairingConfig(t.TempDir(), clock))
	first := pairNew(t, s, "legacy")
	makeLegacy(t, s, first.NodeID)
	w := connectOperator(t, s.url, adminToken, protocol.ScopePairing)
	req := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: first.NodeID, Repair: true}))
	if req.Kind != "repair" || req.Status != "pending" || req.Challenge != "" {
		t.Fatalf("repair request: %+v", req)
	}
	// The session from pairNew is unexpired: approving revokes it, so an
	// approvals-only credential may not.
	ap := connectOperator(t, s.url, approverToken)
	l := decode[protocol.PairListResult](t, ap.call(protocol.MethodPairList, nil))
	if len(l.Pairings) != 1 || !l.Pairings[0].RevokesLiveSession {
		t.Fatalf("list: %+v", l)
	}
	wantError(t, ap.call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: req.Code}), protocol.CodeForbidden, protocol.DomainAdminRequired)
	// One millisecond before the session expires it still counts as live
	// (the first pairing has expired by then: a fresh request).
	clock.Add(protocol.SessionTTL - time.Millisecond)
	req = decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: first.NodeID, Repair: true}))
	wantError(t, ap.call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: req.Code}), protocol.CodeForbidden, protocol.DomainAdminRequired)
	clock.Add(time.Millisecond)
	dec := decode[protocol.PairDecisionResult](t, ap.call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: req.Code}))
	if dec.Status != "approved" || dec.RevokesLiveSession || dec.NodeID != first.NodeID {
		t.Fatalf("approve: %+v", dec)
	}
	res := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest,
		protocol.PairRequestParams{PairingID: req.PairingID, RequestSecret: req.RequestSecret}))
	ch := decode[protocol.ConnectChallengeResult](t, w.call(protocol.MethodConnectChallenge,
		protocol.ConnectChallengeParams{PairingID: req.PairingID, Challenge: res.Challenge}))
	if ch.NodeID != first.NodeID || !strings.HasPrefix(ch.RecoveryCredential, "lnr_") || ch.RecoveryCredential == first.RecoveryCredential || ch.SessionGeneration != 2 {
		t.Fatalf("repair: %+v", ch)
	}
	wantError(t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: first.NodeID, RecoveryCredential: first.RecoveryCredential}),
		protocol.CodeUnauthorized, protocol.DomainRecoveryInvalid)
	// Now that it holds a credential, the node is no longer repairable.
	wantError(t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: first.NodeID, Repair: true}),
		protocol.CodeConflict, protocol.DomainRepairRefused)
	if f := w.call(protocol.MethodPairRequest, protocol.PairRequestParams{NodeID: first.NodeID, RecoveryCredential: ch.RecoveryCredential}); !f.OK {
		t.Fatalf("rotated credential: %s", f.raw)
	}
}

func TestSessionExpiry(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_800_000_000_000)}
	s := startServer(t, pairingConfig("", clock))
	first := pairNew(t, s, "exp-1")
	live := connectNode(t, s.url, first.SessionToken, protocol.NodeAdvertise{}, echoHandler)
	// Rename: the controller-side name survives re-pairing.
	wr := connectOperator(t, s.url, "writer-token-0123456789")
	decode[protocol.NodeRenameResult](t, wr.call(protocol.MethodNodeRename, protocol.NodeRenameParams{NodeID: first.NodeID, Name: "exp-renamed"}))

	clock.Add(protocol.SessionTTL - time.Millisecond)
	second := connectNode(t, s.url, first.SessionToken, protocol.NodeAdvertise{}, echoHandler) // fails the test if refused
	if code := live.waitClosed(); code != CloseSessionReplaced {
		t.Fatalf("close %d", code)
	}
	clock.Add(time.Millisecond)
	p := dialPeer(t, s.url)
	p.writeJSON(protocol.Request{Type: "req", ID: "c1", Method: "connect", Params: mustJSON(t, protocol.ConnectParams{
		Role: "node", Auth: protocol.ConnectAuth{Token: first.SessionToken}, Node: &protocol.NodeAdvertise{Methods: map[string]int{}}})})
	wantError(t, p.next(), protocol.CodeUnauthorized, protocol.DomainSessionExpired)
	// The janitor deletes the session and closes its socket.
	s.reg.expire()
	s.reg.mu.Lock()
	nSessions := len(s.reg.sessions)
	s.reg.mu.Unlock()
	if nSessions != 0 {
		t.Fatalf("%d sessions after expiry", nSessions)
	}
	if code := second.waitClosed(); code != CloseSessionRevoked {
		t.Fatalf("expired session's socket: close %d", code)
	}
	// Re-pairing with the recovery credential keeps the ID and the current name.
	w := connectOperator(t, s.url, pairToken)
	req := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest,
		protocol.PairRequestParams{Name: "ignored", NodeID: first.NodeID, RecoveryCredential: first.RecoveryCredential}))
	ch := decode[protocol.ConnectChallengeResult](t, w.call(protocol.MethodConnectChallenge,
		protocol.ConnectChallengeParams{PairingID: req.PairingID, Challenge: req.Challenge}))
	if ch.NodeID != first.NodeID || ch.Name != "exp-renamed" {
		t.Fatalf("re-pair: %+v", ch)
	}
	connectNode(t, s.url, ch.SessionToken, protocol.NodeAdvertise{NodeID: first.NodeID}, echoHandler)
}

func TestRename(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_800_000_000_000)}
	s := startServer(t, pairingConfig("", clock))
	a := pairNew(t, s, "alpha")
	pairNew(t, s, "beta")
	wr := connectOperator(t, s.url, "writer-token-0123456789")
	wantError(t, wr.call(protocol.MethodNodeRename, protocol.NodeRenameParams{NodeID: a.NodeID, Name: "BETA"}), protocol.CodeConflict, protocol.DomainNameTaken)
	wantError(t, wr.call(protocol.MethodNodeRename, protocol.NodeRenameParams{NodeID: a.NodeID, Name: " worker-1 "}), protocol.CodeConflict, protocol.DomainNameTaken)
	wantError(t, wr.call(protocol.MethodNodeRename, protocol.NodeRenameParams{NodeID: nodeIDOf("worker-1"), Name: "w"}), protocol.CodeConflict, "")
	wantError(t, wr.call(protocol.MethodNodeRename, protocol.NodeRenameParams{NodeID: "node-none", Name: "w"}), protocol.CodeNotFound, "")
	wantError(t, wr.call(protocol.MethodNodeRename, protocol.NodeRenameParams{NodeID: a.NodeID, Name: "  "}), protocol.CodeInvalidParams, "")
	wantError(t, connectOperator(t, s.url, readToken).call(protocol.MethodNodeRename, protocol.NodeRenameParams{NodeID: a.NodeID, Name: "x"}),
		protocol.CodeForbidden, "")
	// Changing only the case of its own name is allowed; names are trimmed.
	r := decode[protocol.NodeRenameResult](t, wr.call(protocol.MethodNodeRename, protocol.NodeRenameParams{NodeID: a.NodeID, Name: " Alpha "}))
	if r.Name != "Alpha" {
		t.Fatalf("rename: %+v", r)
	}
	// The old name is free again, and a pairing for it is accepted.
	r = decode[protocol.NodeRenameResult](t, wr.call(protocol.MethodNodeRename, protocol.NodeRenameParams{NodeID: a.NodeID, Name: "gamma"}))
	w := connectOperator(t, s.url, pairToken)
	if f := w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "alpha"}); !f.OK {
		t.Fatalf("freed name: %s", f.raw)
	}
	// An approved new pairing reserves its name.
	req := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "delta"}))
	decode[protocol.PairDecisionResult](t, connectOperator(t, s.url, approverToken).call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: req.Code}))
	wantError(t, wr.call(protocol.MethodNodeRename, protocol.NodeRenameParams{NodeID: a.NodeID, Name: "delta"}), protocol.CodeConflict, protocol.DomainNameTaken)
	wantError(t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "Delta"}), protocol.CodeConflict, protocol.DomainNameTaken)
}

func TestSupersededPairing(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_800_000_000_000)}
	s := startServer(t, pairingConfig("", clock))
	w := connectOperator(t, s.url, pairToken)
	a := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "dup"}))
	b := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "DUP"}))
	ap := connectOperator(t, s.url, approverToken)
	wantError(t, ap.call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: a.Code}), protocol.CodeNotFound, protocol.DomainPairingNotFound)
	// Another credential's request for the same name does not supersede it.
	c := decode[protocol.PairRequestResult](t, connectOperator(t, s.url, pair2Token).call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "dup"}))
	l := decode[protocol.PairListResult](t, ap.call(protocol.MethodPairList, nil))
	ids := map[string]bool{}
	for _, p := range l.Pairings {
		ids[p.PairingID] = true
	}
	if len(l.Pairings) != 2 || !ids[b.PairingID] || !ids[c.PairingID] {
		t.Fatalf("list: %+v", l)
	}
	if f := ap.call(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: b.Code}); !f.OK {
		t.Fatalf("approve newer: %s", f.raw)
	}
}

func TestDurableRestart(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_800_000_000_000)}
	dir := t.TempDir()
	cfg := pairingConfig(dir, clock)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServerWith(t, s)
	paired := pairNew(t, ts, "durable-1")
	node := connectNode(t, ts.url, paired.SessionToken, protocol.NodeAdvertise{Capabilities: []string{"read"}}, echoHandler)
	w := connectOperator(t, ts.url, pairToken)
	pending := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "later"}))
	// A second controller cannot open the same state directory.
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second controller: %v", err)
	}
	s.Close()
	node.waitClosed()

	s2 := startServer(t, cfg)
	admin := connectOperator(t, s2.url, adminToken)
	d := decode[protocol.NodeDescription](t, admin.call("node.describe", map[string]string{"nodeId": paired.NodeID}))
	if d.Online || d.Name != "durable-1" || d.Identity != protocol.NodeIdentityPaired || len(d.Capabilities) != 1 || d.LastSeenAtMs == 0 {
		t.Fatalf("after restart: %+v", d)
	}
	connectNode(t, s2.url, paired.SessionToken, protocol.NodeAdvertise{NodeID: paired.NodeID}, echoHandler)
	if f := admin.call(mEcho, map[string]any{"nodeId": paired.NodeID}); !f.OK {
		t.Fatalf("call after restart: %s", f.raw)
	}
	w2 := connectOperator(t, s2.url, pairToken)
	if f := w2.call(protocol.MethodPairRequest, protocol.PairRequestParams{PairingID: pending.PairingID, RequestSecret: pending.RequestSecret}); !f.OK {
		t.Fatalf("pending pairing lost: %s", f.raw)
	}
	// Nothing secret is stored in clear.
	var all []byte
	for _, b := range []string{bucketNodes, bucketSessions, bucketPairings} {
		s2.store.load(b, func(k string, v []byte) error { all = append(append(all, k...), v...); return nil })
	}
	for _, secret := range []string{paired.SessionToken, paired.RecoveryCredential, pending.RequestSecret} {
		if bytes.Contains(all, []byte(secret)) {
			t.Fatal("a secret is stored in clear")
		}
	}
}

func startServerWith(t *testing.T, s *Server) *testServer {
	t.Helper()
	ln, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(t.Context(), ln) }()
	t.Cleanup(func() { s.Close(); <-done })
	return &testServer{Server: s, url: "ws://" + ln.Addr().String() + "/ws"}
}
