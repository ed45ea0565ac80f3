package protocol

import (
	"errors"
	"fmt"
)

// Protocol error codes (docs/PROTOCOL.md). A response's error.code is always one of these.
const (
	CodeInvalidRequest    = "INVALID_REQUEST"
	CodeInvalidParams     = "INVALID_PARAMS"
	CodeMethodNotFound    = "METHOD_NOT_FOUND"
	CodeUnauthorized      = "UNAUTHORIZED"
	CodeForbidden         = "FORBIDDEN"
	CodeNotFound          = "NOT_FOUND"
	CodeConflict          = "CONFLICT"
	CodeRateLimited       = "RATE_LIMITED"
	CodeTimeout           = "TIMEOUT"
	CodeInternal          = "INTERNAL_ERROR"
	CodeNotImplemented    = "NOT_IMPLEMENTED"
	CodeHandshakeRequired = "HANDSHAKE_REQUIRED"
	CodeAlreadyConnected  = "ALREADY_CONNECTED"
	CodeUnavailable       = "UNAVAILABLE"
)

// Domain codes from the spec; they travel in error.details.code.
const (
	DomainPathNotAllowed           = "path_not_allowed"
	DomainNotFound                 = "not_found"
	DomainNotDirectory             = "not_directory"
	DomainNotRegularFile           = "not_regular_file"
	DomainRevisionConflict         = "revision_conflict"
	DomainAlreadyExists            = "already_exists"
	DomainStalePreview             = "stale_preview"
	DomainPreviewTooLarge          = "preview_too_large"
	DomainFilesystemOutcomeUnknown = "filesystem_outcome_unknown"
	DomainFilesystemBusy           = "filesystem_busy"
	DomainAtomicMoveUnavailable    = "atomic_move_unavailable"
	DomainProcessReceiptLimit      = "process_receipt_limit"
	DomainSecretOperationConflict  = "secret_operation_conflict"
	DomainSecretReceiptCapacity    = "secret_receipt_capacity"
	DomainPrivateProofAckChanged   = "private_proof_acknowledgement_changed"
	DomainCapabilityDenied         = "capability_denied"
	DomainRateLimited              = "rate_limited"
	DomainPayloadTooLarge          = "payload_too_large"
	DomainModuleRejected           = "module_rejected"
	DomainModuleTrapped            = "module_trapped"
	// DomainModuleRefused: the method's module failed verification on the
	// node and was refused alone (UNAVAILABLE; docs/PROTOCOL.md, "Module set").
	DomainModuleRefused          = "module_refused"
	DomainMeasurementUnavailable = "measurement_unavailable"
	DomainNodeOffline            = "node_offline"
	// DomainTransferNotRouted: a bulk transfer (node.fs.transfer.*) to a
	// node whose socket another controller of the cluster holds
	// (UNAVAILABLE, retry-safe; docs/CLUSTER.md).
	DomainTransferNotRouted = "transfer_not_routed"
	// DomainPermissionDenied: the worker OS account was refused (fs and process).
	DomainPermissionDenied = "permission_denied"
)

// Domain codes of the node's enforcement of an execution context
// (docs/POLICY.md, "Node enforcement").
const (
	// DomainWorkspaceReadOnly: a mutation method or an effect host call
	// under a read_only workspace (FORBIDDEN).
	DomainWorkspaceReadOnly = "workspace_read_only"
	// DomainReadMethodEffect: an effect host call made while serving a
	// read-class method (FORBIDDEN).
	DomainReadMethodEffect = "read_method_effect"
	// (DomainLimitExceeded, protocol/approvals.go, also answers a request
	// beyond an execution-context limit on the node: max_file_bytes,
	// max_timeout_ms, max_output_bytes.)
	// DomainSandboxUnavailable: the context asks for a sandboxed run and
	// the node cannot give the run a cgroup of its own (FORBIDDEN).
	DomainSandboxUnavailable = "sandbox_unavailable"
	// DomainContextMismatch: the context's runId is not the request's
	// invokeId, or its workspace is not canonical on this node (FORBIDDEN).
	DomainContextMismatch = "context_mismatch"
)

// ErrorDetails carries the machine-readable classification of an error.
// Only bounded classifications belong here: never file bytes, secret names
// or values, argv, or raw OS error text.
type ErrorDetails struct {
	Code                   string `json:"code,omitempty"`
	RetrySafe              *bool  `json:"retrySafe,omitempty"`
	MutationMayHaveApplied *bool  `json:"mutationMayHaveApplied,omitempty"`
	// Field names the offending request field for INVALID_PARAMS, when known.
	Field string `json:"field,omitempty"`
}

// Error is the error object of a failed response:
// {"code":"CONFLICT","message":"...","details":{"code":"revision_conflict"}}.
// Message is safe to show a user; it never contains request content.
type Error struct {
	Code    string        `json:"code"`
	Message string        `json:"message"`
	Details *ErrorDetails `json:"details,omitempty"`
}

func (e *Error) Error() string {
	if e.Details != nil && e.Details.Code != "" {
		return fmt.Sprintf("%s (%s): %s", e.Code, e.Details.Code, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// DomainCode returns error.details.code or "".
func (e *Error) DomainCode() string {
	if e == nil || e.Details == nil {
		return ""
	}
	return e.Details.Code
}

// Errorf builds an Error with a protocol code and a safe message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// DomainError builds an Error with a protocol code, a domain code in details
// and a safe message.
func DomainError(code, domain, message string) *Error {
	return &Error{Code: code, Message: message, Details: &ErrorDetails{Code: domain}}
}

// InvalidParams reports a bad request field. field is the parameter name
// (never its value).
func InvalidParams(field, message string) *Error {
	return &Error{Code: CodeInvalidParams, Message: message, Details: &ErrorDetails{Field: field}}
}

// WithRetry sets details.retrySafe and details.mutationMayHaveApplied.
func (e *Error) WithRetry(retrySafe, mutationMayHaveApplied bool) *Error {
	if e.Details == nil {
		e.Details = &ErrorDetails{}
	}
	e.Details.RetrySafe = &retrySafe
	e.Details.MutationMayHaveApplied = &mutationMayHaveApplied
	return e
}

// AfterEffect returns e as it must read once its request has had an
// effect: a copy with retrySafe:false and mutationMayHaveApplied:true, the
// code, message and domain code kept. e itself is not changed (errors are
// often shared values). nil stays nil.
func AfterEffect(e *Error) *Error {
	if e == nil {
		return nil
	}
	c := *e
	if e.Details != nil {
		d := *e.Details
		c.Details = &d
	} else {
		c.Details = &ErrorDetails{}
	}
	return c.WithRetry(false, true)
}

// AsError converts any error into a protocol Error. A *Error anywhere in the
// chain is returned as is; anything else becomes INTERNAL_ERROR with a
// generic message, because raw error text may hold paths or OS detail.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return &Error{Code: CodeInternal, Message: "internal error"}
}
