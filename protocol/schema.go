package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"sync"
)

// Validation of params against a declared Schema and checks of the
// declarations themselves (docs/PLUGINS.md, "Declaring a method").

// Bounds on a declaration.
const (
	// MinDeclaredDeadlineMs and MaxDeclaredDeadlineMs bound a declared
	// deadline (0 means DefaultTimeoutMs).
	MinDeclaredDeadlineMs = 1000
	MaxDeclaredDeadlineMs = 3_600_000
	// MaxSchemaDepth bounds how deeply schemas nest (properties, items).
	MaxSchemaDepth = 16
	// MaxSchemaPattern bounds a pattern's length in bytes.
	MaxSchemaPattern = 1024
	// MaxPatternProgram bounds a pattern's compiled RE2 program, in
	// instructions: `.{0,1000}` alone compiles to thousands, and RE2's
	// time is linear in program size × input length.
	MaxPatternProgram = 1000
	// MaxPatternInput is the largest maxLength a string with a pattern
	// may declare: a pattern needs a maxLength of at most this many
	// bytes, so one match costs at most MaxPatternProgram ×
	// MaxPatternInput steps.
	MaxPatternInput = 4096
	// MaxSchemaEnum bounds an enum's entries, and MaxSchemaEnumValue the
	// bytes of each.
	MaxSchemaEnum      = 256
	MaxSchemaEnumValue = 256
	// MaxPatternBytes bounds the bytes one validation runs through
	// patterns in all (an array of many pattern-checked strings): past it
	// the params are refused, so one request costs at most
	// MaxPatternProgram × MaxPatternBytes regexp steps.
	MaxPatternBytes = 64 << 10
	// MaxMethodNameLen bounds a declared method name in bytes.
	MaxMethodNameLen = 128
)

var (
	methodNameRE = regexp.MustCompile(`^node\.[a-z][a-z0-9_]*(\.[a-z][a-zA-Z0-9_]*)+$`)
	schemaTypes  = map[string]bool{"object": true, "string": true, "integer": true, "number": true,
		"boolean": true, "array": true, "null": true}
	patternCache sync.Map // pattern -> *regexp.Regexp
)

// ValidMethodName reports whether name has the shape of a declared node
// method: node.<family>.<name>[.<name>...], lowercase family, at most
// MaxMethodNameLen bytes.
func ValidMethodName(name string) bool {
	return len(name) <= MaxMethodNameLen && methodNameRE.MatchString(name)
}

// MethodFamily returns the <family> of node.<family>.<rest>, or "".
func MethodFamily(name string) string {
	rest, ok := strings.CutPrefix(name, "node.")
	if !ok {
		return ""
	}
	f, _, ok := strings.Cut(rest, ".")
	if !ok {
		return ""
	}
	return f
}

// DeclarationError is a refused declaration; its message names the
// method and the keyword or field at fault, never a params value.
type DeclarationError struct {
	Method string
	Reason string
}

func (e *DeclarationError) Error() string {
	if e.Method == "" {
		return "declaration: " + e.Reason
	}
	return "method " + e.Method + ": " + e.Reason
}

// CheckMethodDeclaration checks one method's declared facts: the name
// pattern (ValidMethodName), version ≥ 1, scope operator.read, write or
// admin (or "" for admin), retry class read or mutation (or ""), a
// deadline of 0 or MinDeclaredDeadlineMs..MaxDeclaredDeadlineMs, and a
// params schema (when not nil) that CheckSchema accepts and is an object
// schema requiring a string nodeId.
func CheckMethodDeclaration(name string, version int, scope, retry string, params *Schema, deadlineMs int) error {
	bad := func(format string, args ...any) error {
		m := name
		if !ValidMethodName(m) {
			m = ""
		}
		return &DeclarationError{Method: m, Reason: fmt.Sprintf(format, args...)}
	}
	if !ValidMethodName(name) {
		return bad("method name must match node.<family>.<name> (lowercase family, at most %d bytes)", MaxMethodNameLen)
	}
	if version < 1 {
		return bad("version must be at least 1")
	}
	switch scope {
	case "", ScopeRead, ScopeWrite, ScopeAdmin:
	default:
		return bad("scope must be %s, %s or %s", ScopeRead, ScopeWrite, ScopeAdmin)
	}
	switch retry {
	case "", RetryRead, RetryMutation:
	default:
		return bad("retry must be %q or %q", RetryRead, RetryMutation)
	}
	if deadlineMs != 0 && (deadlineMs < MinDeclaredDeadlineMs || deadlineMs > MaxDeclaredDeadlineMs) {
		return bad("deadlineMs must be 0 or %d..%d", MinDeclaredDeadlineMs, MaxDeclaredDeadlineMs)
	}
	if params == nil {
		return nil
	}
	if err := CheckSchema(params); err != nil {
		return bad("params schema: %v", err)
	}
	if params.Type != "object" {
		return bad("params schema must be of type object")
	}
	if !hasString(params.Required, "nodeId") {
		return bad("params schema must require nodeId")
	}
	if p := params.Properties["nodeId"]; p == nil || p.Type != "string" {
		return bad("params schema must declare nodeId as a string")
	}
	return nil
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// DecodeSchema decodes a schema strictly: a keyword this subset does not
// have, a key repeated in one object, or a wrong type is an error; the
// result is then checked with CheckSchema.
func DecodeSchema(raw []byte) (*Schema, error) {
	if err := CheckStrictJSON(raw); err != nil {
		return nil, err
	}
	var s Schema
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, schemaDecodeError(err)
	}
	if err := CheckSchema(&s); err != nil {
		return nil, err
	}
	return &s, nil
}

func schemaDecodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("keyword %s has the wrong type", safeFieldPath(te.Field))
	}
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		k := strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
		if !isIdentifier(k) {
			k = "?"
		}
		return fmt.Errorf("unknown keyword %s", k)
	}
	return errors.New("not a valid JSON object")
}

// CheckStrictJSON refuses JSON text that is invalid, beyond the protocol's
// depth and item limits, not valid UTF-8 (or holds an unpaired surrogate
// escape), or has an object anywhere in it with a repeated key.
func CheckStrictJSON(raw []byte) error {
	if err := CheckJSONLimits(raw); err != nil {
		return err
	}
	if !ValidJSONText(raw) {
		return errors.New("JSON text is not valid UTF-8")
	}
	if dupKeys(bytes.TrimSpace(raw), 0) {
		return errors.New("a key appears twice in one object")
	}
	return nil
}

// dupKeys reports whether any object in v (valid JSON) repeats a key.
func dupKeys(v []byte, depth int) bool {
	if len(v) == 0 || depth > MaxJSONDepth {
		return false
	}
	switch v[0] {
	case '{':
		ms, err := SplitObject(v)
		if err != nil {
			return false
		}
		seen := make(map[string]bool, len(ms))
		for _, m := range ms {
			k := m.Name()
			if seen[k] {
				return true
			}
			seen[k] = true
			if dupKeys(m.Value, depth+1) {
				return true
			}
		}
	case '[':
		var items []json.RawMessage
		if json.Unmarshal(v, &items) != nil {
			return false
		}
		for _, it := range items {
			if dupKeys(bytes.TrimSpace(it), depth+1) {
				return true
			}
		}
	}
	return false
}

// CheckSchema checks a schema of the subset: a known type on every node,
// keywords only on the types they apply to, non-negative lengths with
// min ≤ max, a pattern that compiles (RE2, at most MaxSchemaPattern
// bytes), every required name among the properties, enum only on strings,
// nesting at most MaxSchemaDepth deep.
func CheckSchema(s *Schema) error { return checkSchema(s, "schema", 0) }

func checkSchema(s *Schema, at string, depth int) error {
	if s == nil {
		return fmt.Errorf("%s is empty", at)
	}
	if depth > MaxSchemaDepth {
		return fmt.Errorf("%s nests deeper than %d", at, MaxSchemaDepth)
	}
	if !schemaTypes[s.Type] {
		return fmt.Errorf("%s: type must be one of object, string, integer, number, boolean, array, null", at)
	}
	only := func(kw string, set bool, types ...string) error {
		if set && !hasString(types, s.Type) {
			return fmt.Errorf("%s: %s does not apply to type %s", at, kw, s.Type)
		}
		return nil
	}
	for _, c := range []error{
		only("properties", s.Properties != nil, "object"),
		only("required", s.Required != nil, "object"),
		only("additionalProperties", s.AdditionalProperties != nil, "object"),
		only("minLength", s.MinLength != nil, "string"),
		only("maxLength", s.MaxLength != nil, "string"),
		only("pattern", s.Pattern != "", "string"),
		only("enum", s.Enum != nil, "string"),
		only("minimum", s.Minimum != nil, "integer", "number"),
		only("maximum", s.Maximum != nil, "integer", "number"),
		only("items", s.Items != nil, "array"),
		only("minItems", s.MinItems != nil, "array"),
		only("maxItems", s.MaxItems != nil, "array"),
	} {
		if c != nil {
			return c
		}
	}
	if s.AdditionalProperties != nil && *s.AdditionalProperties {
		return fmt.Errorf("%s: additionalProperties may only be false (or absent)", at)
	}
	if err := checkRange(at, "Length", s.MinLength, s.MaxLength); err != nil {
		return err
	}
	if err := checkRange(at, "Items", s.MinItems, s.MaxItems); err != nil {
		return err
	}
	if s.Minimum != nil && s.Maximum != nil && *s.Minimum > *s.Maximum {
		return fmt.Errorf("%s: minimum is greater than maximum", at)
	}
	if s.Pattern != "" {
		if len(s.Pattern) > MaxSchemaPattern {
			return fmt.Errorf("%s: pattern is longer than %d bytes", at, MaxSchemaPattern)
		}
		if _, err := compilePattern(s.Pattern); err != nil {
			return fmt.Errorf("%s: pattern is not a valid RE2 expression", at)
		}
		if n := patternProgramSize(s.Pattern); n > MaxPatternProgram {
			return fmt.Errorf("%s: pattern compiles to %d instructions, more than %d", at, n, MaxPatternProgram)
		}
		if s.MaxLength == nil || *s.MaxLength > MaxPatternInput {
			return fmt.Errorf("%s: a pattern needs a maxLength of at most %d bytes", at, MaxPatternInput)
		}
	}
	if len(s.Enum) > MaxSchemaEnum {
		return fmt.Errorf("%s: enum has more than %d entries", at, MaxSchemaEnum)
	}
	for _, e := range s.Enum {
		if len(e) > MaxSchemaEnumValue {
			return fmt.Errorf("%s: an enum entry is longer than %d bytes", at, MaxSchemaEnumValue)
		}
	}
	seen := map[string]bool{}
	for _, r := range s.Required {
		if seen[r] {
			return fmt.Errorf("%s: required lists %s twice", at, safeName(r))
		}
		seen[r] = true
		if _, ok := s.Properties[r]; !ok {
			return fmt.Errorf("%s: required %s is not among the properties", at, safeName(r))
		}
	}
	for name, p := range s.Properties {
		if !isIdentifier(name) {
			return fmt.Errorf("%s: property names must be 1-64 ASCII letters, digits or _", at)
		}
		if err := checkSchema(p, at+"."+name, depth+1); err != nil {
			return err
		}
	}
	if s.Type == "array" && s.Items != nil {
		if err := checkSchema(s.Items, at+"[]", depth+1); err != nil {
			return err
		}
	}
	return nil
}

func safeName(s string) string {
	if isIdentifier(s) {
		return s
	}
	return "?"
}

func checkRange(at, what string, lo, hi *int) error {
	if lo != nil && *lo < 0 {
		return fmt.Errorf("%s: min%s must not be negative", at, what)
	}
	if hi != nil && *hi < 0 {
		return fmt.Errorf("%s: max%s must not be negative", at, what)
	}
	if lo != nil && hi != nil && *lo > *hi {
		return fmt.Errorf("%s: min%s is greater than max%s", at, what, what)
	}
	return nil
}

// patternProgramSize is the number of instructions p compiles to (a
// valid p; MaxPatternProgram+1 if it does not parse).
func patternProgramSize(p string) int {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return MaxPatternProgram + 1
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return MaxPatternProgram + 1
	}
	return len(prog.Inst)
}

func compilePattern(p string) (*regexp.Regexp, error) {
	if re, ok := patternCache.Load(p); ok {
		return re.(*regexp.Regexp), nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, err
	}
	patternCache.Store(p, re)
	return re, nil
}

// Validate checks params against the schema (already accepted by
// CheckSchema). Missing or null params are {}. The text must pass the
// protocol's JSON limits, be valid UTF-8 without unpaired surrogate
// escapes, and repeat no key in any object. Each refusal is an
// INVALID_PARAMS *Error whose details.field is the dotted path of the
// offending field ("message", "opts.mode", "tags[2]"; "?" stands for a key
// that does not look like a field name) and whose message names the path
// as params.<path> and the broken rule, never the value. A null value of
// an optional property (one not in Required) counts as absent; a required
// one must be present and not null unless its type is "null".
func (s *Schema) Validate(params json.RawMessage) *Error {
	t := bytes.TrimSpace(params)
	if len(t) == 0 || string(t) == "null" {
		t = []byte("{}")
	}
	if err := CheckJSONLimits(t); err != nil {
		if errors.Is(err, ErrTooDeep) || errors.Is(err, ErrTooManyItems) {
			return DomainError(CodeInvalidParams, DomainJSONLimits, "params exceed the JSON depth or item limits")
		}
		return InvalidParams("", "params must be a JSON object")
	}
	if !ValidJSONText(t) {
		return InvalidParams("", "params must be valid UTF-8 without unpaired surrogate escapes")
	}
	return s.validateText(t)
}

// ValidateChecked is Validate for params that already passed
// CheckJSONLimits and ValidJSONText, as the params of every frame the
// controller reads have: it skips those two scans.
func (s *Schema) ValidateChecked(params json.RawMessage) *Error {
	t := bytes.TrimSpace(params)
	if len(t) == 0 || string(t) == "null" {
		t = []byte("{}")
	}
	return s.validateText(t)
}

func (s *Schema) validateText(t []byte) *Error {
	if t[0] != '{' {
		return InvalidParams("", "params must be a JSON object")
	}
	budget := MaxPatternBytes
	if e := s.validate(t, "", &budget); e != nil {
		return e
	}
	// Objects the schema does not describe (open properties, untyped
	// items) repeat no key either.
	if dupKeys(t, 0) {
		return InvalidParams("?", "params repeat a key in one object")
	}
	return nil
}

func nullMember(ms []Member, name string) bool {
	for _, m := range ms {
		if m.Name() == name {
			return string(m.Value) == "null"
		}
	}
	return false
}

func fieldErr(path, rule string) *Error {
	p := "params"
	if path != "" {
		p += "." + path
	}
	return InvalidParams(path, p+" "+rule)
}

func joinPath(path, key string) string {
	if !isIdentifier(key) {
		key = "?"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// validate checks v (one valid JSON value, no surrounding space).
func (s *Schema) validate(v []byte, path string, budget *int) *Error {
	switch s.Type {
	case "object":
		if v[0] != '{' {
			return fieldErr(path, "must be an object")
		}
		ms, err := SplitObject(v)
		if err != nil {
			return fieldErr(path, "must be an object")
		}
		seen := make(map[string]bool, len(ms))
		for _, m := range ms {
			k := m.Name()
			if seen[k] {
				return fieldErr(joinPath(path, k), "appears twice")
			}
			seen[k] = true
			ps, known := s.Properties[k]
			if known && string(m.Value) == "null" && ps.Type != "null" && !hasString(s.Required, k) {
				// An optional property given as null counts as absent,
				// as encoding/json decodes it into an optional field.
				continue
			}
			if !known {
				if s.AdditionalProperties != nil && !*s.AdditionalProperties {
					return fieldErr(joinPath(path, k), "is not a known field")
				}
				continue
			}
			if e := ps.validate(m.Value, joinPath(path, k), budget); e != nil {
				return e
			}
		}
		for _, r := range s.Required {
			if !seen[r] {
				return fieldErr(joinPath(path, r), "is required")
			}
			if ps := s.Properties[r]; ps != nil && ps.Type != "null" && nullMember(ms, r) {
				return fieldErr(joinPath(path, r), "is required")
			}
		}
	case "string":
		if v[0] != '"' {
			return fieldErr(path, "must be a string")
		}
		// v is a valid JSON string: without a backslash its content is
		// the bytes between the quotes (IndexByte is vectorised, so a
		// 1.4 MB base64 string costs one pass).
		var b []byte
		if bytes.IndexByte(v, '\\') < 0 && len(v) >= 2 && v[len(v)-1] == '"' {
			b = v[1 : len(v)-1]
		} else {
			var ok bool
			if b, ok = StringContent(v); !ok {
				return fieldErr(path, "must be a string")
			}
		}
		if s.MinLength != nil && len(b) < *s.MinLength {
			return fieldErr(path, fmt.Sprintf("must be at least %d %s", *s.MinLength, plural(*s.MinLength, "byte", "bytes")))
		}
		if s.MaxLength != nil && len(b) > *s.MaxLength {
			return fieldErr(path, fmt.Sprintf("must be at most %d %s", *s.MaxLength, plural(*s.MaxLength, "byte", "bytes")))
		}
		if s.Enum != nil && !hasString(s.Enum, string(b)) {
			return fieldErr(path, "is not one of the allowed values")
		}
		if s.Pattern != "" {
			if *budget -= len(b); *budget < 0 {
				return fieldErr(path, fmt.Sprintf("is past the %d bytes that patterns check in one request", MaxPatternBytes))
			}
			re, err := compilePattern(s.Pattern)
			if err != nil || !re.Match(b) {
				return fieldErr(path, "does not match the declared pattern")
			}
		}
	case "integer", "number":
		article := "a "
		if s.Type == "integer" {
			article = "an "
		}
		if v[0] != '-' && !isDigit(v[0]) {
			return fieldErr(path, "must be "+article+s.Type)
		}
		if s.Type == "integer" && bytes.ContainsAny(v, ".eE") {
			return fieldErr(path, "must be an integer")
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return fieldErr(path, "must be "+article+s.Type)
		}
		if s.Minimum != nil && f < *s.Minimum {
			return fieldErr(path, "must be at least "+strconv.FormatFloat(*s.Minimum, 'g', -1, 64))
		}
		if s.Maximum != nil && f > *s.Maximum {
			return fieldErr(path, "must be at most "+strconv.FormatFloat(*s.Maximum, 'g', -1, 64))
		}
	case "boolean":
		if string(v) != "true" && string(v) != "false" {
			return fieldErr(path, "must be a boolean")
		}
	case "null":
		if string(v) != "null" {
			return fieldErr(path, "must be null")
		}
	case "array":
		if v[0] != '[' {
			return fieldErr(path, "must be an array")
		}
		var items []json.RawMessage
		if json.Unmarshal(v, &items) != nil {
			return fieldErr(path, "must be an array")
		}
		if s.MinItems != nil && len(items) < *s.MinItems {
			return fieldErr(path, fmt.Sprintf("must hold at least %d items", *s.MinItems))
		}
		if s.MaxItems != nil && len(items) > *s.MaxItems {
			return fieldErr(path, fmt.Sprintf("must hold at most %d items", *s.MaxItems))
		}
		if s.Items != nil {
			for i, it := range items {
				p := path + "[" + strconv.Itoa(i) + "]"
				if e := s.Items.validate(bytes.TrimSpace(it), p, budget); e != nil {
					return e
				}
			}
		}
	default:
		return fieldErr(path, "has an undeclarable type")
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
