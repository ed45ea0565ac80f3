package protocol

// Method declarations: what a module's manifest says about each method it
// serves (docs/PLUGINS.md, "Declaring a method"). The controller routes,
// validates and classifies node methods from these declarations; the
// hand-written validators of the spec's methods stay as a stricter second
// check.

// Retry classes of a declared method.
const (
	// RetryRead is a pure read: it never changes node state, so a timeout
	// or a lost answer is retrySafe:true, mutationMayHaveApplied:false.
	RetryRead = "read"
	// RetryMutation may change node state (the default when undeclared).
	RetryMutation = "mutation"
)

// Schema is the JSON Schema subset a method's params are declared in.
// Only these keywords exist; a declaration using any other is refused when
// the module set is pinned. Lengths count bytes of UTF-8 for strings and
// elements for arrays; Minimum and Maximum bound numbers inclusively.
//
//	{"type":"object","additionalProperties":false,"required":["nodeId","path"],
//	 "properties":{"nodeId":{"type":"string","minLength":1,"maxLength":128},
//	               "path":{"type":"string","maxLength":4096}}}
type Schema struct {
	// Type is one of "object", "string", "integer", "number", "boolean",
	// "array", "null".
	Type string `json:"type"`
	// Properties and Required apply to objects. AdditionalProperties
	// false refuses fields not in Properties (the only supported value
	// besides absent, which allows them).
	Properties           map[string]*Schema `json:"properties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	AdditionalProperties *bool              `json:"additionalProperties,omitempty"`
	// MinLength, MaxLength and Pattern (RE2 syntax) apply to strings.
	MinLength *int   `json:"minLength,omitempty"`
	MaxLength *int   `json:"maxLength,omitempty"`
	Pattern   string `json:"pattern,omitempty"`
	// Minimum and Maximum apply to integers and numbers.
	Minimum *float64 `json:"minimum,omitempty"`
	Maximum *float64 `json:"maximum,omitempty"`
	// Items, MinItems and MaxItems apply to arrays.
	Items    *Schema `json:"items,omitempty"`
	MinItems *int    `json:"minItems,omitempty"`
	MaxItems *int    `json:"maxItems,omitempty"`
	// Enum, when set, lists the allowed string values.
	Enum []string `json:"enum,omitempty"`
}

// Module states a node reports for each module of its pinned set.
const (
	ModuleLoaded  = "loaded"
	ModuleRefused = "refused"
)

// ModuleStatus is one module of a node's set as the node loaded it: the
// pinned family, version and sha256, and whether it serves. Reason is a
// bounded, content-free classification when State is ModuleRefused
// (for example "digest_mismatch", "imports_not_declared", "compile_failed").
type ModuleStatus struct {
	Family  string `json:"family"`
	Version string `json:"version"`
	SHA256  string `json:"sha256"`
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
}
