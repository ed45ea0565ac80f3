// Package authority holds the caller's authority as lemon checks it on
// every node request (docs/POLICY.md, "Tool policy" and "Execution
// context"): the ToolPolicy (allow, deny, blocked_tools, approvals,
// command lists, numeric limits, sandbox) with its one strict parser for
// TOML-decoded tables and JSON alike, the six profiles, Restrict (an
// intersection that never widens), Within and Decide, and ExecutionContext
// v1 with its strict, bounded JSON form.
//
// It depends on the standard library and lemon/protocol only, so the
// controller, the node and tests share one meaning of every rule.
package authority

import (
	"regexp"
	"strings"

	"lemon/protocol"
)

// Method classes (a method's declared retry class, protocol.RetryRead or
// protocol.RetryMutation).
const (
	ClassRead     = protocol.RetryRead
	ClassMutation = protocol.RetryMutation
)

// Method is what Decide needs to know of a method: its name, its declared
// capability, the further capabilities its host calls use (abi.MethodSpec
// Uses), and its class (ClassRead or ClassMutation; "" is a mutation).
// Controller methods that change state are decided as mutations with no
// capability.
type Method struct {
	Name       string
	Capability string
	Uses       []string
	Class      string
}

// IsRead reports whether the method is declared read-class.
func (m Method) IsRead() bool { return m.Class == ClassRead }

// Selector syntax (docs/POLICY.md, "Selectors"):
//
//	node.fs.read          an exact method name
//	node.fs.*             every method whose name starts with "node.fs."
//	capability:exec       every method declaring exec, or using it
//	class:mutation        every mutation-class method (class:read: read-class)
//
// allow takes names and globs only.
var (
	nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-zA-Z0-9_]+)+$`)
	globRE = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-zA-Z0-9_]+)*\.\*$`)
	capRE  = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)
)

// Bounds of policy values.
const (
	// MaxSelectorBytes bounds one selector.
	MaxSelectorBytes = 128
	// MaxListEntries bounds every list (allow, deny, blocked_tools,
	// require_approval, approvals, allowed_commands, blocked_commands,
	// capabilities); MaxPolicyBytes bounds the whole policy as JSON.
	MaxListEntries = 256
	// MaxCommandBytes bounds one command name or path.
	MaxCommandBytes = 512
	// MaxLimit bounds every numeric limit (2^53-1, exact in JSON).
	MaxLimit = 1<<53 - 1
)

type selKind int

const (
	selName selKind = iota
	selGlob
	selCapability
	selClass
)

// parseSelector classifies s; ok is false for a malformed selector.
func parseSelector(s string) (selKind, bool) {
	if len(s) == 0 || len(s) > MaxSelectorBytes {
		return 0, false
	}
	if c, found := strings.CutPrefix(s, "capability:"); found {
		return selCapability, ValidCapability(c)
	}
	if c, found := strings.CutPrefix(s, "class:"); found {
		return selClass, c == ClassRead || c == ClassMutation
	}
	if globRE.MatchString(s) {
		return selGlob, true
	}
	return selName, nameRE.MatchString(s)
}

// ValidCapability reports whether c is a capability name
// (^[a-z][a-z0-9_]{0,31}$, not the reserved "all" or "none").
func ValidCapability(c string) bool {
	return c != "all" && c != "none" && capRE.MatchString(c)
}

// matches reports whether selector s (already valid) selects m.
func matches(s string, m Method) bool {
	switch {
	case strings.HasPrefix(s, "capability:"):
		c := s[len("capability:"):]
		if m.Capability == c {
			return true
		}
		for _, u := range m.Uses {
			if u == c {
				return true
			}
		}
		return false
	case strings.HasPrefix(s, "class:"):
		if s == "class:read" {
			return m.IsRead()
		}
		return !m.IsRead()
	case strings.HasSuffix(s, ".*"):
		return strings.HasPrefix(m.Name, s[:len(s)-1])
	}
	return s == m.Name
}

// covers reports whether name-or-glob a selects everything b selects
// (both names or globs).
func covers(a, b string) bool {
	if a == b {
		return true
	}
	if strings.HasSuffix(a, ".*") {
		return strings.HasPrefix(b, a[:len(a)-1])
	}
	return false
}

// canonSelectors sorts, dedupes and drops names and globs covered by a
// glob of the same list.
func canonSelectors(xs []string) []string {
	if xs == nil {
		return nil
	}
	out := make([]string, 0, len(xs))
	for i, x := range xs {
		drop := false
		for j, y := range xs {
			if i == j {
				continue
			}
			if x == y && j < i {
				drop = true // duplicate: keep the first
				break
			}
			if x != y && strings.HasSuffix(y, ".*") && covers(y, x) {
				drop = true
				break
			}
		}
		if !drop {
			out = append(out, x)
		}
	}
	sortStrings(out)
	return out
}

// intersectAllow intersects two allow lists of names and globs; nil is
// "every method". The result selects exactly the methods both select.
func intersectAllow(a, b []string) []string {
	if a == nil {
		return clone(b)
	}
	if b == nil {
		return clone(a)
	}
	out := []string{}
	for _, x := range a {
		for _, y := range b {
			switch {
			case covers(x, y):
				out = append(out, y)
			case covers(y, x):
				out = append(out, x)
			}
		}
	}
	return canonSelectors(out)
}

func union(a, b []string) []string {
	if a == nil && b == nil {
		return nil
	}
	return canonSelectors(append(clone(a), b...))
}

func clone(xs []string) []string {
	if xs == nil {
		return nil
	}
	return append([]string{}, xs...)
}

func sortStrings(xs []string) {
	// insertion sort: lists are bounded (MaxListEntries) and this keeps
	// the package free of sort/slices imports in hot paths' closures.
	for i := 1; i < len(xs); i++ {
		for j := i; j > 0 && xs[j] < xs[j-1]; j-- {
			xs[j], xs[j-1] = xs[j-1], xs[j]
		}
	}
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
