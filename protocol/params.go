package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// DecodeParams decodes params strictly into v: unknown fields, trailing
// data and wrong types are INVALID_PARAMS errors that name the field but
// never echo a value. Missing params decode as {}.
//
// It is stricter than encoding/json in three ways, so that the controller
// and the node can never read one request two ways: a top-level key must
// equal a field's JSON name exactly (encoding/json matches keys without
// regard to case), no top-level key may appear twice (encoding/json lets
// the last one win), and the text must be valid UTF-8 without unpaired
// UTF-16 surrogate escapes (encoding/json silently turns both into U+FFFD,
// so two different names or paths would decode to the same string).
func DecodeParams(params json.RawMessage, v any) *Error {
	if len(bytes.TrimSpace(params)) == 0 || string(bytes.TrimSpace(params)) == "null" {
		params = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if ok := asTypeErr(err, &te); ok {
			f := safeFieldPath(te.Field)
			return InvalidParams(f, "field "+f+" has the wrong type")
		}
		msg := err.Error()
		if strings.HasPrefix(msg, "json: unknown field ") {
			// Only a key that looks like a field name is named, as in
			// CheckObjectKeys: a key is request content too.
			f := strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
			if !isIdentifier(f) {
				f = "?"
			}
			return InvalidParams(f, "unknown field "+f)
		}
		return InvalidParams("", "params must be a JSON object")
	}
	if dec.More() {
		return InvalidParams("", "params must be a single JSON object")
	}
	if !ValidJSONText(params) {
		return InvalidParams("", "params must be valid UTF-8 without unpaired surrogate escapes")
	}
	return CheckObjectKeys(params, structFields(v))
}

// safeFieldPath returns a dotted field path when every element looks like
// a field name, else "?" (a map key in the path is request content).
func safeFieldPath(path string) string {
	if path == "" {
		return ""
	}
	if len(path) > 128 {
		return "?"
	}
	for _, part := range strings.Split(path, ".") {
		if !isIdentifier(part) {
			return "?"
		}
	}
	return path
}

func asTypeErr(err error, target **json.UnmarshalTypeError) bool {
	te, ok := err.(*json.UnmarshalTypeError)
	if ok {
		*target = te
	}
	return ok
}

// ValidJSONText reports whether the JSON text raw is valid UTF-8 and every
// \u escape of a UTF-16 surrogate is part of a high-low pair. Both kinds of
// fault decode to U+FFFD in encoding/json without an error. It does not
// check the JSON syntax otherwise.
func ValidJSONText(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	for i := 0; ; {
		j := bytes.IndexByte(raw[i:], '\\')
		if j < 0 {
			return true
		}
		i += j + 1
		if i >= len(raw) {
			return true
		}
		if raw[i] != 'u' {
			i++ // a two-byte escape such as \\ or \"
			continue
		}
		r, ok := hex4(raw, i+1)
		if !ok {
			return true // not valid JSON; the decoder refuses it
		}
		i += 5
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return false // a low surrogate without its high half
		case r >= 0xD800 && r <= 0xDBFF:
			if i+1 >= len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
				return false
			}
			lo, ok := hex4(raw, i+2)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return false
			}
			i += 6
		}
	}
}

func hex4(b []byte, i int) (rune, bool) {
	if len(b)-i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// CheckObjectKeys checks the top-level keys of raw, a JSON object that has
// already been decoded successfully (anything else is refused as not an
// object): no key may appear twice, and when fields is non-nil every key
// must be one of fields, spelled exactly. The error names a key only when
// it looks like a field name (1–64 ASCII letters, digits or '_'): a key is
// request content too.
func CheckObjectKeys(raw []byte, fields map[string]bool) *Error {
	notObject := InvalidParams("", "params must be a JSON object")
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return notObject
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return nil
	}
	seen := map[string]bool{}
	for {
		if i >= len(raw) || raw[i] != '"' {
			return notObject
		}
		end, ok := scanString(raw, i+1)
		if !ok {
			return notObject
		}
		key := string(raw[i+1 : end-1])
		if strings.IndexByte(key, '\\') >= 0 {
			if json.Unmarshal(raw[i:end], &key) != nil {
				return notObject
			}
		}
		name := key
		if !isIdentifier(name) {
			name = "?"
		}
		if seen[key] {
			return InvalidParams(name, "duplicate field "+name)
		}
		seen[key] = true
		if fields != nil && !fields[key] {
			return InvalidParams(name, "unknown field "+name)
		}
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return notObject
		}
		if i, ok = skipMember(raw, i+1); !ok {
			return notObject
		}
		if raw[i] == '}' {
			return nil
		}
		i = skipSpace(raw, i+1) // past ','
	}
}

// skipMember returns the index of the ',' or '}' that ends the object
// member value starting at or after i.
func skipMember(raw []byte, i int) (int, bool) {
	depth := 0
	for i < len(raw) {
		switch raw[i] {
		case '"':
			j, ok := scanString(raw, i+1)
			if !ok {
				return i, false
			}
			i = j
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i, raw[i] == '}'
			}
			depth--
		case ',':
			if depth == 0 {
				return i, true
			}
		}
		i++
	}
	return i, false
}

var fieldCache sync.Map // reflect.Type -> map[string]bool

// structFields returns the exact JSON names encoding/json decodes into
// when v points to a struct, or nil for anything else (no name check).
func structFields(v any) map[string]bool {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	t = t.Elem()
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]bool)
	}
	m := map[string]bool{}
	addFields(t, m, 0)
	fieldCache.Store(t, m)
	return m
}

func addFields(t reflect.Type, m map[string]bool, depth int) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && depth < 8 {
				addFields(ft, m, depth+1)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = true
	}
}

// RequireNodeID checks the nodeId every node method carries.
func RequireNodeID(nodeID string) *Error {
	if strings.TrimSpace(nodeID) == "" {
		return InvalidParams("nodeId", "nodeId is required")
	}
	if len(nodeID) > 256 || !utf8.ValidString(nodeID) {
		return InvalidParams("nodeId", "nodeId is malformed")
	}
	// No control or invisible format character: a nodeId is echoed in
	// approval records, receipts and the CLI's tables (nodeIds the
	// controller assigns are "node-" and hex).
	for _, r := range nodeID {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return InvalidParams("nodeId", "nodeId is malformed")
		}
	}
	return nil
}
