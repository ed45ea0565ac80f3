package authority

import "path"

// Verdict is what Decide answers, from widest to strictest.
type Verdict int

const (
	// Allow: the call may proceed.
	Allow Verdict = iota
	// NeedsApproval: the call is held until an approver decides
	// (Decision.Mode says "once" or "always").
	NeedsApproval
	// Deny: the call is refused.
	Deny
)

func (v Verdict) String() string {
	switch v {
	case Allow:
		return "allow"
	case NeedsApproval:
		return "needs_approval"
	}
	return "deny"
}

// Decision is Decide's answer: the verdict, the approval mode for
// NeedsApproval, and the rule that decided (a policy key: "blocked_tools",
// "deny", "allow", "require_approval", "approvals"; "" for a plain allow)
// with the selector that matched ("" for an allow-list miss).
type Decision struct {
	Verdict  Verdict
	Mode     string
	Rule     string
	Selector string
}

// Decide applies p to one method (docs/POLICY.md, "Decide"), in order:
// blocked_tools, then deny (either refuses); a method outside a non-nil
// allow list is refused; then require_approval ("always") and approvals
// ("once") hold it; otherwise it is allowed.
func Decide(p ToolPolicy, m Method) Decision {
	if s, ok := firstMatch(p.BlockedTools, m); ok {
		return Decision{Verdict: Deny, Rule: "blocked_tools", Selector: s}
	}
	if s, ok := firstMatch(p.Deny, m); ok {
		return Decision{Verdict: Deny, Rule: "deny", Selector: s}
	}
	if p.Allow != nil {
		if _, ok := firstMatch(p.Allow, m); !ok {
			return Decision{Verdict: Deny, Rule: "allow"}
		}
	}
	if s, ok := firstMatch(p.RequireApproval, m); ok {
		return Decision{Verdict: NeedsApproval, Mode: ModeAlways, Rule: "require_approval", Selector: s}
	}
	if s, ok := firstMatch(p.ApproveOnce, m); ok {
		return Decision{Verdict: NeedsApproval, Mode: ModeOnce, Rule: "approvals", Selector: s}
	}
	return Decision{Verdict: Allow}
}

// Stricter reports whether d refuses more than o: Deny > NeedsApproval
// "always" > NeedsApproval "once" > Allow.
func (d Decision) Stricter(o Decision) bool { return d.rank() > o.rank() }

func (d Decision) rank() int {
	switch {
	case d.Verdict == Deny:
		return 3
	case d.Verdict == NeedsApproval && d.Mode == ModeAlways:
		return 2
	case d.Verdict == NeedsApproval:
		return 1
	}
	return 0
}

func firstMatch(sels []string, m Method) (string, bool) {
	for _, s := range sels {
		if matches(s, m) {
			return s, true
		}
	}
	return "", false
}

// AllowsCommand reports whether p lets node.process.run start argv0, and
// when not, the rule that refused ("blocked_commands" or
// "allowed_commands"). An argv0 equal to a blocked entry, or with the same
// base name, is refused; then a nil allow list allows any, and otherwise
// argv0 must be an entry exactly: a bare name allows only that bare name,
// a path only that path (docs/POLICY.md, "Commands").
func AllowsCommand(p ToolPolicy, argv0 string) (ok bool, rule string) {
	if argv0 == "" {
		return false, "allowed_commands"
	}
	base := path.Base(argv0)
	for _, b := range p.BlockedCommands {
		if b == argv0 || path.Base(b) == base {
			return false, "blocked_commands"
		}
	}
	if p.AllowedCommands == nil {
		return true, ""
	}
	if contains(p.AllowedCommands, argv0) {
		return true, ""
	}
	return false, "allowed_commands"
}
