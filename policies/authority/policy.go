package authority

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Approval modes of the approvals table. "always" asks for every call;
// "once" asks once, and the grant then covers identical calls in the same
// context (docs/POLICY.md, "Approvals"). "always" is the stricter.
const (
	ModeOnce   = "once"
	ModeAlways = "always"
)

// MaxPolicyBytes bounds a policy as JSON (the input of ParseJSON, and the
// canonical encoding of a parsed policy), so that an execution context
// carrying it fits MaxContextBytes.
const MaxPolicyBytes = 48 << 10

// ToolPolicy is a validated tool policy in canonical form (docs/POLICY.md,
// "Tool policy"). Build one only with Parse, ParseJSON, Profile or
// Restrict: the zero value is full access.
//
// Lists are sorted and deduplicated; a name or glob covered by a glob of
// the same list is dropped. nil and empty differ where noted.
type ToolPolicy struct {
	// Profile is the profile the policy was built from, informational
	// only (its rules are already folded into the fields); "" after a
	// Restrict of two different profiles.
	Profile string
	// Allow lists the method names and globs that may be called; nil is
	// every method, empty is none.
	Allow []string
	// Deny and BlockedTools list selectors that are refused; both are
	// unions under Restrict and refuse alike (BlockedTools is reported as
	// "blocked").
	Deny         []string
	BlockedTools []string
	// RequireApproval lists selectors held for approval on every call
	// (mode "always"); ApproveOnce those held once per context (mode
	// "once"). A selector is in at most one of them.
	RequireApproval []string
	ApproveOnce     []string
	// NoReply asks for silent runs; it sticks under Restrict.
	NoReply bool
	// AllowedCommands lists the commands node.process.run may start: nil
	// is any, empty is none. An entry is a bare name (allows only that
	// bare argv[0]) or an absolute path (allows only that path).
	AllowedCommands []string
	// BlockedCommands are never started: an argv[0] equal to an entry or
	// with the same base name is refused.
	BlockedCommands []string
	// Limits are the numeric limits; 0 is unset.
	Limits Limits
	// Sandbox requires runs to be sandboxed; it sticks under Restrict.
	Sandbox bool
}

// Limits are numeric limits; 0 means unset (no limit). Restrict takes the
// lower set value.
//   - MaxFileBytes bounds the bytes one file write may leave in a file and
//     one read may return.
//   - MaxTimeoutMs bounds node.process.run's timeoutMs (ms).
//   - MaxOutputBytes bounds node.process.run's maxOutputBytes (bytes).
type Limits struct {
	MaxFileBytes   int64
	MaxTimeoutMs   int64
	MaxOutputBytes int64
}

// ErrPolicyAbsent is returned for an absent policy (a nil table, empty or
// "null" JSON). Callers choose an explicit default for absence; they never
// use it for a malformed policy.
var ErrPolicyAbsent = errors.New("policy absent")

// ParseError is a refused policy or context: Key names the offending key
// (a path such as "approvals.node.fs.write" or "workspace.root"), Reason
// says why. Neither carries a value of the input beyond a key or selector
// that has the shape of one.
type ParseError struct {
	Key    string
	Reason string
}

func (e *ParseError) Error() string {
	if e.Key == "" {
		return e.Reason
	}
	return e.Key + ": " + e.Reason
}

func perr(key, format string, args ...any) *ParseError {
	return &ParseError{Key: key, Reason: fmt.Sprintf(format, args...)}
}

// policyKeys are the keys of a tool policy, in TOML and JSON alike.
var policyKeys = []string{
	"profile", "allow", "deny", "blocked_tools", "require_approval", "approvals", "no_reply",
	"allowed_commands", "blocked_commands", "max_file_bytes", "max_timeout_ms", "max_output_bytes",
	"sandbox",
}

// Parse validates a tool policy given as a decoded table: the map a TOML
// decoder gives for a table (string, bool, int64, float64, []any,
// []string, map[string]any) or one decoded from JSON (json.Number or
// float64 numbers). A nil map is ErrPolicyAbsent. Every error is a
// *ParseError naming the key: unknown keys, keys that differ only in case,
// '-' or '_' (conflicting keys), an unknown profile, a malformed selector
// or command, a selector other than a name or glob in allow, a list that
// is not a list of strings, an approval mode other than "once" or
// "always", a selector given two modes, a negative or non-integer limit.
//
// A profile's rules are applied first; the other keys then narrow them
// (Restrict).
func Parse(m map[string]any) (ToolPolicy, error) {
	if m == nil {
		return ToolPolicy{}, ErrPolicyAbsent
	}
	return parseTable(m, policyKeys, "")
}

// ParseJSON validates a tool policy given as JSON (at most MaxPolicyBytes;
// a key given twice at any depth is refused). Empty input or null is
// ErrPolicyAbsent. Errors are as Parse's.
func ParseJSON(data []byte) (ToolPolicy, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "null" {
		return ToolPolicy{}, ErrPolicyAbsent
	}
	if len(data) > MaxPolicyBytes {
		return ToolPolicy{}, perr("", "policy longer than %d bytes", MaxPolicyBytes)
	}
	v, err := decodeJSON(data)
	if err != nil {
		return ToolPolicy{}, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return ToolPolicy{}, perr("", "policy must be an object")
	}
	return parseTable(m, policyKeys, "")
}

// parseTable parses the policy keys of m; extra lists further keys the
// caller handles itself (they are skipped, not refused). prefix is put
// before key names in errors.
func parseTable(m map[string]any, known []string, prefix string) (ToolPolicy, error) {
	if err := checkKeys(m, known, prefix); err != nil {
		return ToolPolicy{}, err
	}
	var p ToolPolicy
	base := ToolPolicy{}
	if v, ok := m["profile"]; ok {
		s, ok := v.(string)
		if !ok {
			return p, perr(prefix+"profile", "must be a string")
		}
		prof, ok := profiles[s]
		if !ok {
			return p, perr(prefix+"profile", "unknown profile (one of %s)", strings.Join(ProfileNames, ", "))
		}
		base = prof()
		base.Profile = s
	}
	var err error
	if v, ok := m["allow"]; ok {
		if s, isStr := v.(string); isStr {
			if s != "all" {
				return p, perr(prefix+"allow", `must be "all" or a list of method names and globs`)
			}
		} else {
			if p.Allow, err = selectorList(prefix+"allow", v, true); err != nil {
				return p, err
			}
			if p.Allow == nil {
				p.Allow = []string{}
			}
		}
	}
	if p.Deny, err = optSelectors(m, prefix, "deny"); err != nil {
		return p, err
	}
	if p.BlockedTools, err = optSelectors(m, prefix, "blocked_tools"); err != nil {
		return p, err
	}
	if p.RequireApproval, err = optSelectors(m, prefix, "require_approval"); err != nil {
		return p, err
	}
	if v, ok := m["approvals"]; ok {
		t, ok := v.(map[string]any)
		if !ok {
			return p, perr(prefix+"approvals", `must be a table of selector = "once" | "always"`)
		}
		if len(t) > MaxListEntries {
			return p, perr(prefix+"approvals", "at most %d entries", MaxListEntries)
		}
		for sel, mv := range t {
			key := prefix + "approvals." + safeKey(sel)
			if _, ok := parseSelector(sel); !ok {
				return p, perr(key, "malformed selector (a method name, a glob such as node.fs.*, capability:NAME or class:read|mutation)")
			}
			mode, ok := mv.(string)
			if !ok || (mode != ModeOnce && mode != ModeAlways) {
				return p, perr(key, `unsupported approval mode (want "once" or "always")`)
			}
			if mode == ModeAlways {
				p.RequireApproval = append(p.RequireApproval, sel)
			} else {
				if contains(p.RequireApproval, sel) {
					return p, perr(key, `conflicts with require_approval (mode "always")`)
				}
				p.ApproveOnce = append(p.ApproveOnce, sel)
			}
		}
	}
	if p.NoReply, err = optBool(m, prefix, "no_reply"); err != nil {
		return p, err
	}
	if p.Sandbox, err = optBool(m, prefix, "sandbox"); err != nil {
		return p, err
	}
	if v, ok := m["allowed_commands"]; ok {
		if s, isStr := v.(string); isStr {
			if s != "all" {
				return p, perr(prefix+"allowed_commands", `must be "all" or a list of commands`)
			}
		} else {
			if p.AllowedCommands, err = commandList(prefix+"allowed_commands", v); err != nil {
				return p, err
			}
		}
	}
	if v, ok := m["blocked_commands"]; ok {
		if p.BlockedCommands, err = commandList(prefix+"blocked_commands", v); err != nil {
			return p, err
		}
		if len(p.BlockedCommands) == 0 {
			p.BlockedCommands = nil
		}
	}
	for _, l := range []struct {
		key string
		dst *int64
	}{{"max_file_bytes", &p.Limits.MaxFileBytes}, {"max_timeout_ms", &p.Limits.MaxTimeoutMs},
		{"max_output_bytes", &p.Limits.MaxOutputBytes}} {
		if v, ok := m[l.key]; ok {
			if *l.dst, err = limitValue(prefix+l.key, v); err != nil {
				return p, err
			}
		}
	}
	p.canon()
	out := Restrict(base, p)
	out.Profile = base.Profile
	if b, _ := out.MarshalJSON(); len(b) > MaxPolicyBytes {
		return ToolPolicy{}, perr(strings.TrimSuffix(prefix, "."), "policy longer than %d bytes as JSON", MaxPolicyBytes)
	}
	return out, nil
}

// checkKeys refuses keys not in known and keys that differ only in case,
// '-' or '_' from another key or from a known key.
func checkKeys(m map[string]any, known []string, prefix string) error {
	norm := map[string]string{}
	for k := range m {
		n := normKey(k)
		if other, dup := norm[n]; dup {
			a, b := safeKey(k), safeKey(other)
			if b < a {
				a, b = b, a
			}
			return perr(prefix+a, "conflicts with key %s (keys differ only in case, '-' or '_')", b)
		}
		norm[n] = k
	}
	for k := range m {
		if contains(known, k) {
			continue
		}
		for _, kk := range known {
			if normKey(kk) == normKey(k) {
				return perr(prefix+safeKey(k), "unknown key (did you mean %s?)", kk)
			}
		}
		return perr(prefix+safeKey(k), "unknown key")
	}
	return nil
}

func normKey(k string) string {
	k = strings.ToLower(k)
	k = strings.ReplaceAll(k, "_", "")
	return strings.ReplaceAll(k, "-", "")
}

// safeKey returns k when it looks like a key or selector (at most 128
// printable ASCII bytes without quotes or spaces), else "?".
func safeKey(k string) string {
	if len(k) == 0 || len(k) > MaxSelectorBytes {
		return "?"
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c > '~' || c == '"' || c == '\\' {
			return "?"
		}
	}
	return k
}

func optSelectors(m map[string]any, prefix, key string) ([]string, error) {
	v, ok := m[key]
	if !ok {
		return nil, nil
	}
	xs, err := selectorList(prefix+key, v, false)
	if len(xs) == 0 {
		xs = nil
	}
	return xs, err
}

func optBool(m map[string]any, prefix, key string) (bool, error) {
	v, ok := m[key]
	if !ok {
		return false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, perr(prefix+key, "must be true or false")
	}
	return b, nil
}

// stringList converts a decoded list to strings.
func stringList(key string, v any) ([]string, error) {
	var out []string
	switch xs := v.(type) {
	case []string:
		out = append([]string{}, xs...)
	case []any:
		out = make([]string, 0, len(xs))
		for _, x := range xs {
			s, ok := x.(string)
			if !ok {
				return nil, perr(key, "must be a list of strings")
			}
			out = append(out, s)
		}
	default:
		return nil, perr(key, "must be a list of strings")
	}
	if len(out) > MaxListEntries {
		return nil, perr(key, "at most %d entries", MaxListEntries)
	}
	return out, nil
}

func selectorList(key string, v any, allowOnly bool) ([]string, error) {
	xs, err := stringList(key, v)
	if err != nil {
		return nil, err
	}
	for i, s := range xs {
		k, ok := parseSelector(s)
		if !ok {
			return nil, perr(fmt.Sprintf("%s[%d]", key, i), "malformed selector (a method name, a glob such as node.fs.*, capability:NAME or class:read|mutation)")
		}
		if allowOnly && k != selName && k != selGlob {
			return nil, perr(fmt.Sprintf("%s[%d]", key, i), "allow takes method names and globs only (use deny for capability: and class: selectors)")
		}
	}
	return canonSelectors(xs), nil
}

func commandList(key string, v any) ([]string, error) {
	xs, err := stringList(key, v)
	if err != nil {
		if s, ok := v.(string); ok && s == "all" {
			return nil, perr(key, `"all" is not allowed here`)
		}
		return nil, err
	}
	for i, s := range xs {
		if err := checkCommand(s); err != nil {
			return nil, perr(fmt.Sprintf("%s[%d]", key, i), "%s", err.Error())
		}
	}
	return canonCommands(xs), nil
}

// CheckCommand accepts one allowed_commands or blocked_commands entry, of
// a tool policy or a worker policy alike (docs/POLICY.md, "Commands"): a
// bare name (no '/') or a clean absolute path, 1 to MaxCommandBytes bytes
// of valid UTF-8 without control characters and without leading or
// trailing white space ("rm " would match no argv[0], so a blocked entry
// with a stray space would block nothing); "all" is never a list item.
func CheckCommand(s string) error { return checkCommand(s) }

func checkCommand(s string) error {
	switch {
	case s == "all":
		return errors.New(`"all" is not a list item; give allowed_commands = "all" instead of a list`)
	case s == "" || len(s) > MaxCommandBytes:
		return fmt.Errorf("must be 1 to %d bytes", MaxCommandBytes)
	case strings.ContainsRune(s, 0):
		return errors.New("must not contain NUL")
	case !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl):
		return errors.New("must be valid UTF-8 without control characters")
	case strings.TrimSpace(s) != s:
		return errors.New("must not begin or end with white space")
	case strings.Contains(s, "/") && (!path.IsAbs(s) || path.Clean(s) != s):
		return errors.New("must be a bare command name or a clean absolute path")
	case s == "." || s == "..":
		return errors.New("must be a bare command name or a clean absolute path")
	}
	return nil
}

func canonCommands(xs []string) []string {
	if xs == nil {
		return nil
	}
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		if !contains(out, x) {
			out = append(out, x)
		}
	}
	sortStrings(out)
	return out
}

func limitValue(key string, v any) (int64, error) {
	bad := perr(key, "must be an integer from 0 (unset) to %d", int64(MaxLimit))
	var n int64
	switch x := v.(type) {
	case int64:
		n = x
	case int:
		n = int64(x)
	case float64:
		if x != math.Trunc(x) || x < 0 || x > MaxLimit {
			return 0, bad
		}
		n = int64(x)
	case json.Number:
		i, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return 0, bad
		}
		n = i
	default:
		return 0, bad
	}
	if n < 0 || n > MaxLimit {
		return 0, bad
	}
	return n, nil
}

// canon puts p's lists in canonical form.
func (p *ToolPolicy) canon() {
	if p.Allow != nil {
		p.Allow = canonSelectors(p.Allow)
	}
	p.Deny = nilIfEmpty(canonSelectors(p.Deny))
	p.BlockedTools = nilIfEmpty(canonSelectors(p.BlockedTools))
	p.RequireApproval = nilIfEmpty(canonSelectors(p.RequireApproval))
	once := []string{}
	for _, s := range canonSelectors(p.ApproveOnce) {
		if !contains(p.RequireApproval, s) {
			once = append(once, s)
		}
	}
	p.ApproveOnce = nilIfEmpty(once)
	if p.AllowedCommands != nil {
		p.AllowedCommands = canonCommands(p.AllowedCommands)
	}
	p.BlockedCommands = nilIfEmpty(canonCommands(p.BlockedCommands))
}

func nilIfEmpty(xs []string) []string {
	if len(xs) == 0 {
		return nil
	}
	return xs
}

// MarshalJSON writes the canonical JSON form, with the keys of the TOML
// table; ParseJSON of it gives the policy back. An absent key is the
// widest value (allow and allowed_commands: any; lists: none; limits:
// unset; booleans: false).
func (p ToolPolicy) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	key := func(k string) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(strconv.Quote(k))
		b.WriteByte(':')
	}
	list := func(k string, xs []string, keepEmpty bool) {
		if xs == nil || (len(xs) == 0 && !keepEmpty) {
			return
		}
		key(k)
		enc, _ := json.Marshal(xs)
		b.Write(enc)
	}
	if p.Profile != "" {
		key("profile")
		b.WriteString(strconv.Quote(p.Profile))
	}
	list("allow", p.Allow, true)
	list("deny", p.Deny, false)
	list("blocked_tools", p.BlockedTools, false)
	list("require_approval", p.RequireApproval, false)
	if len(p.ApproveOnce) > 0 {
		key("approvals")
		b.WriteByte('{')
		for i, s := range p.ApproveOnce {
			if i > 0 {
				b.WriteByte(',')
			}
			enc, _ := json.Marshal(s)
			b.Write(enc)
			b.WriteString(`:"once"`)
		}
		b.WriteByte('}')
	}
	if p.NoReply {
		key("no_reply")
		b.WriteString("true")
	}
	list("allowed_commands", p.AllowedCommands, true)
	list("blocked_commands", p.BlockedCommands, false)
	for _, l := range []struct {
		k string
		v int64
	}{{"max_file_bytes", p.Limits.MaxFileBytes}, {"max_timeout_ms", p.Limits.MaxTimeoutMs},
		{"max_output_bytes", p.Limits.MaxOutputBytes}} {
		if l.v != 0 {
			key(l.k)
			b.WriteString(strconv.FormatInt(l.v, 10))
		}
	}
	if p.Sandbox {
		key("sandbox")
		b.WriteString("true")
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON is ParseJSON; null or empty input is ErrPolicyAbsent.
func (p *ToolPolicy) UnmarshalJSON(data []byte) error {
	q, err := ParseJSON(data)
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// Equal reports whether two canonical policies are the same (Profile
// aside).
func (p ToolPolicy) Equal(q ToolPolicy) bool {
	p.Profile, q.Profile = "", ""
	a, _ := p.MarshalJSON()
	b, _ := q.MarshalJSON()
	return bytes.Equal(a, b)
}

// decodeJSON decodes one JSON value, numbers as json.Number, refusing
// malformed JSON and trailing data, nesting deeper than maxJSONDepth, and
// a key given twice in any object. The checks are one scan of the bytes
// (checkStructure) before encoding/json decodes: about a quarter of the
// cost of a token-by-token decode (docs/BENCHMARKS.md, "Authority").
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, perr("", "malformed JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, perr("", "trailing data after the JSON value")
	}
	// data is now known to be one valid JSON value and spaces.
	if err := checkStructure(data); err != nil {
		return nil, err
	}
	return v, nil
}

const maxJSONDepth = 16

// checkStructure scans valid JSON for nesting deeper than maxJSONDepth
// and for a key given twice in one object.
func checkStructure(data []byte) error {
	type level struct {
		object bool
		keys   []string
		// expectKey is true right after '{' or ',' in an object.
		expectKey bool
	}
	var stack []level
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '{', '[':
			if len(stack) >= maxJSONDepth {
				return perr("", "nested deeper than %d", maxJSONDepth)
			}
			stack = append(stack, level{object: c == '{', expectKey: c == '{'})
		case '}', ']':
			stack = stack[:len(stack)-1]
		case ',':
			if n := len(stack); n > 0 && stack[n-1].object {
				stack[n-1].expectKey = true
			}
		case '"':
			end := i + 1
			escaped := false
			for ; end < len(data); end++ {
				if data[end] == '\\' {
					escaped = true
					end++
					continue
				}
				if data[end] == '"' {
					break
				}
			}
			if n := len(stack); n > 0 && stack[n-1].expectKey {
				key := string(data[i+1 : end])
				if escaped {
					var k string
					if json.Unmarshal(data[i:end+1], &k) != nil {
						return perr("", "malformed JSON")
					}
					key = k
				}
				for _, k := range stack[n-1].keys {
					if k == key {
						return perr(safeKey(key), "key given twice")
					}
				}
				stack[n-1].keys = append(stack[n-1].keys, key)
				stack[n-1].expectKey = false
			}
			i = end
		}
	}
	return nil
}
