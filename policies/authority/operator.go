package authority

import (
	"fmt"
	"strings"
)

// OperatorPolicy is one operator entry's authority as the controller
// holds it (docs/POLICY.md, "Operator policies"): the tool policy, the
// capabilities its requests may carry (nil is every capability), and an
// optional workspace its requests are confined to.
type OperatorPolicy struct {
	Policy       ToolPolicy
	Capabilities []string
	Workspace    *Workspace
}

// FullAccessOperator is the explicit trusted default for an operator entry
// without a policy table.
func FullAccessOperator() OperatorPolicy { return OperatorPolicy{Policy: FullAccess()} }

var operatorKeys = append(append([]string{}, policyKeys...), "capabilities", "workspace")

// ParseOperatorPolicy validates an operator's policy table: the tool
// policy keys, plus capabilities ("all" or a list of capability names)
// and a workspace table {root, mode} (mode defaults to read_write). A nil
// map is ErrPolicyAbsent. Errors are *ParseError naming the key
// (workspace.root, capabilities[2], ...).
func ParseOperatorPolicy(m map[string]any) (OperatorPolicy, error) {
	if m == nil {
		return OperatorPolicy{}, ErrPolicyAbsent
	}
	if err := checkKeys(m, operatorKeys, ""); err != nil {
		return OperatorPolicy{}, err
	}
	tool := map[string]any{}
	for k, v := range m {
		if k != "capabilities" && k != "workspace" {
			tool[k] = v
		}
	}
	p, err := parseTable(tool, policyKeys, "")
	if err != nil {
		return OperatorPolicy{}, err
	}
	op := OperatorPolicy{Policy: p}
	if v, ok := m["capabilities"]; ok {
		if s, isStr := v.(string); isStr {
			if s != "all" {
				return op, perr("capabilities", `must be "all" or a list of capability names`)
			}
		} else {
			xs, err := stringList("capabilities", v)
			if err != nil {
				return op, err
			}
			op.Capabilities = []string{}
			for i, c := range xs {
				if !ValidCapability(c) {
					return op, perr(fmt.Sprintf("capabilities[%d]", i), "malformed capability name (want ^[a-z][a-z0-9_]{0,31}$; \"all\" is not a list item)")
				}
				if !contains(op.Capabilities, c) {
					op.Capabilities = append(op.Capabilities, c)
				}
			}
			sortStrings(op.Capabilities)
		}
	}
	if v, ok := m["workspace"]; ok {
		wm, ok := v.(map[string]any)
		if !ok {
			return op, perr("workspace", "must be a table {root, mode}")
		}
		if err := checkKeys(wm, []string{"root", "mode"}, "workspace."); err != nil {
			return op, err
		}
		w := Workspace{Mode: WorkspaceReadWrite}
		root, ok := wm["root"].(string)
		if !ok {
			return op, perr("workspace.root", "required: a clean absolute path")
		}
		if err := CheckRoot(root); err != nil {
			return op, perr("workspace.root", "%s", err.Error())
		}
		w.Root = root
		if mv, ok := wm["mode"]; ok {
			mode, isStr := mv.(string)
			if !isStr || (mode != WorkspaceReadOnly && mode != WorkspaceReadWrite) {
				return op, perr("workspace.mode", `must be "read_only" or "read_write"`)
			}
			w.Mode = mode
		}
		op.Workspace = &w
	}
	return op, nil
}

// Grants reports whether the operator's capabilities include c.
func (o OperatorPolicy) Grants(c string) bool {
	return o.Capabilities == nil || contains(o.Capabilities, c)
}

// CallCapabilities returns the capabilities a call of m carries: the
// method's {Capability} ∪ Uses, intersected with the operator's
// (docs/POLICY.md, "Execution context"), sorted.
func (o OperatorPolicy) CallCapabilities(m Method) []string {
	out := []string{}
	for _, c := range append([]string{m.Capability}, m.Uses...) {
		if c != "" && o.Grants(c) && !contains(out, c) {
			out = append(out, c)
		}
	}
	sortStrings(out)
	return out
}

// String renders the policy as the body of its TOML table, every key in
// canonical form (a profile's rules folded in), for `lemon policy check`.
func (o OperatorPolicy) String() string {
	var b strings.Builder
	p := o.Policy
	if p.Profile != "" {
		fmt.Fprintf(&b, "# profile %s, its rules folded into the keys below\n", p.Profile)
	}
	list := func(k string, xs []string, keepEmpty bool) {
		if xs == nil || (len(xs) == 0 && !keepEmpty) {
			return
		}
		fmt.Fprintf(&b, "%s = [%s]\n", k, quoted(xs))
	}
	if p.Allow == nil {
		b.WriteString("allow = \"all\"\n")
	}
	list("allow", p.Allow, true)
	list("deny", p.Deny, false)
	list("blocked_tools", p.BlockedTools, false)
	list("require_approval", p.RequireApproval, false)
	if len(p.ApproveOnce) > 0 {
		q := make([]string, len(p.ApproveOnce))
		for i, s := range p.ApproveOnce {
			q[i] = fmt.Sprintf("%q = \"once\"", s)
		}
		fmt.Fprintf(&b, "approvals = { %s }\n", strings.Join(q, ", "))
	}
	fmt.Fprintf(&b, "no_reply = %t\n", p.NoReply)
	if p.AllowedCommands == nil {
		b.WriteString("allowed_commands = \"all\"\n")
	}
	list("allowed_commands", p.AllowedCommands, true)
	list("blocked_commands", p.BlockedCommands, false)
	fmt.Fprintf(&b, "max_file_bytes = %d\nmax_timeout_ms = %d\nmax_output_bytes = %d\nsandbox = %t\n",
		p.Limits.MaxFileBytes, p.Limits.MaxTimeoutMs, p.Limits.MaxOutputBytes, p.Sandbox)
	if o.Capabilities == nil {
		b.WriteString("capabilities = \"all\"\n")
	} else {
		fmt.Fprintf(&b, "capabilities = [%s]\n", quoted(o.Capabilities))
	}
	if o.Workspace != nil {
		fmt.Fprintf(&b, "workspace = { root = %q, mode = %q }\n", o.Workspace.Root, o.Workspace.Mode)
	}
	return b.String()
}

func quoted(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}
