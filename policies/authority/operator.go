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

// String renders the policy as the TOML table it was parsed from (keys in
// canonical form), for `lemon policy check`.
func (o OperatorPolicy) String() string {
	var b strings.Builder
	pj, _ := o.Policy.MarshalJSON()
	fmt.Fprintf(&b, "# tool policy (JSON form): %s\n", pj)
	if o.Capabilities == nil {
		b.WriteString("capabilities = \"all\"\n")
	} else {
		q := make([]string, len(o.Capabilities))
		for i, c := range o.Capabilities {
			q[i] = fmt.Sprintf("%q", c)
		}
		fmt.Fprintf(&b, "capabilities = [%s]\n", strings.Join(q, ", "))
	}
	if o.Workspace != nil {
		fmt.Fprintf(&b, "workspace = { root = %q, mode = %q }\n", o.Workspace.Root, o.Workspace.Mode)
	}
	return b.String()
}
