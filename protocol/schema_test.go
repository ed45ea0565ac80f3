package protocol

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func ip(n int) *int           { return &n }
func fp(f float64) *float64   { return &f }
func bp(b bool) *bool         { return &b }
func str(n int) string        { return strings.Repeat("a", n) }
func jstr(s string) string    { b, _ := json.Marshal(s); return string(b) }
func obj(kv ...string) string { return "{" + strings.Join(kv, ",") + "}" }

// echoSchema is the example method of docs/PLUGINS.md: {nodeId, message}
// with message a string of at most 1,024 bytes.
func echoSchema() *Schema {
	return &Schema{Type: "object", AdditionalProperties: bp(false), Required: []string{"nodeId", "message"},
		Properties: map[string]*Schema{
			"nodeId":  {Type: "string", MinLength: ip(1), MaxLength: ip(256)},
			"message": {Type: "string", MaxLength: ip(1024)},
		}}
}

func TestSchemaValidateBoundaries(t *testing.T) {
	full := &Schema{Type: "object", AdditionalProperties: bp(false), Required: []string{"nodeId"},
		Properties: map[string]*Schema{
			"nodeId": {Type: "string", MinLength: ip(1), MaxLength: ip(8)},
			"s":      {Type: "string", MinLength: ip(2), MaxLength: ip(4)},
			"p":      {Type: "string", Pattern: `^[a-z]+$`, MaxLength: ip(MaxPatternInput)},
			"e":      {Type: "string", Enum: []string{"on", "off"}},
			"i":      {Type: "integer", Minimum: fp(-2), Maximum: fp(10)},
			"n":      {Type: "number", Minimum: fp(0.5), Maximum: fp(1.5)},
			"b":      {Type: "boolean"},
			"z":      {Type: "null"},
			"a":      {Type: "array", MinItems: ip(1), MaxItems: ip(3), Items: &Schema{Type: "integer"}},
			"o": {Type: "object", Required: []string{"k"}, AdditionalProperties: bp(false),
				Properties: map[string]*Schema{"k": {Type: "string", MaxLength: ip(2)}}},
		}}
	if err := CheckSchema(full); err != nil {
		t.Fatal(err)
	}
	n := `"nodeId":"n1"`
	cases := []struct {
		name, params, field string // field "" with ok
		ok                  bool
	}{
		{"minimal", obj(n), "", true},
		{"null params become {} and lack nodeId", `null`, "nodeId", false},
		{"nodeId at maxLength", obj(`"nodeId":"12345678"`), "", true},
		{"nodeId one past maxLength", obj(`"nodeId":"123456789"`), "nodeId", false},
		{"nodeId at minLength-1", obj(`"nodeId":""`), "nodeId", false},
		{"s at minLength", obj(n, `"s":"ab"`), "", true},
		{"s one below minLength", obj(n, `"s":"a"`), "s", false},
		{"s at maxLength", obj(n, `"s":"abcd"`), "", true},
		{"s one past maxLength", obj(n, `"s":"abcde"`), "s", false},
		{"s lengths count UTF-8 bytes: 2 runes, 4 bytes", obj(n, `"s":"éé"`), "", true},
		{"s lengths count UTF-8 bytes: 3 runes, 6 bytes", obj(n, `"s":"ééé"`), "s", false},
		{"s escaped counts decoded bytes", obj(n, `"s":"\u0061\u0062"`), "", true},
		{"s wrong type", obj(n, `"s":5`), "s", false},
		{"pattern match", obj(n, `"p":"abc"`), "", true},
		{"pattern mismatch", obj(n, `"p":"ab1"`), "p", false},
		{"enum in", obj(n, `"e":"on"`), "", true},
		{"enum out", obj(n, `"e":"maybe"`), "e", false},
		{"integer at minimum", obj(n, `"i":-2`), "", true},
		{"integer one below minimum", obj(n, `"i":-3`), "i", false},
		{"integer at maximum", obj(n, `"i":10`), "", true},
		{"integer one past maximum", obj(n, `"i":11`), "i", false},
		{"integer with fraction", obj(n, `"i":1.5`), "i", false},
		{"integer written 1.0", obj(n, `"i":1.0`), "i", false},
		{"integer with exponent", obj(n, `"i":1e1`), "i", false},
		{"integer as string", obj(n, `"i":"1"`), "i", false},
		{"number at minimum", obj(n, `"n":0.5`), "", true},
		{"number below minimum", obj(n, `"n":0.49`), "n", false},
		{"number at maximum", obj(n, `"n":1.5`), "", true},
		{"number past maximum", obj(n, `"n":1.51`), "n", false},
		{"number exponent", obj(n, `"n":1e0`), "", true},
		{"boolean", obj(n, `"b":false`), "", true},
		{"boolean wrong", obj(n, `"b":0`), "b", false},
		{"null", obj(n, `"z":null`), "", true},
		{"null wrong", obj(n, `"z":false`), "z", false},
		{"array at minItems", obj(n, `"a":[1]`), "", true},
		{"array below minItems", obj(n, `"a":[]`), "a", false},
		{"array at maxItems", obj(n, `"a":[1,2,3]`), "", true},
		{"array past maxItems", obj(n, `"a":[1,2,3,4]`), "a", false},
		{"array item wrong type", obj(n, `"a":[1,"x"]`), "a[1]", false},
		{"array wrong type", obj(n, `"a":{}`), "a", false},
		{"nested ok", obj(n, `"o":{"k":"ab"}`), "", true},
		{"nested too long", obj(n, `"o":{"k":"abc"}`), "o.k", false},
		{"nested missing required", obj(n, `"o":{}`), "o.k", false},
		{"nested unknown field", obj(n, `"o":{"k":"a","x":1}`), "o.x", false},
		{"unknown top-level field", obj(n, `"extra":1`), "extra", false},
		{"unknown field not named when not a name", obj(n, `"a b":1`), "?", false},
		{"duplicate key", obj(n, `"s":"ab"`, `"s":"ab"`), "s", false},
		{"duplicate key via escape", obj(n, `"s":"ab"`, `"\u0073":"ab"`), "s", false},
		{"duplicate nodeId", obj(n, n), "nodeId", false},
		{"optional null counts as absent", obj(n, `"s":null`, `"a":null`), "", true},
		{"required null refused", obj(`"nodeId":null`), "nodeId", false},
		{"nested required null refused", obj(n, `"o":{"k":null}`), "o.k", false},
		{"not an object", `[1]`, "", false},
		{"string params", `"x"`, "", false},
		{"trailing data", obj(n) + `{}`, "", false},
		{"invalid JSON", `{"nodeId":`, "", false},
		{"lone surrogate", obj(`"nodeId":"\ud800"`), "", false},
	}
	for _, c := range cases {
		e := full.Validate(json.RawMessage(c.params))
		if CheckJSONLimits([]byte(c.params)) == nil && ValidJSONText([]byte(c.params)) {
			if ec := full.ValidateChecked(json.RawMessage(c.params)); (ec == nil) != (e == nil) || (ec != nil && ec.Message != e.Message) {
				t.Errorf("%s: ValidateChecked %v, Validate %v", c.name, ec, e)
			}
		}
		if c.ok {
			if e != nil {
				t.Errorf("%s: refused: %v", c.name, e)
			}
			continue
		}
		if e == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if e.Code != CodeInvalidParams {
			t.Errorf("%s: code %s", c.name, e.Code)
		}
		field := ""
		if e.Details != nil {
			field = e.Details.Field
		}
		if field != c.field {
			t.Errorf("%s: field %q, want %q (%s)", c.name, field, c.field, e.Message)
		}
		if c.field != "" && c.field != "?" && !strings.Contains(e.Message, "params."+c.field) {
			t.Errorf("%s: message %q does not name params.%s", c.name, e.Message, c.field)
		}
	}
}

// The example family's message: at 1,024 bytes it passes, at 1,025 the
// error names params.message and never carries the value.
func TestSchemaValidateEchoMessageLimit(t *testing.T) {
	s := echoSchema()
	if e := s.Validate(json.RawMessage(obj(`"nodeId":"n"`, `"message":`+jstr(str(1024))))); e != nil {
		t.Fatal(e)
	}
	secret := "SECRET-" + str(1018)
	e := s.Validate(json.RawMessage(obj(`"nodeId":"n"`, `"message":`+jstr(secret))))
	if e == nil || e.Details.Field != "message" || !strings.Contains(e.Message, "params.message") {
		t.Fatalf("got %v", e)
	}
	b, _ := json.Marshal(e)
	if strings.Contains(string(b), "SECRET") {
		t.Fatalf("error echoes the value: %s", b)
	}
}

// Values never reach an error, whichever rule breaks.
func TestSchemaValidateNeverEchoesValues(t *testing.T) {
	s := &Schema{Type: "object", AdditionalProperties: bp(false), Required: []string{"nodeId"},
		Properties: map[string]*Schema{
			"nodeId": {Type: "string"},
			"p":      {Type: "string", Pattern: `^x$`},
			"e":      {Type: "string", Enum: []string{"x"}},
			"i":      {Type: "integer", Maximum: fp(1)},
		}}
	for _, p := range []string{
		obj(`"nodeId":"n"`, `"p":"SECRETVALUE"`),
		obj(`"nodeId":"n"`, `"e":"SECRETVALUE"`),
		obj(`"nodeId":"n"`, `"i":987654321`),
		obj(`"nodeId":"n"`, `"SECRETVALUE ":1`), // not a field name: shown as ?
		obj(`"nodeId":"n"`, `"i":"SECRETVALUE"`),
	} {
		e := s.Validate(json.RawMessage(p))
		if e == nil {
			t.Fatalf("accepted %s", p)
		}
		b, _ := json.Marshal(e)
		if strings.Contains(string(b), "SECRETVALUE") || strings.Contains(string(b), "987654321") {
			t.Fatalf("error echoes a value: %s", b)
		}
	}
}

// Open objects (no additionalProperties) still refuse repeated keys
// inside values the schema does not describe, and the JSON limits apply.
func TestSchemaValidateStrictOutsideDescribedFields(t *testing.T) {
	s := &Schema{Type: "object", Required: []string{"nodeId"}, Properties: map[string]*Schema{"nodeId": {Type: "string"}}}
	if e := s.Validate(json.RawMessage(obj(`"nodeId":"n"`, `"free":{"a":1,"b":2}`))); e != nil {
		t.Fatal(e)
	}
	if e := s.Validate(json.RawMessage(obj(`"nodeId":"n"`, `"free":{"a":1,"a":2}`))); e == nil || e.Code != CodeInvalidParams {
		t.Fatalf("nested duplicate accepted: %v", e)
	}
	// The params object is one level: MaxJSONDepth-1 more pass, one past fails.
	atLimit := strings.Repeat("[", MaxJSONDepth-1) + strings.Repeat("]", MaxJSONDepth-1)
	if e := s.Validate(json.RawMessage(obj(`"nodeId":"n"`, `"free":`+atLimit))); e != nil {
		t.Fatalf("at the depth limit: %v", e)
	}
	deep := strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth)
	if e := s.Validate(json.RawMessage(obj(`"nodeId":"n"`, `"free":`+deep))); e == nil || e.DomainCode() != DomainJSONLimits {
		t.Fatalf("too deep: %v", e)
	}
}

func TestCheckSchema(t *testing.T) {
	bad := map[string]*Schema{
		"unknown type":              {Type: "date"},
		"empty type":                {Type: ""},
		"minLength > maxLength":     {Type: "string", MinLength: ip(3), MaxLength: ip(2)},
		"negative minLength":        {Type: "string", MinLength: ip(-1)},
		"negative maxLength":        {Type: "string", MaxLength: ip(-1)},
		"minItems > maxItems":       {Type: "array", MinItems: ip(2), MaxItems: ip(1)},
		"minimum > maximum":         {Type: "integer", Minimum: fp(2), Maximum: fp(1)},
		"bad pattern":               {Type: "string", Pattern: `(`},
		"backreference (not RE2)":   {Type: "string", Pattern: `(a)\1`},
		"pattern too long":          {Type: "string", Pattern: str(MaxSchemaPattern + 1), MaxLength: ip(1)},
		"pattern without maxLength": {Type: "string", Pattern: "^a$"},
		"pattern over long input":   {Type: "string", Pattern: "^a$", MaxLength: ip(MaxPatternInput + 1)},
		"pattern program too big":   {Type: "string", Pattern: `(.{0,1000})(.{0,1000})z`, MaxLength: ip(8)},
		"enum too long":             {Type: "string", Enum: make([]string, MaxSchemaEnum+1)},
		"enum entry too long":       {Type: "string", Enum: []string{str(MaxSchemaEnumValue + 1)}},
		"required not in props":     {Type: "object", Required: []string{"x"}},
		"required twice":            {Type: "object", Required: []string{"x", "x"}, Properties: map[string]*Schema{"x": {Type: "string"}}},
		"maxLength on integer":      {Type: "integer", MaxLength: ip(3)},
		"pattern on number":         {Type: "number", Pattern: "x"},
		"minimum on string":         {Type: "string", Minimum: fp(1)},
		"items on object":           {Type: "object", Items: &Schema{Type: "string"}},
		"properties on array":       {Type: "array", Properties: map[string]*Schema{}},
		"enum on integer":           {Type: "integer", Enum: []string{"1"}},
		"additionalProperties true": {Type: "object", AdditionalProperties: bp(true)},
		"nil property":              {Type: "object", Properties: map[string]*Schema{"x": nil}},
		"bad property name":         {Type: "object", Properties: map[string]*Schema{"a-b": {Type: "string"}}},
		"bad nested":                {Type: "object", Properties: map[string]*Schema{"x": {Type: "array", Items: &Schema{Type: "strin"}}}},
	}
	for name, s := range bad {
		if err := CheckSchema(s); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	good := []*Schema{
		{Type: "string", MinLength: ip(2), MaxLength: ip(2)},
		{Type: "array", MinItems: ip(0), MaxItems: ip(0)},
		{Type: "integer", Minimum: fp(1), Maximum: fp(1)},
		{Type: "string", Pattern: "[" + strings.Repeat("a", MaxSchemaPattern-2) + "]", MaxLength: ip(MaxPatternInput)},
		echoSchema(),
	}
	for i, s := range good {
		if err := CheckSchema(s); err != nil {
			t.Errorf("good %d: %v", i, err)
		}
	}
	// Nesting: MaxSchemaDepth levels below the top pass, one more fails.
	nest := func(n int) *Schema {
		s := &Schema{Type: "string"}
		for i := 0; i < n; i++ {
			s = &Schema{Type: "array", Items: s}
		}
		return s
	}
	if err := CheckSchema(nest(MaxSchemaDepth)); err != nil {
		t.Fatalf("depth %d: %v", MaxSchemaDepth, err)
	}
	if err := CheckSchema(nest(MaxSchemaDepth + 1)); err == nil {
		t.Fatalf("depth %d accepted", MaxSchemaDepth+1)
	}
}

func TestDecodeSchemaStrict(t *testing.T) {
	ok := `{"type":"object","additionalProperties":false,"required":["nodeId"],"properties":{"nodeId":{"type":"string","maxLength":10}}}`
	if _, err := DecodeSchema([]byte(ok)); err != nil {
		t.Fatal(err)
	}
	for name, raw := range map[string]string{
		"unknown keyword":         `{"type":"string","format":"email"}`,
		"unknown nested keyword":  `{"type":"object","properties":{"x":{"type":"string","$ref":"#"}}}`,
		"oneOf":                   `{"type":"object","oneOf":[]}`,
		"duplicate key":           `{"type":"string","type":"integer"}`,
		"duplicate nested key":    `{"type":"object","properties":{"x":{"type":"string"},"x":{"type":"integer"}}}`,
		"wrong keyword type":      `{"type":"string","maxLength":"10"}`,
		"invalid JSON":            `{"type":`,
		"checked after decoding":  `{"type":"string","minLength":5,"maxLength":4}`,
		"type must be one string": `{"type":["string","null"]}`,
	} {
		if _, err := DecodeSchema([]byte(raw)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCheckMethodDeclaration(t *testing.T) {
	good := echoSchema()
	type decl struct {
		name           string
		version        int
		scope, retry   string
		params         *Schema
		deadline       int
		wantOK         bool
		wantSubstrings string
	}
	cases := []decl{
		{"node.kv.get", 1, ScopeRead, RetryRead, good, 0, true, ""},
		{"node.kv.put", 3, ScopeWrite, RetryMutation, nil, 0, true, ""},
		{"node.kv.delete", 1, "", "", good, 0, true, ""},
		{"node.kv.list", 1, ScopeAdmin, RetryRead, good, MinDeclaredDeadlineMs, true, ""},
		{"node.kv.list", 1, ScopeAdmin, RetryRead, good, MaxDeclaredDeadlineMs, true, ""},
		{"node.kv.list", 1, ScopeAdmin, RetryRead, good, MinDeclaredDeadlineMs - 1, false, "deadlineMs"},
		{"node.kv.list", 1, ScopeAdmin, RetryRead, good, MaxDeclaredDeadlineMs + 1, false, "deadlineMs"},
		{"node.kv.list", 1, ScopeAdmin, RetryRead, good, -1, false, "deadlineMs"},
		{"node.kv.get", 0, ScopeRead, RetryRead, good, 0, false, "version"},
		{"node.kv.get", 1, ScopePairing, RetryRead, good, 0, false, "scope"},
		{"node.kv.get", 1, "admin", RetryRead, good, 0, false, "scope"},
		{"node.kv.get", 1, ScopeRead, "idempotent", good, 0, false, "retry"},
		{"kv.get", 1, ScopeRead, RetryRead, good, 0, false, "name"},
		{"node.kv", 1, ScopeRead, RetryRead, good, 0, false, "name"},
		{"node.KV.get", 1, ScopeRead, RetryRead, good, 0, false, "name"},
		{"node.kv.get ", 1, ScopeRead, RetryRead, good, 0, false, "name"},
		{"node.kv." + str(MaxMethodNameLen-8), 1, ScopeRead, RetryRead, good, 0, true, ""},
		{"node.kv." + str(MaxMethodNameLen-7), 1, ScopeRead, RetryRead, good, 0, false, "name"},
		{"node.kv.get", 1, ScopeRead, RetryRead, &Schema{Type: "string"}, 0, false, "type object"},
		{"node.kv.get", 1, ScopeRead, RetryRead, &Schema{Type: "object", Properties: map[string]*Schema{"nodeId": {Type: "string"}}}, 0, false, "require nodeId"},
		{"node.kv.get", 1, ScopeRead, RetryRead, &Schema{Type: "object", Required: []string{"nodeId"},
			Properties: map[string]*Schema{"nodeId": {Type: "integer"}}}, 0, false, "nodeId as a string"},
		{"node.kv.get", 1, ScopeRead, RetryRead, &Schema{Type: "object", Required: []string{"nodeId"},
			Properties: map[string]*Schema{"nodeId": {Type: "string", Pattern: "("}}}, 0, false, "pattern"},
	}
	for i, c := range cases {
		err := CheckMethodDeclaration(c.name, c.version, c.scope, c.retry, c.params, c.deadline)
		if c.wantOK != (err == nil) {
			t.Errorf("%d %s: err=%v, want ok=%v", i, c.name, err, c.wantOK)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), c.wantSubstrings) {
			t.Errorf("%d: %q lacks %q", i, err, c.wantSubstrings)
		}
	}
}

func TestMethodFamily(t *testing.T) {
	for in, want := range map[string]string{"node.kv.get": "kv", "node.fs.delete.preview": "fs", "node.list": "", "kv.get": ""} {
		if got := MethodFamily(in); got != want {
			t.Errorf("%s: %q", in, got)
		}
	}
}

// FuzzSchemaValidate: Validate never panics, and whatever it accepts is
// one JSON object without repeated keys.
func FuzzSchemaValidate(f *testing.F) {
	for _, s := range []string{`{"nodeId":"n","message":"hi"}`, `{}`, `null`, `[1]`, `{"nodeId":"n","nodeId":"n"}`,
		`{"nodeId":"n","message":"\ud800"}`, `{"nodeId":1}`} {
		f.Add(s)
	}
	s := echoSchema()
	f.Fuzz(func(t *testing.T, in string) {
		e := s.Validate(json.RawMessage(in))
		if CheckJSONLimits([]byte(in)) == nil && ValidJSONText([]byte(in)) {
			if ec := s.ValidateChecked(json.RawMessage(in)); (ec == nil) != (e == nil) {
				t.Fatalf("ValidateChecked %v, Validate %v on %q", ec, e, in)
			}
		}
		if e != nil {
			if e.Code != CodeInvalidParams {
				t.Fatalf("code %s", e.Code)
			}
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(in), &m); err != nil {
			t.Fatalf("accepted non-object %q", in)
		}
		if CheckObjectKeys([]byte(in), nil) != nil {
			t.Fatalf("accepted repeated keys %q", in)
		}
	})
}

// The bounds on what a declared pattern and enum can cost: an enum of
// MaxSchemaEnum entries of MaxSchemaEnumValue bytes is accepted, and one
// validation runs at most MaxPatternBytes through patterns (at the budget
// it passes, one byte past it is refused naming the field).
func TestSchemaPatternAndEnumCostBounds(t *testing.T) {
	enum := make([]string, MaxSchemaEnum)
	for i := range enum {
		enum[i] = fmt.Sprintf("%0*d", MaxSchemaEnumValue, i)
	}
	if err := CheckSchema(&Schema{Type: "string", Enum: enum}); err != nil {
		t.Fatalf("enum at the bounds: %v", err)
	}
	item := 64
	s := &Schema{Type: "object", Required: []string{"nodeId"}, Properties: map[string]*Schema{
		"nodeId": {Type: "string"},
		"a":      {Type: "array", Items: &Schema{Type: "string", Pattern: "^a+$", MaxLength: &item}}}}
	if err := CheckSchema(s); err != nil {
		t.Fatal(err)
	}
	params := func(n int) json.RawMessage {
		items := make([]string, n/item)
		for i := range items {
			items[i] = `"` + strings.Repeat("a", item) + `"`
		}
		return json.RawMessage(`{"nodeId":"n1","a":[` + strings.Join(items, ",") + `]}`)
	}
	if e := s.Validate(params(MaxPatternBytes)); e != nil {
		t.Fatalf("%d pattern bytes: %v", MaxPatternBytes, e)
	}
	if e := s.Validate(params(MaxPatternBytes + item)); e == nil || e.Code != CodeInvalidParams || !strings.Contains(e.Message, "patterns check") {
		t.Fatalf("%d pattern bytes: %v, want INVALID_PARAMS", MaxPatternBytes+item, e)
	}
}

// TestSchemaTypeMessages: a value of the wrong type names the declared
// type with its article ("an integer", "a number").
func TestSchemaTypeMessages(t *testing.T) {
	s := &Schema{Type: "object", AdditionalProperties: bp(false), Properties: map[string]*Schema{
		"i": {Type: "integer"}, "n": {Type: "number"}}}
	for params, want := range map[string]string{
		`{"i":"high"}`: "params.i must be an integer",
		`{"n":"high"}`: "params.n must be a number",
		`{"i":1.5}`:    "params.i must be an integer",
	} {
		err := s.Validate(json.RawMessage(params))
		if err == nil || err.Message != want {
			t.Errorf("%s: %v, want %q", params, err, want)
		}
	}
}
