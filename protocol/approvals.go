package protocol

// Approvals: a node request that the operator's policy marks
// require_approval (or approvals = {selector = "once"|"always"}) is held at
// the controller until another operator entry holding operator.approvals
// approves or denies it (docs/PROTOCOL.md, "Approvals"; docs/POLICY.md).
const (
	// MethodApprovalList lists the held requests (scope operator.approvals).
	MethodApprovalList = "approval.list"
	// MethodApprovalDecide approves or denies one (scope operator.approvals).
	MethodApprovalDecide = "approval.decide"
	// EventApprovalRequested is sent to the requester's connection when its
	// request is held, and to every connection holding
	// operator.approvals; the payload is an ApprovalInfo.
	EventApprovalRequested = "approval.requested"
	// EventApprovalResolved is sent to the requester's connection when its
	// held request is approved, denied or expires; the payload is an
	// ApprovalResolvedEvent.
	EventApprovalResolved = "approval.resolved"
)

// Approval statuses.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalExpired  = "expired"
)

// Approval decisions of approval.decide.
const (
	DecisionApprove = "approve"
	DecisionDeny    = "deny"
)

// Domain codes of authority refusals (error.details.code). Every one is
// answered before anything is sent to a node: retrySafe and
// mutationMayHaveApplied are false unless noted.
const (
	// DomainPolicyDenied: the operator's tool policy refuses the method
	// (FORBIDDEN).
	DomainPolicyDenied = "policy_denied"
	// DomainCommandDenied: node.process.run's argv[0] is not an allowed
	// command, or is blocked (FORBIDDEN).
	DomainCommandDenied = "command_denied"
	// DomainLimitExceeded: a request field exceeds a policy limit
	// (timeoutMs over max_timeout_ms, maxOutputBytes over
	// max_output_bytes; FORBIDDEN, details.field names it).
	DomainLimitExceeded = "limit_exceeded"
	// DomainContextInvalid: the req frame's executionContext is malformed
	// (INVALID_REQUEST).
	DomainContextInvalid = "context_invalid"
	// DomainContextWider: the executionContext asks for more than the
	// operator holds (FORBIDDEN).
	DomainContextWider = "context_wider"
	// DomainPrincipalMismatch: the executionContext names another
	// principal (FORBIDDEN).
	DomainPrincipalMismatch = "principal_mismatch"
	// DomainApprovalDenied: an approver denied the held request (FORBIDDEN).
	DomainApprovalDenied = "approval_denied"
	// DomainApprovalTimeout: no approver decided within approval_timeout_ms
	// (TIMEOUT, retrySafe:true).
	DomainApprovalTimeout = "approval_timeout"
	// DomainTooManyApprovals: too many requests are held (in all or for
	// this principal; RATE_LIMITED, retrySafe:true).
	DomainTooManyApprovals = "too_many_pending_approvals"
	// DomainSelfApproval: an approver tried to decide its own principal's
	// request (FORBIDDEN).
	DomainSelfApproval = "self_approval"
	// DomainApprovalNotFound: approval.decide named no held request
	// (NOT_FOUND).
	DomainApprovalNotFound = "approval_not_found"
	// DomainApprovalDecided: in a cluster, another approver (on this or
	// another controller) decided the held request first, or it expired
	// as this decision was made (CONFLICT; docs/CLUSTER.md, "Approvals").
	DomainApprovalDecided = "approval_already_decided"
)

// ApprovalInfo is one held request, content-free: the method, node and
// principal, the times (Unix ms), the mode ("once" or "always"), and
// SHA-256 digests (hex) of the params and, for node.process.run, of the
// argv and the cwd. It never carries params, paths, argv or secrets.
type ApprovalInfo struct {
	ApprovalID    string `json:"approvalId"`
	Status        string `json:"status"`
	Method        string `json:"method"`
	NodeID        string `json:"nodeId"`
	Principal     string `json:"principal"`
	Mode          string `json:"mode"`
	RequestedAtMs int64  `json:"requestedAtMs"`
	ExpiresAtMs   int64  `json:"expiresAtMs"`
	ParamsSHA256  string `json:"paramsSha256"`
	ArgvSHA256    string `json:"argvSha256,omitempty"`
	CwdSHA256     string `json:"cwdSha256,omitempty"`
}

// ApprovalListParams are the params of approval.list: none.
type ApprovalListParams struct{}

// ApprovalListResult is the payload of approval.list: the held requests,
// oldest first.
type ApprovalListResult struct {
	Approvals []ApprovalInfo `json:"approvals"`
}

// ApprovalDecideParams are the params of approval.decide: Decision is
// DecisionApprove or DecisionDeny.
type ApprovalDecideParams struct {
	ApprovalID string `json:"approvalId"`
	Decision   string `json:"decision"`
}

// ApprovalDecideResult is the payload of approval.decide.
type ApprovalDecideResult struct {
	ApprovalID string `json:"approvalId"`
	Status     string `json:"status"`
}

// ApprovalResolvedEvent is the payload of EventApprovalResolved.
type ApprovalResolvedEvent struct {
	ApprovalID string `json:"approvalId"`
	Status     string `json:"status"`
}
