package controller

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"lemon/host/moduleset"
	"lemon/policies/authority"
	"lemon/protocol"
)

// routeSpec is one node method as the controller routes it: the
// protocol's spec shape (name, version, validator, deadline, ...) plus
// the declared scope, retry class and params schema.
type routeSpec struct {
	protocol.MethodSpec
	// Family is the module that declares the method ("" when routed from
	// protocol alone, with no pinned set).
	Family string
	Scope  string
	// Pure is true for a declared pure read (protocol.RetryRead).
	Pure   bool
	Params *protocol.Schema
	// Capability and Uses are the declared capability and the further
	// capabilities the method's host calls need (abi.MethodSpec); a call
	// carries {Capability} ∪ Uses in its execution context.
	Capability string
	Uses       []string
}

// builtinCapability is the capability of a built-in family's method when
// no set is pinned (the same as the families' manifests declare).
func builtinCapability(name string) string {
	switch protocol.MethodFamily(name) {
	case "host":
		return "hostinfo"
	case "fs":
		if protocol.PureRead(name) {
			return "read"
		}
		return "write"
	case "process":
		return "exec"
	case "secrets":
		return "secrets"
	}
	return ""
}

// methodTable maps a method name to its route.
type methodTable map[string]routeSpec

// FirstPartyFamilies maps each built-in family to the method namespaces
// (node.<ns>.*) it alone may declare. A module of any other family F may
// declare only node.F.* methods, and F may not be one of these namespaces
// nor a namespace the controller serves itself (ReservedNamespaces).
var FirstPartyFamilies = map[string][]string{
	"hostinfo": {"host"},
	"fs":       {"fs"},
	"process":  {"process"},
	"secrets":  {"secrets"},
}

// ReservedNamespaces are node.<ns>.* namespaces of controller methods and
// node-session requests; no module may declare a method in them.
var ReservedNamespaces = []string{"pair", "modules", "invoke", "list", "describe", "rename"}

// protocolTable is the route table without a pinned set: every method
// protocol registers, with protocol's scope rules and pure reads.
func protocolTable() methodTable {
	t := methodTable{}
	for _, n := range protocol.MethodNames() {
		spec, _ := protocol.LookupMethod(n)
		// A method without a scope rule keeps Scope "" and is refused.
		scope, _ := protocol.RequiredScope(n)
		t[n] = routeSpec{MethodSpec: spec, Scope: scope, Pure: protocol.PureRead(n), Capability: builtinCapability(n)}
	}
	return t
}

// buildMethodTable derives the route table from a pinned manifest. It
// refuses (naming module and method) a declaration CheckMethodDeclaration
// refuses; a method two modules claim; a module declaring a method outside
// its namespace (FirstPartyFamilies); a non-first-party module whose family
// is a first-party or reserved namespace; and a declaration of a method
// protocol knows that disagrees with protocol's version, scope or retry
// class (protocol's validators stay the stricter second check).
func buildMethodTable(m moduleset.Manifest) (methodTable, error) {
	t := methodTable{}
	owner := map[string]string{}
	firstPartyNS := map[string]string{}
	for fam, nss := range FirstPartyFamilies {
		for _, ns := range nss {
			firstPartyNS[ns] = fam
		}
	}
	for _, mod := range m.Modules {
		if !familyRE.MatchString(mod.Family) {
			return nil, fmt.Errorf("module set: a module's family is not a name of lowercase letters, digits and _ (%s)", familyRE)
		}
		nss, firstParty := FirstPartyFamilies[mod.Family]
		if !firstParty {
			if f, ok := firstPartyNS[mod.Family]; ok {
				return nil, fmt.Errorf("module set: module %s: family %s is the namespace of first-party family %s", mod.Family, mod.Family, f)
			}
			for _, r := range ReservedNamespaces {
				if mod.Family == r {
					return nil, fmt.Errorf("module set: module %s: family %s is a reserved namespace", mod.Family, mod.Family)
				}
			}
			nss = []string{mod.Family}
		}
		for _, ms := range mod.Methods {
			if err := protocol.CheckMethodDeclaration(ms.Name, ms.Version, ms.Scope, ms.Retry, ms.Params, ms.DeadlineMs); err != nil {
				return nil, fmt.Errorf("module set: module %s: %w", mod.Family, err)
			}
			if err := checkUses(ms.Capability, ms.Uses); err != nil {
				return nil, fmt.Errorf("module set: module %s: method %s: %w", mod.Family, ms.Name, err)
			}
			ns := protocol.MethodFamily(ms.Name)
			if !containsString(nss, ns) {
				if f, ok := firstPartyNS[ns]; ok && f != mod.Family {
					return nil, fmt.Errorf("module set: module %s declares method %s of first-party family %s", mod.Family, ms.Name, f)
				}
				return nil, fmt.Errorf("module set: module %s declares method %s outside its namespace node.%s.*",
					mod.Family, ms.Name, strings.Join(nss, ".*, node."))
			}
			if prev, dup := owner[ms.Name]; dup {
				return nil, fmt.Errorf("module set: method %s is declared by both module %s and module %s", ms.Name, prev, mod.Family)
			}
			owner[ms.Name] = mod.Family
			rs, err := declaredRoute(mod.Family, ms)
			if err != nil {
				return nil, err
			}
			t[ms.Name] = rs
		}
	}
	return t, nil
}

func declaredRoute(family string, ms moduleset.Method) (routeSpec, error) {
	scope := ms.Scope
	if scope == "" {
		scope = protocol.ScopeAdmin
	}
	pure := ms.Retry == protocol.RetryRead
	rs := routeSpec{Family: family, Scope: scope, Pure: pure, Params: ms.Params,
		MethodSpec: protocol.MethodSpec{Name: ms.Name, Version: ms.Version},
		Capability: ms.Capability, Uses: append([]string(nil), ms.Uses...)}
	if d := ms.DeadlineMs; d > 0 {
		rs.Deadline = func(json.RawMessage) time.Duration { return time.Duration(d) * time.Millisecond }
	}
	spec, known := protocol.LookupMethod(ms.Name)
	if !known {
		// A new method in a namespace the protocol gives a scope to (every
		// node.fs.*, node.process.*, node.secrets.* method needs
		// operator.admin) may not declare less.
		if want, ok := protocol.RequiredScope(ms.Name); ok && scopeRank[scope] < scopeRank[want] {
			return rs, fmt.Errorf("module set: module %s: method %s declares scope %s, below the %s its namespace requires",
				family, ms.Name, scope, want)
		}
		return rs, nil
	}
	disagree := func(what string) error {
		return fmt.Errorf("module set: module %s: method %s declares a %s that disagrees with the protocol", family, ms.Name, what)
	}
	if spec.Version != ms.Version {
		return rs, disagree("version")
	}
	if want, ok := protocol.RequiredScope(ms.Name); ok && want != scope {
		return rs, disagree("scope")
	}
	if protocol.PureRead(ms.Name) != pure {
		return rs, disagree("retry class")
	}
	// The spec's own deadline rule (e.g. node.process.run's timeoutMs +
	// 5 s) and its other traits are kept; the declaration adds the schema.
	declared := rs.Deadline
	rs.MethodSpec = spec
	if rs.Deadline == nil {
		rs.Deadline = declared
	}
	return rs, nil
}

// maxUses bounds a method's declared uses (a module declares at most 16
// capabilities in all).
const maxUses = 16

// checkUses refuses a declared uses list that is not a short list of
// distinct capability names other than the method's own capability.
func checkUses(capability string, uses []string) error {
	if len(uses) > maxUses {
		return fmt.Errorf("uses: at most %d capabilities", maxUses)
	}
	seen := map[string]bool{capability: true}
	for _, u := range uses {
		if !authority.ValidCapability(u) {
			return fmt.Errorf("uses: a malformed capability name (want ^[a-z][a-z0-9_]{0,31}$, not all or none)")
		}
		if seen[u] {
			return fmt.Errorf("uses: a capability given twice, or the method's own")
		}
		seen[u] = true
	}
	return nil
}

// scopeRank orders the scopes a method may declare.
var scopeRank = map[string]int{protocol.ScopeRead: 1, protocol.ScopeWrite: 2, protocol.ScopeAdmin: 3}

// familyRE is a module family: the name its methods' namespace, its set
// file and its log records carry.
var familyRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// names lists the table's methods, sorted.
func (t methodTable) names() []string {
	out := make([]string, 0, len(t))
	for n := range t {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
