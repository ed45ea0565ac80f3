package sdk

import "lemon/protocol"

// Schema is a method's params schema (docs/PLUGINS.md, "Declaring a
// method"): a JSON Schema subset the controller validates params against
// before it dispatches a call.
type Schema = protocol.Schema

// Params is the params schema of a method: an object of props that
// refuses other fields, whose required list always starts with nodeId.
// nodeId itself is declared here (a string of 1 to 256 bytes).
func Params(props map[string]*Schema, required ...string) *Schema {
	all := map[string]*Schema{"nodeId": String(1, 256)}
	for k, v := range props {
		all[k] = v
	}
	no := false
	return &Schema{Type: "object", AdditionalProperties: &no, Properties: all,
		Required: append([]string{"nodeId"}, required...)}
}

// String is a string of minBytes..maxBytes bytes of UTF-8; maxBytes < 0
// leaves the upper bound open.
func String(minBytes, maxBytes int) *Schema {
	s := &Schema{Type: "string"}
	if minBytes > 0 {
		s.MinLength = &minBytes
	}
	if maxBytes >= 0 {
		s.MaxLength = &maxBytes
	}
	return s
}

// Integer is an integer literal from min to max inclusive.
func Integer(min, max float64) *Schema {
	return &Schema{Type: "integer", Minimum: &min, Maximum: &max}
}

// Boolean is true or false.
func Boolean() *Schema { return &Schema{Type: "boolean"} }

// Array is an array of minItems..maxItems items, each matching items.
func Array(items *Schema, minItems, maxItems int) *Schema {
	return &Schema{Type: "array", Items: items, MinItems: &minItems, MaxItems: &maxItems}
}
