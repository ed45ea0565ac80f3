package authority

// Profiles (docs/POLICY.md, "Profiles"). The spec's tools are lemon's node
// methods; each profile is a ToolPolicy over method names, globs,
// capabilities and classes:
//
//	full_access          everything
//	read_only            deny class:mutation (reads only: fs list/stat/read,
//	                     host info, process get, secrets list/receipt, and
//	                     read-class module methods)
//	safe_mode            every mutation held for approval ("always"), runs
//	                     sandboxed
//	minimal_core         allow node.host.info, node.fs.*, node.process.*
//	                     (the core families; no secrets, no module methods)
//	no_external          block capability:exec and capability:secrets
//	                     (nothing runs outside the wasm sandbox, nothing
//	                     reaches stored credentials)
//	subagent_restricted  allow node.host.info and node.fs.*; deny
//	                     node.fs.delete; runs sandboxed, no replies
const (
	ProfileFullAccess         = "full_access"
	ProfileReadOnly           = "read_only"
	ProfileSafeMode           = "safe_mode"
	ProfileMinimalCore        = "minimal_core"
	ProfileNoExternal         = "no_external"
	ProfileSubagentRestricted = "subagent_restricted"
)

// ProfileNames lists the profiles, in the order of docs/POLICY.md.
var ProfileNames = []string{ProfileFullAccess, ProfileReadOnly, ProfileSafeMode,
	ProfileMinimalCore, ProfileNoExternal, ProfileSubagentRestricted}

var profiles = map[string]func() ToolPolicy{
	ProfileFullAccess: func() ToolPolicy { return ToolPolicy{} },
	ProfileReadOnly: func() ToolPolicy {
		return ToolPolicy{Deny: []string{"class:mutation"}}
	},
	ProfileSafeMode: func() ToolPolicy {
		return ToolPolicy{RequireApproval: []string{"class:mutation"}, Sandbox: true}
	},
	ProfileMinimalCore: func() ToolPolicy {
		return ToolPolicy{Allow: []string{"node.fs.*", "node.host.info", "node.process.*"}}
	},
	ProfileNoExternal: func() ToolPolicy {
		return ToolPolicy{BlockedTools: []string{"capability:exec", "capability:secrets"}}
	},
	ProfileSubagentRestricted: func() ToolPolicy {
		return ToolPolicy{Allow: []string{"node.fs.*", "node.host.info"}, Deny: []string{"node.fs.delete"},
			Sandbox: true, NoReply: true}
	},
}

// Profile returns the policy of a named profile; ok is false for an
// unknown name.
func Profile(name string) (p ToolPolicy, ok bool) {
	f, ok := profiles[name]
	if !ok {
		return ToolPolicy{}, false
	}
	p = f()
	p.canon()
	p.Profile = name
	return p, true
}

// FullAccess is the explicit trusted default for an absent policy.
func FullAccess() ToolPolicy {
	p, _ := Profile(ProfileFullAccess)
	return p
}
