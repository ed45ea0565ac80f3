package host

import (
	"errors"
	"path/filepath"

	"lemon/hostcalls"
	"lemon/policies/authority"
	"lemon/protocol"
)

// Node enforcement of a request's execution context (docs/POLICY.md,
// "Node enforcement"). bindContext runs once per request, before the
// module; the gate then checks every host call against the result.

// boundContext is what the host enforces of one request.
type boundContext struct {
	// present: the request carried a context.
	present bool
	// caps are the context's capabilities (meaningful when present).
	caps []string
	// auth is handed to host calls (hostcalls.Invocation.Authority).
	auth hostcalls.Authority
}

// errContextInvalid is a context that does not parse strictly.
func errContextInvalid(reason string) *protocol.Error {
	return protocol.InvalidParams("executionContext", "execution context is malformed: "+reason)
}

var (
	errRunMismatch = protocol.DomainError(protocol.CodeForbidden, protocol.DomainContextMismatch,
		"the execution context's runId is not this request's invokeId").WithRetry(false, false)
	errWorkspaceNotCanonical = protocol.DomainError(protocol.CodeForbidden, protocol.DomainContextMismatch,
		"the execution context's workspace root is not a canonical directory on this node").WithRetry(false, false)
	errPolicyDenied = protocol.DomainError(protocol.CodeForbidden, protocol.DomainPolicyDenied,
		"the execution context's policy does not allow this method").WithRetry(false, false)
	errReadOnlyMethod = protocol.DomainError(protocol.CodeForbidden, protocol.DomainWorkspaceReadOnly,
		"the execution context's workspace is read_only; this method is a mutation").WithRetry(false, false)
	errReadOnlyEffect = protocol.DomainError(protocol.CodeForbidden, protocol.DomainWorkspaceReadOnly,
		"the execution context's workspace is read_only; this host call has an effect").WithRetry(false, false)
	errReadMethodEffect = protocol.DomainError(protocol.CodeForbidden, protocol.DomainReadMethodEffect,
		"a read-class method may not make a host call that has an effect").WithRetry(false, false)
)

// contextCache keeps the strict parse of recent contexts, keyed by their
// bytes without the runId (authority.ContextCache): a hit is what
// ParseContext returns. Only the parse is kept; the workspace is resolved
// again on every request (step 5), since the filesystem may change.
var contextCache = authority.NewContextCache(authority.DefaultContextCacheEntries)

// bindContext parses and checks the execution context of req for the
// method spec (spec execution-policy, "Named execution nodes"):
//
//  1. no context (absent or null): the node's own policy alone;
//  2. strict parse (authority.ParseContext, through contextCache): INVALID_PARAMS
//     executionContext;
//  3. runId must be req.InvokeID: FORBIDDEN context_mismatch;
//  4. capabilities: the gate intersects them with the ceiling;
//  5. the workspace root must be its own canonical path on this node (an
//     existing directory with no symlink in it), else FORBIDDEN
//     context_mismatch; it is rebound to that path, and the fs view checks
//     on every host call that it lies inside the node's roots;
//  6. the method is decided again by the context's policy (a deny is
//     FORBIDDEN policy_denied; approvals were the controller's), and a
//     mutation-class method under a read_only workspace is FORBIDDEN
//     workspace_read_only.
func bindContext(req *protocol.InvokeRequest, spec MethodSpec) (boundContext, *protocol.Error) {
	raw := req.ExecutionContext
	if len(raw) == 0 || string(raw) == "null" {
		return boundContext{}, nil
	}
	ec, err := contextCache.Parse(raw)
	if err != nil {
		var ce *authority.ContextError
		if errors.As(err, &ce) && ce.Field != "" && safeField(ce.Field) {
			return boundContext{}, errContextInvalid(ce.Field)
		}
		return boundContext{}, errContextInvalid("not an execution context v1")
	}
	if ec.RunID != req.InvokeID {
		return boundContext{}, errRunMismatch
	}
	if ec.Workspace != nil {
		canon, err := filepath.EvalSymlinks(ec.Workspace.Root)
		if err != nil || canon != ec.Workspace.Root {
			return boundContext{}, errWorkspaceNotCanonical
		}
		if ec, err = ec.Rebind(canon); err != nil {
			return boundContext{}, errWorkspaceNotCanonical
		}
	}
	m := authority.Method{Name: req.Method, Capability: spec.Capability, Uses: spec.Uses, Class: spec.Retry}
	if m.Class == "" {
		m.Class = protocol.RetryMutation
	}
	if d := authority.Decide(ec.Policy, m); d.Verdict == authority.Deny {
		return boundContext{}, errPolicyDenied
	}
	if ec.ReadOnly() && !m.IsRead() {
		return boundContext{}, errReadOnlyMethod
	}
	b := boundContext{present: true, caps: ec.Capabilities, auth: hostcalls.Authority{
		Principal:      ec.Principal,
		ReadOnly:       ec.ReadOnly(),
		MaxFileBytes:   ec.Limits.MaxFileBytes,
		MaxTimeoutMs:   ec.Limits.MaxTimeoutMs,
		MaxOutputBytes: ec.Limits.MaxOutputBytes,
		Commands:       ec.Policy.AllowedCommands,
		Restricted:     ec.Policy.AllowedCommands != nil,
		Blocked:        ec.Policy.BlockedCommands,
		Sandbox:        ec.Policy.Sandbox,
	}}
	if ec.Workspace != nil {
		b.auth.Workspace = ec.Workspace.Root
	}
	return b, nil
}

// methodCaps is the served method's {capability} ∪ uses: the only
// capabilities its host calls may use.
func methodCaps(spec MethodSpec) map[string]bool {
	out := map[string]bool{spec.Capability: true}
	for _, u := range spec.Uses {
		out[u] = true
	}
	return out
}

// safeField reports whether a context key path may be echoed (letters,
// digits, '.', '_', at most 64 bytes).
func safeField(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}
