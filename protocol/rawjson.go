package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// Raw JSON objects: the fast path for frames that carry large values.
//
// A 1 MiB file chunk crosses the wire as a 1.4 MB base64 string. Every
// frame is checked once on arrival (CheckJSONLimits, a zero-allocation
// scanner); after that, encoding/json would walk the string again at each
// Unmarshal into a json.RawMessage field (validate, then copy) and at each
// Marshal of one (compact). The functions here split an object into its
// top-level members without decoding values, find the closing quote of a
// long string with bytes.IndexByte, and build frames by appending the
// already validated bytes, producing exactly the bytes json.Marshal would.

// Member is one top-level member of a JSON object as it appears in the
// text: Key is the quoted key, Value the raw value, both slices of the
// input (no copy).
type Member struct {
	Key, Value []byte
}

// ErrNotObject: the input is not a single JSON object.
var ErrNotObject = errors.New("json value is not an object")

// SplitObject returns the top-level members of a JSON object, in order,
// without decoding any value; repeated keys are all returned. data should
// already be valid JSON (CheckJSONLimits): the scanner checks the object's
// own punctuation and finds the end of every string, but does not check
// the syntax inside nested values or scalars. Malformed input fails safely
// (ErrNotObject) or yields members a later decode refuses; it never panics.
func SplitObject(data []byte) ([]Member, error) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, ErrNotObject
	}
	i = skipSpace(data, i+1)
	out := make([]Member, 0, 8)
	if i < len(data) && data[i] == '}' {
		return out, endOfText(data, i+1)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return nil, ErrNotObject
		}
		kEnd, ok := skipRawString(data, i)
		if !ok {
			return nil, ErrNotObject
		}
		key := data[i:kEnd]
		i = skipSpace(data, kEnd)
		if i >= len(data) || data[i] != ':' {
			return nil, ErrNotObject
		}
		i = skipSpace(data, i+1)
		vEnd, ok := skipRawValue(data, i)
		if !ok {
			return nil, ErrNotObject
		}
		out = append(out, Member{Key: key, Value: data[i:vEnd]})
		i = skipSpace(data, vEnd)
		if i >= len(data) {
			return nil, ErrNotObject
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return out, endOfText(data, i+1)
		default:
			return nil, ErrNotObject
		}
	}
}

func endOfText(data []byte, i int) error {
	if skipSpace(data, i) != len(data) {
		return ErrNotObject
	}
	return nil
}

// skipRawString returns the index just past the string starting at
// data[i] (a quote). It finds the closing quote and any backslashes with
// bytes.IndexByte (vectorised), so a long base64 string costs two memchr
// passes. It does not check the string's content.
func skipRawString(data []byte, i int) (int, bool) {
	j, q := i+1, -1
	for {
		if q < j {
			k := bytes.IndexByte(data[j:], '"')
			if k < 0 {
				return 0, false
			}
			q = j + k
		}
		b := bytes.IndexByte(data[j:q], '\\')
		if b < 0 {
			return q + 1, true
		}
		j += b + 2 // skip the escaped byte
		if j > len(data) {
			return 0, false
		}
	}
}

// skipRawValue returns the index just past the value starting at data[i].
func skipRawValue(data []byte, i int) (int, bool) {
	if i >= len(data) {
		return 0, false
	}
	switch data[i] {
	case '"':
		return skipRawString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, ok := skipRawString(data, j)
				if !ok {
					return 0, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	}
	j := i
	for j < len(data) {
		switch data[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			if j == i {
				return 0, false
			}
			return j, true
		}
		j++
	}
	return j, j > i
}

// Name returns the member's key decoded as encoding/json decodes it
// (escapes resolved, invalid UTF-8 replaced by U+FFFD), or "" when the key
// is not a well-formed string.
func (m Member) Name() string {
	raw := m.Key
	if len(raw) >= 2 && bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// Is reports whether the key is exactly name, written without escapes.
// A key that spells name with escapes ("\u006eodeId") is not: callers
// that refuse anything but the plain spelling use Is, callers that must
// read keys as encoding/json does use Name.
func (m Member) Is(name string) bool {
	return len(m.Key) == len(name)+2 && string(m.Key[1:len(m.Key)-1]) == name
}

// StringContent returns the bytes a JSON string value stands for: a slice
// of raw itself when it holds no escape (base64 never needs one), else a
// decoded copy (invalid UTF-8 and lone surrogates become U+FFFD, as in
// encoding/json). ok is false when raw is not a well-formed JSON string.
func StringContent(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		if end, ok := scanString(raw, 1); !ok || end != len(raw) {
			return nil, false // a control byte inside, or a quote before the end
		}
		return raw[1 : len(raw)-1], true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil, false
	}
	return []byte(s), true
}

// AppendObject appends the members as one JSON object: {k1:v1,k2:v2}.
func AppendObject(dst []byte, ms []Member) []byte {
	n := 2
	for _, m := range ms {
		n += len(m.Key) + len(m.Value) + 2
	}
	dst = grow(dst, n)
	dst = append(dst, '{')
	for i, m := range ms {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, m.Key...)
		dst = append(dst, ':')
		dst = append(dst, m.Value...)
	}
	return append(dst, '}')
}

// grow makes room for n more bytes at the end of dst.
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	out := make([]byte, len(dst), len(dst)+n)
	copy(out, dst)
	return out
}

// AppendString appends s as a JSON string, exactly as json.Marshal(s)
// writes it (HTML-sensitive characters, U+2028 and U+2029 escaped,
// invalid UTF-8 replaced by U+FFFD).
func AppendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always marshals
			return append(dst, b...)
		}
	}
	dst = grow(dst, len(s)+2)
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// AppendRaw appends the JSON value raw exactly as json.Marshal writes a
// json.RawMessage holding it: compacted, with <, >, &, U+2028 and U+2029
// escaped; nil is null. raw must be valid JSON (checked on arrival or
// built by this program): when it has nothing to compact or escape, which
// a quick scan tells, its bytes are copied without being parsed again.
// Otherwise, and for an empty non-nil raw, encoding/json does the work and
// its error is returned.
func AppendRaw(dst []byte, raw json.RawMessage) ([]byte, error) {
	if raw == nil {
		return append(dst, "null"...), nil
	}
	if len(raw) == 0 || needsRewrite(raw) {
		b, err := json.Marshal(raw)
		if err != nil {
			return dst, err
		}
		return append(dst, b...), nil
	}
	return append(dst, raw...), nil
}

// needsRewrite reports whether json.Marshal would write raw differently
// from raw itself: whitespace outside strings (compacted away) or a byte
// it escapes ('<', '>', '&', and 0xE2, the lead byte of U+2028 and U+2029;
// any 0xE2 counts, so some raws are sent the slow way needlessly).
func needsRewrite(raw []byte) bool {
	for _, c := range []byte{'<', '>', '&', 0xE2} {
		if bytes.IndexByte(raw, c) >= 0 {
			return true
		}
	}
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case ' ', '\t', '\r', '\n':
			return true
		case '"':
			end, ok := skipRawString(raw, i)
			if !ok {
				return true // not valid JSON: let encoding/json say so
			}
			i = end - 1
		}
	}
	return false
}

// binding names a struct field for decodeMembers: the field's JSON name and
// a pointer to it (*string, *json.RawMessage, or any pointer json.Unmarshal
// accepts).
type binding struct {
	name string
	dst  any
}

// decodeMembers decodes the members of a valid JSON object into the bound
// fields exactly as json.Unmarshal does into a struct with those fields:
// a key matches a field by exact name, else case-insensitively
// (bytes.EqualFold, which is encoding/json's rule); members are applied in
// order, so the last of repeated keys wins (null leaves a string field
// unchanged); other keys are ignored; a value of the wrong type is an
// error. json.RawMessage fields alias the input instead of copying it.
func decodeMembers(ms []Member, bs []binding) error {
	for _, m := range ms {
		b := matchBinding(m.Key, bs)
		if b == nil {
			continue
		}
		if err := decodeValue(m.Value, b.dst); err != nil {
			return err
		}
	}
	return nil
}

func matchBinding(rawKey []byte, bs []binding) *binding {
	if len(rawKey) < 2 {
		return nil
	}
	key := rawKey[1 : len(rawKey)-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		var s string
		if json.Unmarshal(rawKey, &s) != nil {
			return nil
		}
		key = []byte(s)
	}
	for i := range bs {
		if string(key) == bs[i].name {
			return &bs[i]
		}
	}
	for i := range bs {
		if bytes.EqualFold(key, []byte(bs[i].name)) {
			return &bs[i]
		}
	}
	return nil
}

func decodeValue(v []byte, dst any) error {
	switch d := dst.(type) {
	case *json.RawMessage:
		*d = v
		return nil
	case *string:
		if s, ok := plainString(v); ok {
			*d = s
			return nil
		}
	}
	return json.Unmarshal(v, dst)
}

// plainString returns the content of a JSON string of printable ASCII
// without escapes, whose decoding is the bytes themselves.
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	for _, c := range v[1 : len(v)-1] {
		if c < 0x20 || c >= 0x80 || c == '\\' || c == '"' {
			return "", false
		}
	}
	return string(v[1 : len(v)-1]), true
}
