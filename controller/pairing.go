package controller

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"lemon/protocol"
)

// Pairing; the flow is described on protocol/pairing.go and the trust
// rules in docs/THREAT_MODEL.md. Decisions made here:
//   - operator.pairing requests and polls; deciding needs
//     operator.approvals (or admin) on a connection that never requested
//     or resumed the pairing.
//   - A recovery request (nodeId + a valid recovery credential) is approved
//     at once: the credential proves the identity. A new node requested
//     with a credential holding operator.admin is approved at once (its
//     holder could approve it anyway). Everything else waits for an
//     approver; a repair is never approved automatically, is refused for
//     a node that holds a recovery credential, and approving one that
//     would revoke a live session needs operator.admin.
//   - The recovery credential rotates at every connect.challenge; a
//     recovery pairing completes only if the credential it was requested
//     with is still the node's current one.
//   - An approved new pairing reserves its name until it completes or
//     expires; the node record is created when the challenge is exchanged,
//     so an abandoned approval leaves no ghost node.
//   - Approval restarts the pairing's PairingTTL, so the requester has the
//     full window to collect its challenge.
//   - Live pairings are bounded per requesting credential
//     (protocol.MaxPendingPairingsPerCredential) and in all
//     (MaxPendingPairings).

// MaxPendingPairings bounds the pairing records kept at once.
const MaxPendingPairings = protocol.MaxPendingPairings

// maxAskers bounds the connections remembered per pairing as having
// requested or resumed it (a worker resumes once per reconnect).
const maxAskers = 16

// sessionRecord is a node session, stored under the hex sha256 of its token.
type sessionRecord struct {
	NodeID      string `json:"nodeId"`
	Generation  uint64 `json:"generation"`
	IssuedAtMs  int64  `json:"issuedAtMs"`
	ExpiresAtMs int64  `json:"expiresAtMs"`
	// Revoked marks a session replaced by a newer pairing; it is kept until
	// it would have expired so the node learns why it is refused.
	Revoked bool `json:"revoked,omitempty"`
}

// pairingRecord is a pairing request. Secrets are stored as hex sha256.
type pairingRecord struct {
	ID                   string         `json:"id"`
	Code                 string         `json:"code"`
	Kind                 string         `json:"kind"`
	Status               string         `json:"status"`
	Name                 string         `json:"name"`
	NodeType             string         `json:"nodeType"`
	NodeID               string         `json:"nodeId,omitempty"`
	Methods              map[string]int `json:"methods,omitempty"`
	RequestSecretHash    string         `json:"requestSecretHash"`
	RequestedAtMs        int64          `json:"requestedAtMs"`
	ExpiresAtMs          int64          `json:"expiresAtMs"`
	ChallengeHash        string         `json:"challengeHash,omitempty"`
	ChallengeExpiresAtMs int64          `json:"challengeExpiresAtMs,omitempty"`
	// Requester is the hex SHA-256 of the operator credential's token
	// hash that requested the pairing (the per-credential bound).
	Requester string `json:"requester,omitempty"`
	// RecoveryHash is, for a recovery, the node's recovery credential hash
	// the request was authorised with; it must still be current when the
	// challenge is exchanged.
	RecoveryHash string `json:"recoveryHash,omitempty"`

	// askers are the connections that requested or resumed the pairing
	// (memory only, at most maxAskers, newest last); none may decide it.
	askers []*conn
}

// addAsker remembers c as a requester of p.
func (p *pairingRecord) addAsker(c *conn) {
	for _, a := range p.askers {
		if a == c {
			return
		}
	}
	if len(p.askers) >= maxAskers {
		p.askers = append(p.askers[:0:0], p.askers[1:]...)
	}
	p.askers = append(p.askers, c)
}

func (p *pairingRecord) askedBy(c *conn) bool {
	for _, a := range p.askers {
		if a == c {
			return true
		}
	}
	return false
}

// requesterKey names the operator credential of connection c.
func requesterKey(c *conn) string {
	if c == nil || c.op == nil {
		return ""
	}
	h := HashToken(string(c.op.hash[:]))
	return hex.EncodeToString(h[:])
}

// liveSessionLocked reports whether node id has a live connection or an
// unexpired, unrevoked session.
func (r *registry) liveSessionLocked(id string, now int64) bool {
	if e, ok := r.nodes[id]; ok && e.live != nil {
		return true
	}
	for _, s := range r.sessions {
		if s.NodeID == id && !s.Revoked && s.ExpiresAtMs > now {
			return true
		}
	}
	return false
}

// countByRequesterLocked counts the live pairings of credential key,
// leaving out those skip says are about to be superseded.
func (r *registry) countByRequesterLocked(key string, now int64, skip func(*pairingRecord) bool) int {
	n := 0
	for _, p := range r.pairings {
		if p.Requester == key && p.ExpiresAtMs > now && !skip(p) {
			n++
		}
	}
	return n
}

func repairRefused() *protocol.Error {
	return protocol.DomainError(protocol.CodeConflict, protocol.DomainRepairRefused,
		"this node holds a recovery credential; it re-pairs with that credential, not by repair")
}

func hashHex(secret string) string {
	h := HashToken(secret)
	return hex.EncodeToString(h[:])
}

// equalHash compares a secret with a stored hex hash in constant time.
func equalHash(secret, storedHex string) bool {
	if storedHex == "" || secret == "" || len(secret) > MaxTokenBytes {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(hashHex(secret)), []byte(storedHex)) == 1
}

// newSecret returns prefix + 32 random bytes in base64url.
func newSecret(prefix string) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("controller: crypto/rand failed")
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// codeAlphabet has no 0/O or 1/I, so a code read aloud is unambiguous.
const codeAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

func newCode() string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic("controller: crypto/rand failed")
	}
	for i := range b {
		b[i] = codeAlphabet[int(b[i])%len(codeAlphabet)]
	}
	return string(b[:4]) + "-" + string(b[4:])
}

// codeKey normalises a code as typed by an operator.
func codeKey(code string) string {
	return strings.ToUpper(strings.NewReplacer("-", "", " ", "").Replace(code))
}

func (r *registry) loadPairingState() error {
	err := r.st.load(bucketSessions, func(k string, v []byte) error {
		var s sessionRecord
		if err := json.Unmarshal(v, &s); err != nil {
			return fmt.Errorf("controller: corrupt session record in the durable store")
		}
		r.sessions[k] = &s
		return nil
	})
	if err != nil {
		return err
	}
	return r.st.load(bucketPairings, func(k string, v []byte) error {
		var p pairingRecord
		if err := json.Unmarshal(v, &p); err != nil || p.ID != k {
			return fmt.Errorf("controller: corrupt pairing record in the durable store")
		}
		r.pairings[k] = &p
		r.codes[codeKey(p.Code)] = p.ID
		return nil
	})
}

func (r *registry) deletePairingLocked(p *pairingRecord) {
	delete(r.pairings, p.ID)
	delete(r.codes, codeKey(p.Code))
	delete(r.waiters, p.ID)
}

// nameTakenLocked reports whether name is held by a node other than
// exceptNode or reserved by an approved new pairing other than exceptPairing.
func (r *registry) nameTakenLocked(name, exceptNode, exceptPairing string) bool {
	return r.nameTakenSkipLocked(name, exceptNode, func(p *pairingRecord) bool { return p.ID == exceptPairing })
}

// nameTakenSkipLocked is nameTakenLocked ignoring the pairings skip names.
func (r *registry) nameTakenSkipLocked(name, exceptNode string, skip func(*pairingRecord) bool) bool {
	key := nameKey(name)
	if id, ok := r.names[key]; ok && id != exceptNode {
		return true
	}
	for _, p := range r.pairings {
		if p.Kind == protocol.PairKindNew && p.Status == protocol.PairStatusApproved && nameKey(p.Name) == key && !skip(p) {
			return true
		}
	}
	return false
}

func nameTaken() *protocol.Error {
	return protocol.DomainError(protocol.CodeConflict, protocol.DomainNameTaken, "another node holds this name")
}

func pairingNotFound() *protocol.Error {
	return protocol.DomainError(protocol.CodeNotFound, protocol.DomainPairingNotFound,
		"no live pairing matches; it may have expired or completed")
}

func (p *pairingRecord) info() protocol.PairingInfo {
	// RevokesLiveSession is filled in by the caller, which holds the registry.
	return protocol.PairingInfo{
		PairingID: p.ID, Code: p.Code, Kind: p.Kind, Status: p.Status, Name: p.Name, NodeType: p.NodeType,
		NodeID: p.NodeID, Methods: p.Methods, RequestedAtMs: p.RequestedAtMs, ExpiresAtMs: p.ExpiresAtMs,
	}
}

func (p *pairingRecord) result() protocol.PairRequestResult {
	return protocol.PairRequestResult{
		PairingID: p.ID, Code: p.Code, ExpiresAtMs: p.ExpiresAtMs, Status: p.Status, Kind: p.Kind,
		NodeID: p.NodeID, Name: p.Name,
	}
}

// issueChallengeLocked gives an approved pairing a fresh one-time
// challenge (any previous one stops working) and returns it.
func (r *registry) issueChallengeLocked(p *pairingRecord, res *protocol.PairRequestResult) *protocol.Error {
	ch := newSecret("lnc_")
	old, oldExp := p.ChallengeHash, p.ChallengeExpiresAtMs
	p.ChallengeHash = hashHex(ch)
	p.ChallengeExpiresAtMs = r.nowMs() + protocol.ChallengeTTL.Milliseconds()
	if err := r.st.apply(op{bucketPairings, p.ID, p}); err != nil {
		p.ChallengeHash, p.ChallengeExpiresAtMs = old, oldExp
		return storeUnavailable(err, r)
	}
	res.Challenge, res.ChallengeExpiresAtMs = ch, p.ChallengeExpiresAtMs
	return nil
}

func storeUnavailable(err error, r *registry) *protocol.Error {
	r.s.storeFailed(err)
	return protocol.Errorf(protocol.CodeUnavailable, "the controller's store is unavailable").WithRetry(true, false)
}

// pairRequest serves node.pair.request for connection c.
func (r *registry) pairRequest(c *conn, p protocol.PairRequestParams) (protocol.PairRequestResult, *protocol.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.nowMs()
	if p.PairingID != "" {
		// Resume.
		rec, ok := r.pairings[p.PairingID]
		if !ok || rec.ExpiresAtMs <= now || !equalHash(p.RequestSecret, rec.RequestSecretHash) {
			return protocol.PairRequestResult{}, pairingNotFound()
		}
		r.waiters[rec.ID] = c
		rec.addAsker(c)
		res := rec.result()
		if rec.Status == protocol.PairStatusApproved {
			if e := r.issueChallengeLocked(rec, &res); e != nil {
				return protocol.PairRequestResult{}, e
			}
		}
		return res, nil
	}
	if p.RequestSecret != "" {
		return protocol.PairRequestResult{}, protocol.InvalidParams("requestSecret", "requestSecret goes with pairingId")
	}
	if len(r.pairings) >= MaxPendingPairings {
		return protocol.PairRequestResult{}, protocol.Errorf(protocol.CodeRateLimited, "too many pairings in progress").WithRetry(true, false)
	}
	if p.NodeType != "" && p.NodeType != protocol.NodeTypeExecution {
		return protocol.PairRequestResult{}, protocol.InvalidParams("nodeType", `nodeType must be "execution"`)
	}
	if e := protocol.ValidateAdvertisedMethods("methods", p.Methods); e != nil {
		return protocol.PairRequestResult{}, e
	}
	requester := requesterKey(c)
	rec := &pairingRecord{
		ID: "pair-" + randomHex(12), Status: protocol.PairStatusPending, NodeType: protocol.NodeTypeExecution,
		Methods: p.Methods, RequestedAtMs: now, ExpiresAtMs: now + protocol.PairingTTL.Milliseconds(),
		Requester: requester,
	}
	// superseded reports whether old is replaced by this request: a
	// retried new-node request (its answer lost) by the same credential
	// for the same name. An approved one is replaced only by a request
	// that is itself approved at once.
	superseded := func(old *pairingRecord) bool {
		return rec.Kind == protocol.PairKindNew && old.Kind == protocol.PairKindNew && old.Requester == requester &&
			nameKey(old.Name) == nameKey(rec.Name) &&
			(old.Status == protocol.PairStatusPending || (old.Status == protocol.PairStatusApproved && rec.Status == protocol.PairStatusApproved))
	}
	switch {
	case p.NodeID == "":
		if p.RecoveryCredential != "" || p.Repair {
			return protocol.PairRequestResult{}, protocol.InvalidParams("nodeId", "recovery and repair need nodeId")
		}
		name, e := protocol.NormalizeNodeName("name", p.Name)
		if e != nil {
			return protocol.PairRequestResult{}, e
		}
		rec.Kind, rec.Name = protocol.PairKindNew, name
		if c != nil && c.op != nil && protocol.HasScope(c.op.scopes, protocol.ScopeAdmin) && c.mayDecide(protocol.MethodPairApprove) {
			// The credential could approve it itself (its scope and its
			// policy allow deciding pairings): one step.
			rec.Status, rec.NodeID = protocol.PairStatusApproved, "node-"+randomHex(16)
		}
		if r.nameTakenSkipLocked(name, "", superseded) {
			return protocol.PairRequestResult{}, nameTaken()
		}
	default:
		if e := protocol.RequireNodeID(p.NodeID); e != nil {
			return protocol.PairRequestResult{}, e
		}
		if p.Repair == (p.RecoveryCredential != "") {
			return protocol.PairRequestResult{}, protocol.InvalidParams("repair", "give either recoveryCredential or repair:true with nodeId")
		}
		e, ok := r.nodes[p.NodeID]
		if p.Repair {
			if !ok || e.rec.Identity != protocol.NodeIdentityPaired {
				return protocol.PairRequestResult{}, protocol.DomainError(protocol.CodeNotFound, protocol.DomainRecoveryInvalid,
					"no paired node has this nodeId")
			}
			if e.rec.RecoveryHash != "" {
				return protocol.PairRequestResult{}, repairRefused()
			}
			rec.Kind = protocol.PairKindRepair
		} else {
			if !ok || e.rec.Identity != protocol.NodeIdentityPaired || !equalHash(p.RecoveryCredential, e.rec.RecoveryHash) {
				return protocol.PairRequestResult{}, protocol.DomainError(protocol.CodeUnauthorized, protocol.DomainRecoveryInvalid,
					"the recovery credential was not accepted for this nodeId")
			}
			rec.Kind, rec.Status, rec.RecoveryHash = protocol.PairKindRecover, protocol.PairStatusApproved, e.rec.RecoveryHash
		}
		rec.NodeID, rec.Name = e.rec.ID, e.rec.Name
	}
	if r.countByRequesterLocked(requester, now, superseded) >= protocol.MaxPendingPairingsPerCredential {
		return protocol.PairRequestResult{}, protocol.DomainError(protocol.CodeRateLimited, protocol.DomainPairingQuota,
			"this credential has too many pairings in progress").WithRetry(true, false)
	}
	for _, old := range r.pairings {
		if superseded(old) {
			if err := r.st.apply(op{bucketPairings, old.ID, nil}); err != nil {
				return protocol.PairRequestResult{}, storeUnavailable(err, r)
			}
			r.deletePairingLocked(old)
		}
	}
	rec.Code = newCode()
	for r.codes[codeKey(rec.Code)] != "" {
		rec.Code = newCode()
	}
	secret := newSecret("lnq_")
	rec.RequestSecretHash = hashHex(secret)
	res := rec.result()
	if rec.Status == protocol.PairStatusApproved {
		ch := newSecret("lnc_")
		rec.ChallengeHash = hashHex(ch)
		rec.ChallengeExpiresAtMs = now + protocol.ChallengeTTL.Milliseconds()
		res.Challenge, res.ChallengeExpiresAtMs = ch, rec.ChallengeExpiresAtMs
	}
	if err := r.st.apply(op{bucketPairings, rec.ID, rec}); err != nil {
		return protocol.PairRequestResult{}, storeUnavailable(err, r)
	}
	r.pairings[rec.ID] = rec
	r.codes[codeKey(rec.Code)] = rec.ID
	r.waiters[rec.ID] = c
	rec.addAsker(c)
	res.RequestSecret = secret
	return res, nil
}

// findPairingLocked resolves exactly one of pairingId and code.
func (r *registry) findPairingLocked(p protocol.PairDecisionParams) (*pairingRecord, *protocol.Error) {
	if (p.PairingID == "") == (p.Code == "") {
		return nil, protocol.InvalidParams("pairingId", "give exactly one of pairingId and code")
	}
	id := p.PairingID
	if p.Code != "" {
		id = r.codes[codeKey(p.Code)]
	}
	rec, ok := r.pairings[id]
	if !ok || rec.ExpiresAtMs <= r.nowMs() {
		return nil, pairingNotFound()
	}
	return rec, nil
}

// decide approves or rejects a pending pairing for approver connection c
// (which holds operator.approvals; the caller checked) and notifies its
// requester. Refused (FORBIDDEN) from a connection that requested or
// resumed the pairing (self_decision), and for approving a repair that
// would revoke a live session without operator.admin (admin_required).
func (r *registry) decide(c *conn, p protocol.PairDecisionParams, approve bool) (protocol.PairDecisionResult, *protocol.Error) {
	res, w, e := r.decideLocked(c, p, approve)
	if w != nil {
		// Outside the lock: a requester that stops reading blocks only this
		// send (up to the write timeout), never the registry.
		w.sendEvent(protocol.EventPairResolved, protocol.PairResolvedEvent{PairingID: res.PairingID, Status: res.Status, NodeID: res.NodeID})
	}
	return res, e
}

// decideLocked is decide under the registry lock; it returns the
// requesting connection to notify, if any.
func (r *registry) decideLocked(c *conn, p protocol.PairDecisionParams, approve bool) (protocol.PairDecisionResult, *conn, *protocol.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, e := r.findPairingLocked(p)
	if e != nil {
		return protocol.PairDecisionResult{}, nil, e
	}
	if rec.askedBy(c) {
		return protocol.PairDecisionResult{}, nil, protocol.DomainError(protocol.CodeForbidden, protocol.DomainSelfDecision,
			"a pairing cannot be decided on a connection that requested it")
	}
	want := protocol.PairStatusRejected
	if approve {
		want = protocol.PairStatusApproved
	}
	revokes := false
	if approve && rec.Kind == protocol.PairKindRepair {
		if n, ok := r.nodes[rec.NodeID]; ok && n.rec.RecoveryHash != "" {
			return protocol.PairDecisionResult{}, nil, repairRefused()
		}
		if revokes = r.liveSessionLocked(rec.NodeID, r.nowMs()); revokes && !protocol.HasScope(c.scopes, protocol.ScopeAdmin) {
			return protocol.PairDecisionResult{}, nil, protocol.DomainError(protocol.CodeForbidden, protocol.DomainAdminRequired,
				"approving this repair revokes the node's live session; that needs operator.admin")
		}
	}
	if rec.Status == want { // idempotent
		return protocol.PairDecisionResult{PairingID: rec.ID, Status: rec.Status, NodeID: rec.NodeID, Name: rec.Name,
			RevokesLiveSession: revokes}, nil, nil
	}
	if rec.Status != protocol.PairStatusPending {
		return protocol.PairDecisionResult{}, nil, protocol.Errorf(protocol.CodeConflict, "this pairing was already decided")
	}
	next := *rec
	next.Status = want
	if approve {
		if rec.Kind == protocol.PairKindNew {
			if r.nameTakenLocked(rec.Name, "", rec.ID) {
				return protocol.PairDecisionResult{}, nil, nameTaken()
			}
			next.NodeID = "node-" + randomHex(16)
		}
		next.ExpiresAtMs = r.nowMs() + protocol.PairingTTL.Milliseconds()
	}
	if err := r.st.apply(op{bucketPairings, rec.ID, &next}); err != nil {
		return protocol.PairDecisionResult{}, nil, storeUnavailable(err, r)
	}
	*rec = next
	return protocol.PairDecisionResult{PairingID: rec.ID, Status: rec.Status, NodeID: rec.NodeID, Name: rec.Name,
		RevokesLiveSession: revokes}, r.waiters[rec.ID], nil
}

func (r *registry) pairList() protocol.PairListResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.nowMs()
	out := protocol.PairListResult{Pairings: []protocol.PairingInfo{}}
	for _, p := range r.pairings {
		if p.ExpiresAtMs > now {
			info := p.info()
			info.RevokesLiveSession = p.Kind == protocol.PairKindRepair && r.liveSessionLocked(p.NodeID, now)
			out.Pairings = append(out.Pairings, info)
		}
	}
	sort.Slice(out.Pairings, func(i, j int) bool {
		a, b := out.Pairings[i], out.Pairings[j]
		if a.RequestedAtMs != b.RequestedAtMs {
			return a.RequestedAtMs < b.RequestedAtMs
		}
		return a.PairingID < b.PairingID
	})
	return out
}

// exchangeChallenge serves connect.challenge: the one-time challenge of an
// approved pairing becomes a session token. Every older session of the
// node is revoked and its live socket closed; the generation increases.
func (r *registry) exchangeChallenge(p protocol.ConnectChallengeParams) (protocol.ConnectChallengeResult, *protocol.Error) {
	invalid := protocol.DomainError(protocol.CodeUnauthorized, protocol.DomainChallengeInvalid,
		"the challenge was not accepted; it may be wrong, used or expired")
	if p.NextRecoveryCredential != "" {
		if e := protocol.ValidateRecoveryCredential("nextRecoveryCredential", p.NextRecoveryCredential); e != nil {
			return protocol.ConnectChallengeResult{}, e
		}
	}
	newRecovery := func() string {
		if p.NextRecoveryCredential != "" {
			return p.NextRecoveryCredential
		}
		return newSecret("lnr_")
	}
	r.mu.Lock()
	rec, ok := r.pairings[p.PairingID]
	now := r.nowMs()
	if !ok || rec.ExpiresAtMs <= now {
		r.mu.Unlock()
		return protocol.ConnectChallengeResult{}, invalid
	}
	if rec.Status != protocol.PairStatusApproved {
		r.mu.Unlock()
		if rec.Status == protocol.PairStatusRejected {
			return protocol.ConnectChallengeResult{}, protocol.DomainError(protocol.CodeForbidden, protocol.DomainPairingRejected, "the pairing was rejected")
		}
		return protocol.ConnectChallengeResult{}, protocol.DomainError(protocol.CodeConflict, protocol.DomainPairingNotApproved, "the pairing is not approved yet")
	}
	if rec.ChallengeExpiresAtMs <= now || !equalHash(p.Challenge, rec.ChallengeHash) {
		r.mu.Unlock()
		return protocol.ConnectChallengeResult{}, invalid
	}
	var e *nodeEntry
	var nrec nodeRecord
	var recovery string
	switch rec.Kind {
	case protocol.PairKindNew:
		if r.nameTakenLocked(rec.Name, "", rec.ID) {
			r.mu.Unlock()
			return protocol.ConnectChallengeResult{}, nameTaken()
		}
		recovery = newRecovery()
		nrec = nodeRecord{ID: rec.NodeID, Name: rec.Name, Identity: protocol.NodeIdentityPaired, CreatedAtMs: now,
			Generation: 1, RecoveryHash: hashHex(recovery), Methods: rec.Methods}
	default:
		e = r.nodes[rec.NodeID]
		if e == nil {
			r.mu.Unlock()
			return protocol.ConnectChallengeResult{}, invalid
		}
		switch {
		case rec.Kind == protocol.PairKindRepair && e.rec.RecoveryHash != "":
			// Another pairing gave the node a credential since approval.
			r.mu.Unlock()
			return protocol.ConnectChallengeResult{}, repairRefused()
		case rec.Kind == protocol.PairKindRecover && (rec.RecoveryHash == "" || rec.RecoveryHash != e.rec.RecoveryHash):
			// The credential this recovery was requested with has been
			// used (rotated) since: it no longer works.
			r.mu.Unlock()
			return protocol.ConnectChallengeResult{}, protocol.DomainError(protocol.CodeUnauthorized, protocol.DomainRecoveryInvalid,
				"the recovery credential was not accepted for this nodeId")
		}
		// The credential rotates at every use: a node-chosen one must differ.
		recovery = newRecovery()
		if equalHash(recovery, e.rec.RecoveryHash) {
			r.mu.Unlock()
			return protocol.ConnectChallengeResult{}, protocol.InvalidParams("nextRecoveryCredential",
				"nextRecoveryCredential must differ from the current recovery credential")
		}
		nrec = e.rec
		nrec.Generation++
		nrec.RecoveryHash = hashHex(recovery)
	}
	token := newSecret("lns_")
	sess := &sessionRecord{NodeID: nrec.ID, Generation: nrec.Generation, IssuedAtMs: now,
		ExpiresAtMs: now + r.s.cfg.SessionTTL.Milliseconds()}
	ops := []op{{bucketNodes, nrec.ID, nrec}, {bucketPairings, rec.ID, nil}, {bucketSessions, hashHex(token), sess}}
	var revoked []string
	for k, s := range r.sessions {
		if s.NodeID == nrec.ID && !s.Revoked {
			revoked = append(revoked, k)
			rs := *s
			rs.Revoked = true
			ops = append(ops, op{bucketSessions, k, &rs})
		}
	}
	if err := r.st.apply(ops...); err != nil {
		r.mu.Unlock()
		return protocol.ConnectChallengeResult{}, storeUnavailable(err, r)
	}
	for _, k := range revoked {
		r.sessions[k].Revoked = true
	}
	r.sessions[hashHex(token)] = sess
	r.deletePairingLocked(rec)
	var old *conn
	if e == nil {
		e = &nodeEntry{rec: nrec}
		r.nodes[nrec.ID] = e
		r.names[nameKey(nrec.Name)] = nrec.ID
	} else {
		e.rec = nrec
		old = e.live
		e.live, e.liveGen, e.connectedAtMs = nil, 0, 0
	}
	r.mu.Unlock()
	if old != nil {
		old.abandon()
		old.closeWith(CloseSessionRevoked, "session revoked by a newer pairing")
	}
	return protocol.ConnectChallengeResult{NodeID: nrec.ID, Name: nrec.Name, SessionToken: token,
		ExpiresAtMs: sess.ExpiresAtMs, SessionGeneration: nrec.Generation, RecoveryCredential: recovery}, nil
}

// rename serves node.rename.
func (r *registry) rename(p protocol.NodeRenameParams) (protocol.NodeRenameResult, *protocol.Error) {
	if e := protocol.RequireNodeID(p.NodeID); e != nil {
		return protocol.NodeRenameResult{}, e
	}
	name, perr := protocol.NormalizeNodeName("name", p.Name)
	if perr != nil {
		return protocol.NodeRenameResult{}, perr
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.nodes[p.NodeID]
	if !ok {
		return protocol.NodeRenameResult{}, protocol.Errorf(protocol.CodeNotFound, nodeNotFoundMessage)
	}
	if e.rec.Identity == protocol.NodeIdentityToken {
		return protocol.NodeRenameResult{}, protocol.Errorf(protocol.CodeConflict,
			"an interim token node is named by the controller policy; rename it there")
	}
	if r.nameTakenLocked(name, e.rec.ID, "") {
		return protocol.NodeRenameResult{}, nameTaken()
	}
	next := e.rec
	next.Name = name
	if err := r.st.apply(op{bucketNodes, next.ID, next}); err != nil {
		return protocol.NodeRenameResult{}, storeUnavailable(err, r)
	}
	delete(r.names, nameKey(e.rec.Name))
	e.rec = next
	r.names[nameKey(name)] = e.rec.ID
	return protocol.NodeRenameResult{NodeID: e.rec.ID, Name: name}, nil
}

// expire deletes expired pairings (with their challenges) and sessions,
// and closes live connections whose session expired.
func (r *registry) expire() {
	r.mu.Lock()
	now := r.nowMs()
	var ops []op
	var drop []*pairingRecord
	for _, p := range r.pairings {
		if p.ExpiresAtMs <= now {
			drop = append(drop, p)
			ops = append(ops, op{bucketPairings, p.ID, nil})
		}
	}
	var dropS []string
	for k, s := range r.sessions {
		if s.ExpiresAtMs <= now {
			dropS = append(dropS, k)
			ops = append(ops, op{bucketSessions, k, nil})
		}
	}
	if err := r.st.apply(ops...); err != nil {
		r.mu.Unlock()
		r.s.storeFailed(err)
		return
	}
	for _, p := range drop {
		r.deletePairingLocked(p)
	}
	var closeConns []*conn
	for _, k := range dropS {
		delete(r.sessions, k)
		for _, e := range r.nodes {
			if e.live != nil && e.live.session == k {
				closeConns = append(closeConns, e.live)
				e.live, e.liveGen, e.connectedAtMs = nil, 0, 0
			}
		}
	}
	r.mu.Unlock()
	for _, c := range closeConns {
		c.abandon()
		c.closeWith(CloseSessionRevoked, "session expired")
	}
}

// handlePairing serves the pairing methods and node.rename (scope checked by the caller).
func (c *conn) handlePairing(id, method string, params json.RawMessage) {
	reg := c.s.reg
	switch method {
	case protocol.MethodPairRequest:
		var p protocol.PairRequestParams
		if e := protocol.DecodeParams(params, &p); e != nil {
			c.respondErr(id, e)
			return
		}
		res, e := reg.pairRequest(c, p)
		c.reply(id, res, e)
	case protocol.MethodPairApprove, protocol.MethodPairReject:
		var p protocol.PairDecisionParams
		if e := protocol.DecodeParams(params, &p); e != nil {
			c.respondErr(id, e)
			return
		}
		res, e := reg.decide(c, p, method == protocol.MethodPairApprove)
		c.reply(id, res, e)
	case protocol.MethodPairList:
		var p protocol.PairListParams
		if e := protocol.DecodeParams(params, &p); e != nil {
			c.respondErr(id, e)
			return
		}
		c.respond(id, reg.pairList())
	case protocol.MethodConnectChallenge:
		var p protocol.ConnectChallengeParams
		if e := protocol.DecodeParams(params, &p); e != nil {
			c.respondErr(id, e)
			return
		}
		res, e := reg.exchangeChallenge(p)
		c.reply(id, res, e)
	case protocol.MethodNodeRename:
		var p protocol.NodeRenameParams
		if e := protocol.DecodeParams(params, &p); e != nil {
			c.respondErr(id, e)
			return
		}
		res, e := reg.rename(p)
		c.reply(id, res, e)
	default:
		c.respondErr(id, protocol.Errorf(protocol.CodeMethodNotFound, "unknown method"))
	}
}

func (c *conn) reply(id string, payload any, e *protocol.Error) {
	if e != nil {
		c.respondErr(id, e)
		return
	}
	c.respond(id, payload)
}
