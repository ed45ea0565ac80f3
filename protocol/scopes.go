package protocol

import "strings"

// Operator scopes (docs/PROTOCOL.md).
const (
	ScopeRead      = "operator.read"
	ScopeWrite     = "operator.write"
	ScopeAdmin     = "operator.admin"
	ScopePairing   = "operator.pairing"
	ScopeApprovals = "operator.approvals"
	// Node session scopes.
	ScopeNodeInvoke = "node.invoke"
	ScopeNodeEvent  = "node.event"
)

// OperatorScopes lists every operator scope.
var OperatorScopes = []string{ScopeRead, ScopeWrite, ScopeAdmin, ScopePairing, ScopeApprovals}

// RequiredScope returns the operator scope a method needs, per the spec:
// node.host.info needs operator.read; every node.fs.*, node.secrets.* and
// node.process.* needs operator.admin (reads included); node.list and
// node.describe read; node.rename write; node.pair.* pairing;
// approval.list and approval.decide operator.approvals. ok is false
// for a method with no scope rule (callers refuse it).
func RequiredScope(method string) (scope string, ok bool) {
	switch {
	case method == "node.host.info", method == "node.list", method == "node.describe",
		method == MethodModulesStatus:
		return ScopeRead, true
	case method == "node.rename":
		return ScopeWrite, true
	case strings.HasPrefix(method, "node.fs."), strings.HasPrefix(method, "node.secrets."),
		strings.HasPrefix(method, "node.process."), method == "node.invoke":
		return ScopeAdmin, true
	case method == "node.pair.approve", method == "node.pair.reject", method == "node.pair.list",
		method == MethodApprovalList, method == MethodApprovalDecide:
		return ScopeApprovals, true
	case strings.HasPrefix(method, "node.pair."), method == "connect.challenge":
		return ScopePairing, true
	}
	return "", false
}

// HasScope reports whether granted includes want. operator.admin implies
// every other operator scope.
func HasScope(granted []string, want string) bool {
	for _, g := range granted {
		if g == want || (g == ScopeAdmin && strings.HasPrefix(want, "operator.")) {
			return true
		}
	}
	return false
}
