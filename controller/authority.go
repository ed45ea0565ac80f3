package controller

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"lemon/policies/authority"
	"lemon/protocol"
)

// The controller side of authority (docs/POLICY.md, "Where each rule is
// enforced"): every node request gets an execution context built from the
// authenticated operator entry, narrowed by the caller's executionContext
// when given; the operator's policy decides the method, and for
// node.process.run the command and limits, before anything is sent. A
// method the policy holds for approval waits in approvals.go.

// methodOf describes a routed method for authority.Decide.
func methodOf(spec routeSpec) authority.Method {
	m := authority.Method{Name: spec.Name, Capability: spec.Capability, Uses: spec.Uses, Class: authority.ClassMutation}
	if spec.Pure {
		m.Class = authority.ClassRead
	}
	return m
}

func refuse(domain, format string, args ...any) *protocol.Error {
	return protocol.DomainError(protocol.CodeForbidden, domain, fmt.Sprintf(format, args...)).WithRetry(false, false)
}

// requestContext builds the context of one request of this operator
// connection: principal the operator entry, the given runId, the
// operator's policy and workspace, capabilities {capability} ∪ uses of m
// intersected with the operator's; then the caller's narrowing ec, if any.
func (c *conn) requestContext(runID string, m authority.Method, ec json.RawMessage) (authority.ExecutionContext, *protocol.Error) {
	op := c.op.policy
	ctx, err := authority.New(authority.ExecutionContext{RunID: runID, Principal: c.op.name, Provenance: "controller",
		Policy: op.Policy, Workspace: op.Workspace, Capabilities: op.CallCapabilities(m)})
	if err != nil {
		// Not reached: the operator's name and policy were validated.
		return ctx, protocol.Errorf(protocol.CodeInternal, "internal error")
	}
	if t := bytes.TrimSpace(ec); len(t) == 0 || string(t) == "null" {
		return ctx, nil
	}
	n, err := authority.ParseNarrowing(ec)
	if err == nil {
		ctx, err = ctx.Narrow(n)
	}
	if err != nil {
		return ctx, contextError(err)
	}
	return ctx, nil
}

// contextError maps an authority.ContextError to the wire: malformed is
// INVALID_REQUEST context_invalid, wider and another principal FORBIDDEN.
// The message names the field, never a value.
func contextError(err error) *protocol.Error {
	var ce *authority.ContextError
	if !errors.As(err, &ce) {
		return protocol.DomainError(protocol.CodeInvalidRequest, protocol.DomainContextInvalid,
			"executionContext is malformed").WithRetry(false, false)
	}
	field := "executionContext"
	if ce.Field != "" {
		field += "." + ce.Field
	}
	var e *protocol.Error
	switch ce.Code {
	case authority.CodePrincipalMismatch:
		e = refuse(protocol.DomainPrincipalMismatch, "executionContext.principal is not the authenticated operator")
	case authority.CodeContextWider, authority.CodeWorkspaceEscape:
		e = refuse(protocol.DomainContextWider, "%s asks for more than the operator holds", field)
	default:
		e = protocol.DomainError(protocol.CodeInvalidRequest, protocol.DomainContextInvalid,
			"executionContext is malformed: "+boundedReason(ce.Reason)).WithRetry(false, false)
	}
	e.Details.Field = field
	if len(e.Details.Field) > 64 {
		e.Details.Field = "executionContext"
	}
	return e
}

// boundedReason keeps a parser reason short and printable.
func boundedReason(s string) string {
	if len(s) > 200 || !printable(s) {
		return "see docs/POLICY.md"
	}
	return s
}

// authorizeNode runs every controller-side check of a node request whose
// params passed validation: the context (and the caller's narrowing), the
// method's capability, Decide, and for node.process.run the command and
// limits; a request the policy holds waits for its approval. It answers
// the caller itself when a check refuses (nothing was sent to the node)
// and then returns ok false; else it returns the context's JSON for the
// invocation.
func (c *conn) authorizeNode(id string, spec routeSpec, nodeID, invokeID string, params, ec json.RawMessage) (ctxJSON []byte, ok bool) {
	m := methodOf(spec)
	ctx, e := c.requestContext(invokeID, m, ec)
	if e == nil {
		e = checkCall(ctx, m, params)
	}
	if e != nil {
		c.respondErr(id, e)
		return nil, false
	}
	enc, err := json.Marshal(ctx)
	if err != nil {
		c.respondErr(id, protocol.DomainError(protocol.CodeInvalidRequest, protocol.DomainContextInvalid,
			"the execution context is longer than 64 KiB").WithRetry(false, false))
		return nil, false
	}
	d := authority.Decide(ctx.Policy, m)
	if d.Verdict == authority.NeedsApproval {
		// A call for a node the controller does not know would be refused
		// after the approval: it is refused now, never shown to an
		// approver (docs/POLICY.md, "Approvals").
		if !c.s.reg.known(nodeID) {
			c.respondErr(id, errUnknownNode())
			return nil, false
		}
		if e := c.s.approvals.hold(c, ctx, d.Mode, spec.Name, nodeID, params); e != nil {
			c.respondErr(id, e)
			return nil, false
		}
	}
	return enc, true
}

// checkCall applies ctx to one call of m: the method's own capability must
// be carried, the policy must not deny it, and node.process.run's argv[0],
// timeoutMs and maxOutputBytes must be within the policy's command lists
// and limits; node.fs.write's data within max_file_bytes.
func checkCall(ctx authority.ExecutionContext, m authority.Method, params json.RawMessage) *protocol.Error {
	if m.Capability != "" && !ctx.HasCapability(m.Capability) {
		return refuse(protocol.DomainCapabilityDenied, "the operator's capabilities do not include %s, which %s needs", m.Capability, m.Name)
	}
	if d := authority.Decide(ctx.Policy, m); d.Verdict == authority.Deny {
		return refuse(protocol.DomainPolicyDenied, "the operator's policy refuses %s (rule %s)", m.Name, d.Rule)
	}
	switch m.Name {
	case protocol.MethodProcessRun:
		var p struct {
			Argv           []string `json:"argv"`
			TimeoutMs      int64    `json:"timeoutMs"`
			MaxOutputBytes int64    `json:"maxOutputBytes"`
		}
		if json.Unmarshal(params, &p) != nil || len(p.Argv) == 0 {
			return protocol.InvalidParams("argv", "argv is required")
		}
		if ok, rule := authority.AllowsCommand(ctx.Policy, p.Argv[0]); !ok {
			return refuse(protocol.DomainCommandDenied, "argv[0] is not allowed by the operator's %s", rule)
		}
		if l := ctx.Limits.MaxTimeoutMs; l > 0 && p.TimeoutMs > l {
			e := refuse(protocol.DomainLimitExceeded, "timeoutMs is above the operator's max_timeout_ms (%d)", l)
			e.Details.Field = "timeoutMs"
			return e
		}
		if l := ctx.Limits.MaxOutputBytes; l > 0 && p.MaxOutputBytes > l {
			e := refuse(protocol.DomainLimitExceeded, "maxOutputBytes is above the operator's max_output_bytes (%d)", l)
			e.Details.Field = "maxOutputBytes"
			return e
		}
	case methodFSWrite:
		if l := ctx.Limits.MaxFileBytes; l > 0 {
			var p struct {
				DataBase64 string `json:"dataBase64"`
			}
			if json.Unmarshal(params, &p) == nil && base64Len(p.DataBase64) > l {
				e := refuse(protocol.DomainLimitExceeded, "the data is longer than the operator's max_file_bytes (%d)", l)
				e.Details.Field = "dataBase64"
				return e
			}
		}
	}
	return nil
}

// base64Len is the decoded length of standard padded base64 s.
func base64Len(s string) int64 {
	n := int64(len(s)) / 4 * 3
	if len(s) >= 1 && s[len(s)-1] == '=' {
		n--
	}
	if len(s) >= 2 && s[len(s)-2] == '=' {
		n--
	}
	return n
}

// controllerMutations are the controller methods that change state; the
// operator's policy decides them as mutations (class:mutation, with no
// capability). Only a Deny counts: controller methods are never held for
// approval (docs/POLICY.md, "Controller methods").
var controllerMutations = map[string]bool{
	protocol.MethodNodeRename:     true,
	protocol.MethodPairApprove:    true,
	protocol.MethodPairReject:     true,
	protocol.MethodApprovalDecide: true,
}

// authorizeController checks a controller method: the caller's
// executionContext, when given, must be well-formed and not wider; a
// method that changes state must not be denied by the (narrowed) policy.
// It answers the refusal itself.
func (c *conn) authorizeController(id, method string, ec json.RawMessage) bool {
	if c.op == nil {
		return true
	}
	if t := bytes.TrimSpace(ec); len(t) == 0 || string(t) == "null" {
		// No narrowing: only a mutation is decided, on the entry's policy.
		if !controllerMutations[method] {
			return true
		}
		d := authority.Decide(c.op.policy.Policy, authority.Method{Name: method, Class: authority.ClassMutation})
		if d.Verdict == authority.Deny {
			c.respondErr(id, refuse(protocol.DomainPolicyDenied, "the operator's policy refuses %s (rule %s)", method, d.Rule))
			return false
		}
		return true
	}
	m := authority.Method{Name: method, Class: authority.ClassMutation}
	if !controllerMutations[method] {
		m.Class = authority.ClassRead
	}
	ctx, e := c.requestContext("req-"+randomHex(8), m, ec)
	if e == nil && controllerMutations[method] {
		if d := authority.Decide(ctx.Policy, m); d.Verdict == authority.Deny {
			e = refuse(protocol.DomainPolicyDenied, "the operator's policy refuses %s (rule %s)", method, d.Rule)
		}
	}
	if e != nil {
		c.respondErr(id, e)
		return false
	}
	return true
}

// mayDecide reports whether this operator's policy lets it call the
// controller mutation method (no caller narrowing applies).
func (c *conn) mayDecide(method string) bool {
	return authority.Decide(c.op.policy.Policy, authority.Method{Name: method, Class: authority.ClassMutation}).Verdict != authority.Deny
}

// sha256Hex is the lowercase hex SHA-256 of b.
func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

const methodFSWrite = "node.fs.write"
