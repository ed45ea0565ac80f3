package protocol

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Pairing and durable node identity (docs/PROTOCOL.md,
// "Pairing and durable node identity").
//
// Flow, as a worker runs it on an operator connection (connect with role
// "operator", the joining host's operator token, scope operator.pairing):
//
//  1. node.pair.request {name, nodeType, methods} (a new node), or with
//     {nodeId, recoveryCredential} (re-pair after session expiry: same ID and
//     name), or with {nodeId, repair:true} (legacy record without a recovery
//     credential; refused while the node has one). The answer
//     {pairingId, code, expiresAtMs, requestSecret, status} is valid
//     PairingTTL. A recovery, and a new node requested with a credential
//     that holds operator.admin, come back approved at once; everything
//     else is "pending" and the worker shows the code to an approver.
//  2. An approver (operator.approvals or operator.admin, on a connection
//     other than any that requested or resumed the pairing) runs
//     node.pair.approve {code} (or node.pair.reject). Approving a repair of
//     a node that holds a live session needs operator.admin; the answer
//     says revokesLiveSession.
//  3. The worker polls node.pair.request {pairingId, requestSecret} (which is
//     also how a pairing interrupted by a dropped connection resumes). Once
//     approved the answer carries nodeId and a one-time challenge valid
//     ChallengeTTL; asking again after the challenge was lost issues a fresh
//     one (the old one stops working). The controller also pushes event
//     node.pair.resolved to the requesting connection.
//  4. connect.challenge {pairingId, challenge, nextRecoveryCredential?}
//     returns a session token valid SessionTTL and a new recovery credential
//     (every kind: the credential rotates on each use, the one it replaces
//     stops working; a node that stored nextRecoveryCredential first can
//     re-pair with it if the answer is lost). This
//     revokes every older session of the node, closes its sockets and
//     increments the session generation that routing pins.
//  5. The worker reconnects with role "node" and auth.token = the session
//     token; node.nodeId in its advertise must equal the token's node.
//
// Session tokens, recovery credentials, request secrets and challenges are
// stored by the controller only as SHA-256 hashes and are never echoed
// after the response that issues them.
const (
	MethodPairRequest      = "node.pair.request"
	MethodPairApprove      = "node.pair.approve"
	MethodPairReject       = "node.pair.reject"
	MethodPairList         = "node.pair.list"
	MethodConnectChallenge = "connect.challenge"
	MethodNodeRename       = "node.rename"
	// EventPairResolved is pushed to the connection that requested a pairing
	// when an operator approves or rejects it (payload PairResolvedEvent).
	EventPairResolved = "node.pair.resolved"
)

// Lifetimes of pairing material.
const (
	// PairingTTL is how long a pairing request (and its code) stays valid.
	PairingTTL = 5 * time.Minute
	// ChallengeTTL is how long a one-time challenge stays valid.
	ChallengeTTL = 60 * time.Second
	// SessionTTL is the lifetime of a node session token.
	SessionTTL = 7 * 24 * time.Hour
)

// NodeTypeExecution is the only node type this system serves.
const NodeTypeExecution = "execution"

// Pairing kinds.
const (
	PairKindNew     = "new"     // enrol a new durable node
	PairKindRecover = "recover" // nodeId + recovery credential: same ID and name
	PairKindRepair  = "repair"  // nodeId + repair:true, approver-approved; only for a node without a recovery credential
)

// Pairing bounds.
const (
	// MaxPendingPairings bounds the live pairing records of a controller.
	MaxPendingPairings = 1000
	// MaxPendingPairingsPerCredential bounds the live pairing records
	// (pending or approved, not yet completed) requested with one operator
	// credential, so one token cannot fill MaxPendingPairings.
	MaxPendingPairingsPerCredential = 32
)

// Pairing statuses.
const (
	PairStatusPending  = "pending"
	PairStatusApproved = "approved"
	PairStatusRejected = "rejected"
)

// Domain codes (error.details.code) of pairing and node sessions.
const (
	DomainPairingNotFound      = "pairing_not_found"      // unknown, expired or completed pairing
	DomainPairingRejected      = "pairing_rejected"       // an operator rejected it
	DomainPairingNotApproved   = "pairing_not_approved"   // connect.challenge before approval
	DomainChallengeInvalid     = "challenge_invalid"      // wrong, replayed or expired challenge
	DomainRecoveryInvalid      = "recovery_invalid"       // wrong recovery credential or unknown nodeId
	DomainSessionExpired       = "session_expired"        // re-run pairing (with the recovery credential)
	DomainSessionRevoked       = "session_revoked"        // a newer pairing replaced this session
	DomainNameTaken            = "name_taken"             // another node holds this name
	DomainNodeIdentityMismatch = "node_identity_mismatch" // token belongs to another nodeId or name
	DomainOperatorAuthMissing  = "operator_auth_missing"  // no token given
	DomainOperatorAuthInvalid  = "operator_auth_invalid"  // token not accepted
	DomainAuthNotConfigured    = "auth_not_configured"    // controller has no credential of this kind
	DomainRepairRefused        = "repair_refused"         // the node holds a recovery credential: re-pair with it
	DomainSelfDecision         = "self_decision"          // a pairing decided from a connection that requested it
	DomainAdminRequired        = "admin_required"         // approving this repair revokes a live session
	DomainPairingQuota         = "pairing_quota"          // this credential has too many live pairings
)

// PairRequestParams are the params of node.pair.request. Exactly one form:
//   - new node: Name, NodeType, Methods;
//   - recovery: NodeID + RecoveryCredential (Name optional, ignored: the
//     controller keeps the current controller-side name);
//   - repair: NodeID + Repair:true;
//   - resume: PairingID + RequestSecret (all other fields ignored).
//
// Methods maps method name to version (at most 1024 entries).
type PairRequestParams struct {
	Name               string         `json:"name,omitempty"`
	NodeType           string         `json:"nodeType,omitempty"`
	Methods            map[string]int `json:"methods,omitempty"`
	NodeID             string         `json:"nodeId,omitempty"`
	RecoveryCredential string         `json:"recoveryCredential,omitempty"`
	Repair             bool           `json:"repair,omitempty"`
	PairingID          string         `json:"pairingId,omitempty"`
	RequestSecret      string         `json:"requestSecret,omitempty"`
}

// PairRequestResult is the payload of node.pair.request. RequestSecret is
// returned only when the pairing is created; keep it to resume. NodeID,
// Challenge and ChallengeExpiresAtMs are set once approved. Times are Unix ms.
type PairRequestResult struct {
	PairingID            string `json:"pairingId"`
	Code                 string `json:"code"`
	ExpiresAtMs          int64  `json:"expiresAtMs"`
	Status               string `json:"status"`
	Kind                 string `json:"kind"`
	RequestSecret        string `json:"requestSecret,omitempty"`
	NodeID               string `json:"nodeId,omitempty"`
	Name                 string `json:"name,omitempty"`
	Challenge            string `json:"challenge,omitempty"`
	ChallengeExpiresAtMs int64  `json:"challengeExpiresAtMs,omitempty"`
}

// PairDecisionParams are the params of node.pair.approve and
// node.pair.reject: exactly one of PairingID and Code.
type PairDecisionParams struct {
	PairingID string `json:"pairingId,omitempty"`
	Code      string `json:"code,omitempty"`
}

// PairDecisionResult is the payload of node.pair.approve / node.pair.reject.
// RevokesLiveSession is true for an approved repair of a node that holds
// a live session: completing the repair revokes it and closes its socket.
type PairDecisionResult struct {
	PairingID          string `json:"pairingId"`
	Status             string `json:"status"`
	NodeID             string `json:"nodeId,omitempty"`
	Name               string `json:"name,omitempty"`
	RevokesLiveSession bool   `json:"revokesLiveSession,omitempty"`
}

// PairListParams are the params of node.pair.list: none.
type PairListParams struct{}

// PairingInfo is one entry of node.pair.list (no secret material).
type PairingInfo struct {
	PairingID     string         `json:"pairingId"`
	Code          string         `json:"code"`
	Kind          string         `json:"kind"`
	Status        string         `json:"status"`
	Name          string         `json:"name"`
	NodeType      string         `json:"nodeType"`
	NodeID        string         `json:"nodeId,omitempty"`
	Methods       map[string]int `json:"methods,omitempty"`
	RequestedAtMs int64          `json:"requestedAtMs"`
	ExpiresAtMs   int64          `json:"expiresAtMs"`
	// RevokesLiveSession: approving this repair revokes the node's live
	// session (and so needs operator.admin).
	RevokesLiveSession bool `json:"revokesLiveSession,omitempty"`
}

// PairListResult is the payload of node.pair.list, oldest first.
type PairListResult struct {
	Pairings []PairingInfo `json:"pairings"`
}

// ConnectChallengeParams are the params of connect.challenge.
//
// NextRecoveryCredential, optional, is the recovery credential the node
// will hold after the exchange, chosen by the node (at least
// MinRecoveryCredentialBytes random-looking printable ASCII, at most
// MaxRecoveryCredentialBytes) and stored by it before it sends the
// request. Then an answer lost in transit does not lose the identity: the
// node re-pairs with it. Without it the controller chooses one.
type ConnectChallengeParams struct {
	PairingID              string `json:"pairingId"`
	Challenge              string `json:"challenge"`
	NextRecoveryCredential string `json:"nextRecoveryCredential,omitempty"`
}

// Bounds of a node-chosen recovery credential, in bytes.
const (
	MinRecoveryCredentialBytes = 32
	MaxRecoveryCredentialBytes = 256
)

// ValidateRecoveryCredential checks a node-chosen recovery credential:
// MinRecoveryCredentialBytes..MaxRecoveryCredentialBytes bytes of
// printable ASCII (0x21..0x7e). The error names the field, never the value.
func ValidateRecoveryCredential(field, cred string) *Error {
	if len(cred) < MinRecoveryCredentialBytes || len(cred) > MaxRecoveryCredentialBytes {
		return InvalidParams(field, field+" must be 32 to 256 bytes")
	}
	for i := 0; i < len(cred); i++ {
		if cred[i] < 0x21 || cred[i] > 0x7e {
			return InvalidParams(field, field+" must be printable ASCII without spaces")
		}
	}
	return nil
}

// ConnectChallengeResult is the payload of connect.challenge. SessionToken
// is valid until ExpiresAtMs (Unix ms, SessionTTL). RecoveryCredential is
// the node's new recovery credential (every kind; the previous one stops
// working; the NextRecoveryCredential of the request when it gave one):
// store it with the token, replacing the old one atomically.
type ConnectChallengeResult struct {
	NodeID             string `json:"nodeId"`
	Name               string `json:"name"`
	SessionToken       string `json:"sessionToken"`
	ExpiresAtMs        int64  `json:"expiresAtMs"`
	SessionGeneration  uint64 `json:"sessionGeneration"`
	RecoveryCredential string `json:"recoveryCredential,omitempty"`
}

// NodeRenameParams are the params of node.rename (scope operator.write).
type NodeRenameParams struct {
	NodeID string `json:"nodeId"`
	Name   string `json:"name"`
}

// NodeRenameResult is the payload of node.rename.
type NodeRenameResult struct {
	NodeID string `json:"nodeId"`
	Name   string `json:"name"`
}

// PairResolvedEvent is the payload of event node.pair.resolved.
type PairResolvedEvent struct {
	PairingID string `json:"pairingId"`
	Status    string `json:"status"`
	NodeID    string `json:"nodeId,omitempty"`
}

// MaxNodeNameBytes bounds a node name after trimming.
const MaxNodeNameBytes = 128

// MaxAdvertisedMethods bounds the methods map a node advertises.
const MaxAdvertisedMethods = 1024

// NormalizeNodeName trims surrounding whitespace and checks a node name:
// 1..MaxNodeNameBytes bytes of UTF-8 without control or format characters
// (bidi overrides and zero-width characters would make two names look
// the same), and not shaped like a nodeId ("node-" and 32 lowercase hex
// digits): the CLI takes a nodeId or a name wherever it takes a node, so
// a name spelled as the id of a removed node would capture its callers.
// The error names the field, never the value.
func NormalizeNodeName(field, name string) (string, *Error) {
	n := strings.TrimSpace(name)
	if n == "" {
		return "", InvalidParams(field, field+" is required")
	}
	if len(n) > MaxNodeNameBytes || !utf8.ValidString(n) {
		return "", InvalidParams(field, field+" is too long or not UTF-8")
	}
	for _, r := range n {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return "", InvalidParams(field, field+" contains control or invisible format characters")
		}
	}
	if LooksLikeNodeID(n) {
		return "", InvalidParams(field, field+` is shaped like a nodeId ("node-" and 32 hex digits); choose another name`)
	}
	return n, nil
}

// LooksLikeNodeID reports whether s has the shape of a nodeId the
// controller assigns: "node-" followed by 32 lowercase hex digits.
func LooksLikeNodeID(s string) bool {
	h, ok := strings.CutPrefix(s, "node-")
	if !ok || len(h) != 32 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if !(h[i] >= '0' && h[i] <= '9' || h[i] >= 'a' && h[i] <= 'f') {
			return false
		}
	}
	return true
}

// ValidateAdvertisedMethods checks a methods map: at most
// MaxAdvertisedMethods entries, names 1..128 bytes of printable ASCII,
// versions >= 1.
func ValidateAdvertisedMethods(field string, m map[string]int) *Error {
	if len(m) > MaxAdvertisedMethods {
		return InvalidParams(field, field+" has too many entries")
	}
	for name, v := range m {
		if name == "" || len(name) > 128 {
			return InvalidParams(field, field+" has a malformed method name")
		}
		for i := 0; i < len(name); i++ {
			if name[i] <= 0x20 || name[i] >= 0x7f {
				return InvalidParams(field, field+" has a malformed method name")
			}
		}
		if v < 1 {
			return InvalidParams(field, field+" has a version below 1")
		}
	}
	return nil
}
