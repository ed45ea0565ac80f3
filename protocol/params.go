package protocol

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// DecodeParams decodes params strictly into v: unknown fields, trailing
// data and wrong types are INVALID_PARAMS errors that name the field but
// never echo a value. Missing params decode as {}.
func DecodeParams(params json.RawMessage, v any) *Error {
	if len(bytes.TrimSpace(params)) == 0 || string(bytes.TrimSpace(params)) == "null" {
		params = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if ok := asTypeErr(err, &te); ok {
			return InvalidParams(te.Field, "field "+te.Field+" has the wrong type")
		}
		msg := err.Error()
		if strings.HasPrefix(msg, "json: unknown field ") {
			f := strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
			if len(f) > 64 || !utf8.ValidString(f) {
				f = "?"
			}
			return InvalidParams(f, "unknown field "+f)
		}
		return InvalidParams("", "params must be a JSON object")
	}
	if dec.More() {
		return InvalidParams("", "params must be a single JSON object")
	}
	return nil
}

func asTypeErr(err error, target **json.UnmarshalTypeError) bool {
	te, ok := err.(*json.UnmarshalTypeError)
	if ok {
		*target = te
	}
	return ok
}

// RequireNodeID checks the nodeId every node method carries.
func RequireNodeID(nodeID string) *Error {
	if strings.TrimSpace(nodeID) == "" {
		return InvalidParams("nodeId", "nodeId is required")
	}
	if len(nodeID) > 256 || !utf8.ValidString(nodeID) {
		return InvalidParams("nodeId", "nodeId is malformed")
	}
	return nil
}
