package authority

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ContextVersion is the version of the execution context's JSON form.
const ContextVersion = 1

// MaxContextBytes bounds an execution context as JSON (64 KiB).
const MaxContextBytes = 64 << 10

// Workspace modes.
const (
	WorkspaceReadOnly  = "read_only"
	WorkspaceReadWrite = "read_write"
)

// Bounds of context identity fields.
const (
	MaxIDBytes        = 128 // runId, parentRunId
	MaxPrincipalBytes = 64
	MaxProvenance     = 64
	MaxRootBytes      = 4096
	MaxAttempt        = 1 << 20
)

// Workspace is a context's workspace: Root is a clean absolute path (the
// node binds it to its canonical path, which must be Root as given), Mode
// is WorkspaceReadOnly or WorkspaceReadWrite.
type Workspace struct {
	Root string `json:"root"`
	Mode string `json:"mode"`
}

// ExecutionContext v1 binds the authority of one request (docs/POLICY.md,
// "Execution context"). Build one with New (or Child, Narrow, Rebind,
// ParseContext); the fields are not changed afterwards.
//
//	{"version":1,"runId":"inv-1","attempt":1,"parentRunId":"","principal":"ci",
//	 "provenance":"controller","policy":{"allowed_commands":["make"]},
//	 "workspace":{"root":"/srv/ws","mode":"read_write"},
//	 "capabilities":["exec"],"limits":{"maxTimeoutMs":60000}}
type ExecutionContext struct {
	// RunID identifies the run (the controller uses the invokeId);
	// Attempt counts from 1; ParentRunID is the run this one derives from
	// ("" for a root context).
	RunID       string
	Attempt     int
	ParentRunID string
	// Principal is the authenticated operator entry; Provenance says who
	// built the context ("controller", "caller", ...).
	Principal  string
	Provenance string
	// Policy is the validated tool policy.
	Policy ToolPolicy
	// Workspace confines file and process paths; nil is the node's roots.
	Workspace *Workspace
	// Capabilities are the effective capabilities, sorted; empty is none.
	Capabilities []string
	// Limits are the effective numeric limits (already restricted by the
	// policy's own limits).
	Limits Limits
}

// Error codes of ContextError (error.details.code on the wire).
const (
	CodeContextInvalid    = "context_invalid"
	CodeContextWider      = "context_wider"
	CodePrincipalMismatch = "principal_mismatch"
	CodeWorkspaceEscape   = "workspace_escape"
)

// ContextError is a refused context: Code is one of the Code* constants,
// Field the offending key, Reason a bounded explanation without values.
type ContextError struct {
	Code   string
	Field  string
	Reason string
}

func (e *ContextError) Error() string {
	if e.Field == "" {
		return e.Code + ": " + e.Reason
	}
	return e.Code + ": " + e.Field + ": " + e.Reason
}

func cerr(code, field, format string, args ...any) *ContextError {
	return &ContextError{Code: code, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// New validates c and returns it in canonical form: capabilities sorted
// and deduplicated, Limits restricted by the policy's limits, Attempt 0
// taken as 1. Errors are *ContextError with CodeContextInvalid.
func New(c ExecutionContext) (ExecutionContext, error) {
	if c.Attempt == 0 {
		c.Attempt = 1
	}
	if err := checkID("runId", c.RunID, true); err != nil {
		return ExecutionContext{}, err
	}
	if err := checkID("parentRunId", c.ParentRunID, false); err != nil {
		return ExecutionContext{}, err
	}
	if c.Attempt < 1 || c.Attempt > MaxAttempt {
		return ExecutionContext{}, cerr(CodeContextInvalid, "attempt", "must be 1 to %d", MaxAttempt)
	}
	if !ValidPrincipal(c.Principal) {
		return ExecutionContext{}, cerr(CodeContextInvalid, "principal", "must be 1 to %d printable bytes", MaxPrincipalBytes)
	}
	if len(c.Provenance) > MaxProvenance || !tokenChars(c.Provenance) {
		return ExecutionContext{}, cerr(CodeContextInvalid, "provenance", "must be at most %d bytes of a-z, 0-9, '_', '.', ':', '-'", MaxProvenance)
	}
	if c.Workspace != nil {
		w, err := checkWorkspace(*c.Workspace)
		if err != nil {
			return ExecutionContext{}, err
		}
		c.Workspace = &w
	}
	caps, err := checkCaps("capabilities", c.Capabilities)
	if err != nil {
		return ExecutionContext{}, err
	}
	c.Capabilities = caps
	if err := checkLimits("limits", c.Limits); err != nil {
		return ExecutionContext{}, err
	}
	c.Policy.canon()
	c.Limits = c.Limits.Restrict(c.Policy.Limits)
	return c, nil
}

// ValidPrincipal reports whether s can be a context's principal (an
// operator entry's name): 1 to MaxPrincipalBytes bytes of UTF-8 without
// C0 or C1 control characters or DEL. policies.Controller checks every
// operator name with it, so an accepted entry can always build a context.
func ValidPrincipal(s string) bool {
	return s != "" && len(s) <= MaxPrincipalBytes && printable(s)
}

func checkID(field, s string, required bool) error {
	if s == "" && !required {
		return nil
	}
	if s == "" || len(s) > MaxIDBytes {
		return cerr(CodeContextInvalid, field, "must be 1 to %d bytes", MaxIDBytes)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._:-", c) >= 0) {
			return cerr(CodeContextInvalid, field, "must be letters, digits, '.', '_', ':' or '-'")
		}
	}
	return nil
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

func tokenChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("._:-", c) >= 0) {
			return false
		}
	}
	return true
}

func checkWorkspace(w Workspace) (Workspace, error) {
	if err := CheckRoot(w.Root); err != nil {
		return w, cerr(CodeContextInvalid, "workspace.root", "%s", err.Error())
	}
	if w.Mode != WorkspaceReadOnly && w.Mode != WorkspaceReadWrite {
		return w, cerr(CodeContextInvalid, "workspace.mode", `must be "read_only" or "read_write"`)
	}
	return w, nil
}

// CheckRoot accepts a workspace root: a clean absolute path of at most
// MaxRootBytes bytes without NUL.
func CheckRoot(root string) error {
	if root == "" || len(root) > MaxRootBytes || strings.ContainsRune(root, 0) {
		return fmt.Errorf("must be 1 to %d bytes without NUL", MaxRootBytes)
	}
	if !path.IsAbs(root) || path.Clean(root) != root {
		return errors.New("must be a clean absolute path (no '..', '.', '//' or trailing '/')")
	}
	return nil
}

// RootWithin reports whether root is dir or lies under it (lexically; a
// root is clean and absolute).
func RootWithin(root, dir string) bool {
	if root == dir || dir == "/" {
		return true
	}
	return strings.HasPrefix(root, dir+"/")
}

func checkCaps(field string, caps []string) ([]string, error) {
	if len(caps) > MaxListEntries {
		return nil, cerr(CodeContextInvalid, field, "at most %d entries", MaxListEntries)
	}
	out := make([]string, 0, len(caps))
	for _, c := range caps {
		if !ValidCapability(c) {
			return nil, cerr(CodeContextInvalid, field, "malformed capability name")
		}
		if !contains(out, c) {
			out = append(out, c)
		}
	}
	sortStrings(out)
	return out, nil
}

func checkLimits(field string, l Limits) error {
	for _, v := range []int64{l.MaxFileBytes, l.MaxTimeoutMs, l.MaxOutputBytes} {
		if v < 0 || v > MaxLimit {
			return cerr(CodeContextInvalid, field, "limits must be 0 (unset) to %d", int64(MaxLimit))
		}
	}
	return nil
}

// HasCapability reports whether c carries capability name.
func (c ExecutionContext) HasCapability(name string) bool { return contains(c.Capabilities, name) }

// ReadOnly reports whether the context's workspace is read_only.
func (c ExecutionContext) ReadOnly() bool {
	return c.Workspace != nil && c.Workspace.Mode == WorkspaceReadOnly
}

// ChildSpec is what a derived context may ask for. Zero values inherit:
// an empty Provenance the parent's, a nil Policy the parent's, a nil
// Workspace the parent's, nil Capabilities the parent's, an unset limit
// the parent's.
type ChildSpec struct {
	RunID        string
	Attempt      int
	Provenance   string
	Policy       *ToolPolicy
	Workspace    *Workspace
	Capabilities []string
	Limits       Limits
}

// Child derives a context for a delegated run (docs/POLICY.md, "Derived
// contexts"). The principal stays; ParentRunID is the parent's RunID. A
// workspace root outside the parent's is CodeWorkspaceEscape; everything
// else intersects: the policy (Restrict), capabilities, limits, and the
// mode (read_only sticks).
func (c ExecutionContext) Child(s ChildSpec) (ExecutionContext, error) {
	out := c
	out.RunID, out.Attempt, out.ParentRunID = s.RunID, s.Attempt, c.RunID
	if s.Provenance != "" {
		out.Provenance = s.Provenance
	}
	if s.Policy != nil {
		out.Policy = Restrict(c.Policy, *s.Policy)
	}
	if s.Workspace != nil {
		w, err := checkWorkspace(*s.Workspace)
		if err != nil {
			return ExecutionContext{}, err
		}
		if c.Workspace != nil {
			if !RootWithin(w.Root, c.Workspace.Root) {
				return ExecutionContext{}, cerr(CodeWorkspaceEscape, "workspace.root", "lies outside the parent's workspace")
			}
			if c.Workspace.Mode == WorkspaceReadOnly {
				w.Mode = WorkspaceReadOnly
			}
		}
		out.Workspace = &w
	}
	if s.Capabilities != nil {
		caps, err := checkCaps("capabilities", s.Capabilities)
		if err != nil {
			return ExecutionContext{}, err
		}
		out.Capabilities = intersectCaps(c.Capabilities, caps)
	}
	out.Limits = c.Limits.Restrict(s.Limits)
	return New(out)
}

func intersectCaps(a, b []string) []string {
	out := []string{}
	for _, x := range a {
		if contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// Narrowing is what a caller may send to narrow the context the
// controller builds for its request (the executionContext member of a req
// frame; docs/POLICY.md, "Narrowing a request's context"). Every field is
// optional: Principal, when set, must be the authenticated one; Policy is
// intersected; Workspace, Capabilities (when HasCapabilities) and each set
// limit must not be wider than the base.
type Narrowing struct {
	Principal       string
	Policy          *ToolPolicy
	Workspace       *Workspace
	Capabilities    []string
	HasCapabilities bool
	Limits          Limits
}

// Narrow applies a caller's narrowing to base. A principal other than
// base's is CodePrincipalMismatch; a capability base lacks, a root outside
// base's workspace, read_write over read_only, or a limit above base's is
// CodeContextWider (a limit where base has none narrows). The policy is
// intersected and never refused. Provenance becomes "caller".
func (c ExecutionContext) Narrow(n Narrowing) (ExecutionContext, error) {
	if n.Principal != "" && n.Principal != c.Principal {
		return ExecutionContext{}, cerr(CodePrincipalMismatch, "principal", "is not the authenticated principal")
	}
	out := c
	out.Provenance = "caller"
	if n.Policy != nil {
		out.Policy = Restrict(c.Policy, *n.Policy)
	}
	if n.Workspace != nil {
		w := *n.Workspace
		if w.Mode == "" {
			w.Mode = WorkspaceReadWrite
			if c.ReadOnly() {
				w.Mode = WorkspaceReadOnly
			}
		}
		w, err := checkWorkspace(w)
		if err != nil {
			return ExecutionContext{}, err
		}
		if c.Workspace != nil {
			if !RootWithin(w.Root, c.Workspace.Root) {
				return ExecutionContext{}, cerr(CodeContextWider, "workspace.root", "lies outside the operator's workspace")
			}
			if c.ReadOnly() && w.Mode != WorkspaceReadOnly {
				return ExecutionContext{}, cerr(CodeContextWider, "workspace.mode", "read_write is wider than the operator's read_only")
			}
		}
		out.Workspace = &w
	}
	if n.HasCapabilities {
		caps, err := checkCaps("capabilities", n.Capabilities)
		if err != nil {
			return ExecutionContext{}, err
		}
		for _, x := range caps {
			if !contains(c.Capabilities, x) {
				return ExecutionContext{}, cerr(CodeContextWider, "capabilities", "names a capability the request does not carry")
			}
		}
		out.Capabilities = caps
	}
	for _, l := range []struct {
		k    string
		a, b int64
	}{{"limits.maxFileBytes", n.Limits.MaxFileBytes, c.Limits.MaxFileBytes},
		{"limits.maxTimeoutMs", n.Limits.MaxTimeoutMs, c.Limits.MaxTimeoutMs},
		{"limits.maxOutputBytes", n.Limits.MaxOutputBytes, c.Limits.MaxOutputBytes}} {
		if l.a != 0 && l.b != 0 && l.a > l.b {
			return ExecutionContext{}, cerr(CodeContextWider, l.k, "is above the operator's limit")
		}
	}
	out.Limits = c.Limits.Restrict(n.Limits)
	return New(out)
}

// Subset reports whether c carries no authority that o does not: the same
// principal, capabilities within o's, a workspace within o's (read_only
// when o's is), limits within o's, and a policy Within o's.
func (c ExecutionContext) Subset(o ExecutionContext) bool {
	if c.Principal != o.Principal {
		return false
	}
	for _, x := range c.Capabilities {
		if !contains(o.Capabilities, x) {
			return false
		}
	}
	if o.Workspace != nil {
		if c.Workspace == nil || !RootWithin(c.Workspace.Root, o.Workspace.Root) {
			return false
		}
		if o.ReadOnly() && !c.ReadOnly() {
			return false
		}
	}
	return c.Limits.Within(o.Limits) && Within(c.Policy, o.Policy)
}

// Rebind returns c with its workspace root replaced by root, the trusted
// relocation a node makes when it binds the workspace to its canonical
// path (docs/POLICY.md, "Where each rule is enforced"). Everything else
// stays. It is an error when c has no workspace or root is not a clean
// absolute path.
func (c ExecutionContext) Rebind(root string) (ExecutionContext, error) {
	if c.Workspace == nil {
		return ExecutionContext{}, cerr(CodeContextInvalid, "workspace", "no workspace to rebind")
	}
	if err := CheckRoot(root); err != nil {
		return ExecutionContext{}, cerr(CodeContextInvalid, "workspace.root", "%s", err.Error())
	}
	out := c
	out.Workspace = &Workspace{Root: root, Mode: c.Workspace.Mode}
	return out, nil
}

// MarshalJSON writes the context's JSON form (see ExecutionContext). It
// fails when the result is longer than MaxContextBytes.
func (c ExecutionContext) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"version":1,"runId":`)
	b.WriteString(strconv.Quote(c.RunID))
	b.WriteString(`,"attempt":`)
	b.WriteString(strconv.Itoa(c.Attempt))
	if c.ParentRunID != "" {
		b.WriteString(`,"parentRunId":`)
		b.WriteString(strconv.Quote(c.ParentRunID))
	}
	b.WriteString(`,"principal":`)
	enc, _ := json.Marshal(c.Principal)
	b.Write(enc)
	if c.Provenance != "" {
		b.WriteString(`,"provenance":`)
		b.WriteString(strconv.Quote(c.Provenance))
	}
	b.WriteString(`,"policy":`)
	pol, _ := c.Policy.MarshalJSON()
	b.Write(pol)
	if c.Workspace != nil {
		b.WriteString(`,"workspace":{"root":`)
		enc, _ := json.Marshal(c.Workspace.Root)
		b.Write(enc)
		b.WriteString(`,"mode":`)
		b.WriteString(strconv.Quote(c.Workspace.Mode))
		b.WriteByte('}')
	}
	caps := c.Capabilities
	if caps == nil {
		caps = []string{}
	}
	enc, _ = json.Marshal(caps)
	b.WriteString(`,"capabilities":`)
	b.Write(enc)
	b.WriteString(`,"limits":`)
	b.Write(marshalLimits(c.Limits))
	b.WriteByte('}')
	if b.Len() > MaxContextBytes {
		return nil, cerr(CodeContextInvalid, "", "context longer than %d bytes as JSON", MaxContextBytes)
	}
	return b.Bytes(), nil
}

func marshalLimits(l Limits) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	sep := ""
	for _, f := range []struct {
		k string
		v int64
	}{{"maxFileBytes", l.MaxFileBytes}, {"maxTimeoutMs", l.MaxTimeoutMs}, {"maxOutputBytes", l.MaxOutputBytes}} {
		if f.v != 0 {
			b.WriteString(sep + strconv.Quote(f.k) + ":" + strconv.FormatInt(f.v, 10))
			sep = ","
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

var contextKeys = []string{"version", "runId", "attempt", "parentRunId", "principal", "provenance",
	"policy", "workspace", "capabilities", "limits"}

// ParseContext strictly decodes a context's JSON form: at most
// MaxContextBytes, no key twice at any depth, no unknown key, version 1,
// runId, attempt, principal, policy and capabilities required, then New's
// checks. Errors are *ContextError (CodeContextInvalid) or, for the
// policy, a *ContextError wrapping the policy's key.
func ParseContext(data []byte) (ExecutionContext, error) {
	m, err := decodeObject(data, contextKeys)
	if err != nil {
		return ExecutionContext{}, err
	}
	for _, k := range []string{"version", "runId", "attempt", "principal", "policy", "capabilities"} {
		if _, ok := m[k]; !ok {
			return ExecutionContext{}, cerr(CodeContextInvalid, k, "required")
		}
	}
	if v, err := intValue(m["version"]); err != nil || v != ContextVersion {
		return ExecutionContext{}, cerr(CodeContextInvalid, "version", "must be %d", ContextVersion)
	}
	var c ExecutionContext
	strs := []struct {
		k   string
		dst *string
	}{{"runId", &c.RunID}, {"parentRunId", &c.ParentRunID}, {"principal", &c.Principal}, {"provenance", &c.Provenance}}
	for _, f := range strs {
		if v, ok := m[f.k]; ok {
			s, ok := v.(string)
			if !ok {
				return ExecutionContext{}, cerr(CodeContextInvalid, f.k, "must be a string")
			}
			*f.dst = s
		}
	}
	a, err := intValue(m["attempt"])
	if err != nil || a < 1 || a > MaxAttempt {
		return ExecutionContext{}, cerr(CodeContextInvalid, "attempt", "must be an integer 1 to %d", MaxAttempt)
	}
	c.Attempt = int(a)
	if c.Policy, err = policyMember(m["policy"]); err != nil {
		return ExecutionContext{}, err
	}
	if v, ok := m["workspace"]; ok {
		w, err := workspaceMember(v, true)
		if err != nil {
			return ExecutionContext{}, err
		}
		c.Workspace = w
	}
	if c.Capabilities, err = capsMember(m["capabilities"]); err != nil {
		return ExecutionContext{}, err
	}
	if v, ok := m["limits"]; ok {
		if c.Limits, err = limitsMember(v, false); err != nil {
			return ExecutionContext{}, err
		}
	}
	return New(c)
}

// UnmarshalJSON is ParseContext.
func (c *ExecutionContext) UnmarshalJSON(data []byte) error {
	x, err := ParseContext(data)
	if err != nil {
		return err
	}
	*c = x
	return nil
}

var narrowingKeys = []string{"version", "principal", "policy", "workspace", "capabilities", "limits"}

// ParseNarrowing strictly decodes a caller's narrowing (the executionContext
// member of a req frame): an object of at most MaxContextBytes with the
// optional keys version (1), principal, policy, workspace {root, mode
// (optional)}, capabilities and limits {maxFileBytes, maxTimeoutMs,
// maxOutputBytes, each 1 to MaxLimit}. runId and the other identity
// fields are the controller's and refused as unknown keys.
func ParseNarrowing(data []byte) (Narrowing, error) {
	var n Narrowing
	m, err := decodeObject(data, narrowingKeys)
	if err != nil {
		return n, err
	}
	if v, ok := m["version"]; ok {
		if x, err := intValue(v); err != nil || x != ContextVersion {
			return n, cerr(CodeContextInvalid, "version", "must be %d", ContextVersion)
		}
	}
	if v, ok := m["principal"]; ok {
		s, ok := v.(string)
		if !ok || s == "" {
			return n, cerr(CodeContextInvalid, "principal", "must be a non-empty string")
		}
		n.Principal = s
	}
	if v, ok := m["policy"]; ok {
		p, err := policyMember(v)
		if err != nil {
			return n, err
		}
		n.Policy = &p
	}
	if v, ok := m["workspace"]; ok {
		if n.Workspace, err = workspaceMember(v, false); err != nil {
			return n, err
		}
	}
	if v, ok := m["capabilities"]; ok {
		if n.Capabilities, err = capsMember(v); err != nil {
			return n, err
		}
		n.HasCapabilities = true
	}
	if v, ok := m["limits"]; ok {
		if n.Limits, err = limitsMember(v, true); err != nil {
			return n, err
		}
	}
	return n, nil
}

func decodeObject(data []byte, keys []string) (map[string]any, error) {
	data = bytes.TrimSpace(data)
	if len(data) > MaxContextBytes {
		return nil, cerr(CodeContextInvalid, "", "longer than %d bytes", MaxContextBytes)
	}
	v, err := decodeJSON(data)
	if err != nil {
		return nil, wrapParse(err, "")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, cerr(CodeContextInvalid, "", "must be a JSON object")
	}
	for k := range m {
		if !contains(keys, k) {
			return nil, cerr(CodeContextInvalid, safeKey(k), "unknown key")
		}
	}
	return m, nil
}

func wrapParse(err error, prefix string) error {
	var pe *ParseError
	if errors.As(err, &pe) {
		return &ContextError{Code: CodeContextInvalid, Field: prefix + pe.Key, Reason: pe.Reason}
	}
	return &ContextError{Code: CodeContextInvalid, Field: strings.TrimSuffix(prefix, "."), Reason: err.Error()}
}

func policyMember(v any) (ToolPolicy, error) {
	pm, ok := v.(map[string]any)
	if !ok {
		return ToolPolicy{}, cerr(CodeContextInvalid, "policy", "must be an object")
	}
	p, err := parseTable(pm, policyKeys, "")
	if err != nil {
		return ToolPolicy{}, wrapParse(err, "policy.")
	}
	return p, nil
}

func workspaceMember(v any, modeRequired bool) (*Workspace, error) {
	wm, ok := v.(map[string]any)
	if !ok {
		return nil, cerr(CodeContextInvalid, "workspace", "must be an object {root, mode}")
	}
	var w Workspace
	for k, x := range wm {
		s, isStr := x.(string)
		switch {
		case k == "root" && isStr:
			w.Root = s
		case k == "mode" && isStr:
			w.Mode = s
		case k == "root" || k == "mode":
			return nil, cerr(CodeContextInvalid, "workspace."+k, "must be a string")
		default:
			return nil, cerr(CodeContextInvalid, "workspace."+safeKey(k), "unknown key")
		}
	}
	if err := CheckRoot(w.Root); err != nil {
		return nil, cerr(CodeContextInvalid, "workspace.root", "%s", err.Error())
	}
	if w.Mode == "" && modeRequired || w.Mode != "" && w.Mode != WorkspaceReadOnly && w.Mode != WorkspaceReadWrite {
		return nil, cerr(CodeContextInvalid, "workspace.mode", `must be "read_only" or "read_write"`)
	}
	return &w, nil
}

func capsMember(v any) ([]string, error) {
	xs, err := stringList("capabilities", v)
	if err != nil {
		return nil, wrapParse(err, "")
	}
	return checkCaps("capabilities", xs)
}

func limitsMember(v any, positive bool) (Limits, error) {
	lm, ok := v.(map[string]any)
	if !ok {
		return Limits{}, cerr(CodeContextInvalid, "limits", "must be an object")
	}
	var l Limits
	for k, x := range lm {
		var dst *int64
		switch k {
		case "maxFileBytes":
			dst = &l.MaxFileBytes
		case "maxTimeoutMs":
			dst = &l.MaxTimeoutMs
		case "maxOutputBytes":
			dst = &l.MaxOutputBytes
		default:
			return Limits{}, cerr(CodeContextInvalid, "limits."+safeKey(k), "unknown key")
		}
		n, err := limitValue("limits."+k, x)
		if err != nil || (positive && n == 0) {
			lo := 0
			if positive {
				lo = 1
			}
			return Limits{}, cerr(CodeContextInvalid, "limits."+k, "must be an integer %d to %d", lo, int64(MaxLimit))
		}
		*dst = n
	}
	return l, nil
}

func intValue(v any) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, errors.New("not a number")
	}
	return strconv.ParseInt(string(n), 10, 64)
}
