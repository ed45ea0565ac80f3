package authority

// Restrict returns the intersection of two policies (docs/POLICY.md,
// "Restrict"): the result never allows more than either.
//   - allow lists intersect (nil is every method);
//   - deny and blocked_tools lists union;
//   - approval requirements union, and for a selector in both the
//     stricter mode ("always") wins;
//   - allowed_commands intersect (nil is any, empty none);
//     blocked_commands union;
//   - each numeric limit takes the lower set value (0 is unset);
//   - sandbox and no_reply stick once set.
//
// Profile is kept when both agree, else "".
func Restrict(a, b ToolPolicy) ToolPolicy {
	out := ToolPolicy{
		Allow:           intersectAllow(a.Allow, b.Allow),
		Deny:            union(a.Deny, b.Deny),
		BlockedTools:    union(a.BlockedTools, b.BlockedTools),
		RequireApproval: union(a.RequireApproval, b.RequireApproval),
		ApproveOnce:     union(a.ApproveOnce, b.ApproveOnce),
		NoReply:         a.NoReply || b.NoReply,
		AllowedCommands: intersectCommands(a.AllowedCommands, b.AllowedCommands),
		BlockedCommands: canonCommands(append(clone(a.BlockedCommands), b.BlockedCommands...)),
		Limits:          a.Limits.Restrict(b.Limits),
		Sandbox:         a.Sandbox || b.Sandbox,
	}
	if a.Profile == b.Profile {
		out.Profile = a.Profile
	}
	out.canon()
	return out
}

// Restrict takes the lower set value of each limit (0 is unset).
func (l Limits) Restrict(o Limits) Limits {
	return Limits{
		MaxFileBytes:   minSet(l.MaxFileBytes, o.MaxFileBytes),
		MaxTimeoutMs:   minSet(l.MaxTimeoutMs, o.MaxTimeoutMs),
		MaxOutputBytes: minSet(l.MaxOutputBytes, o.MaxOutputBytes),
	}
}

// Within reports whether every limit of l is set at most as high as o's
// (an unset limit is within only an unset one).
func (l Limits) Within(o Limits) bool {
	return limitWithin(l.MaxFileBytes, o.MaxFileBytes) && limitWithin(l.MaxTimeoutMs, o.MaxTimeoutMs) &&
		limitWithin(l.MaxOutputBytes, o.MaxOutputBytes)
}

func limitWithin(a, b int64) bool { return b == 0 || (a != 0 && a <= b) }

func minSet(a, b int64) int64 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	case a < b:
		return a
	}
	return b
}

func intersectCommands(a, b []string) []string {
	if a == nil {
		return clone(b)
	}
	if b == nil {
		return clone(a)
	}
	out := []string{}
	for _, x := range a {
		if contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// Within reports whether inner allows nothing outer does not: restricting
// outer by inner changes nothing in inner.
func Within(inner, outer ToolPolicy) bool {
	return Restrict(outer, inner).Equal(inner)
}
