package host

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// member is one top-level member of a JSON object: key is the raw quoted
// key as it appeared, value the raw value.
type member struct {
	key, value []byte
}

var errNotObject = errors.New("not a JSON object")

// splitObject returns the top-level members of a JSON object, in order,
// without decoding any value. It is the fast path for large params
// (a 1.4 MB dataBase64 string crosses it at memory speed; encoding/json
// would scan it twice). data must already be valid JSON within limits
// (the worker checks every frame); malformed input still fails safely.
func splitObject(data []byte) ([]member, error) {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, errNotObject
	}
	i = skipWS(data, i+1)
	var out []member
	if i < len(data) && data[i] == '}' {
		return out, trailing(data, i+1)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return nil, errNotObject
		}
		kEnd, err := skipString(data, i)
		if err != nil {
			return nil, err
		}
		key := data[i:kEnd]
		i = skipWS(data, kEnd)
		if i >= len(data) || data[i] != ':' {
			return nil, errNotObject
		}
		i = skipWS(data, i+1)
		vEnd, err := skipValue(data, i)
		if err != nil {
			return nil, err
		}
		out = append(out, member{key: key, value: data[i:vEnd]})
		i = skipWS(data, vEnd)
		if i >= len(data) {
			return nil, errNotObject
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
		case '}':
			return out, trailing(data, i+1)
		default:
			return nil, errNotObject
		}
	}
}

func trailing(data []byte, i int) error {
	if skipWS(data, i) != len(data) {
		return errNotObject
	}
	return nil
}

func skipWS(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at data[i].
// It looks for the closing quote and for backslashes with IndexByte
// (vectorised), so a long base64 string costs two memchr passes.
func skipString(data []byte, i int) (int, error) {
	j, q := i+1, -1
	for {
		if q < j {
			k := bytes.IndexByte(data[j:], '"')
			if k < 0 {
				return 0, errNotObject
			}
			q = j + k
		}
		b := bytes.IndexByte(data[j:q], '\\')
		if b < 0 {
			return q + 1, nil
		}
		j += b + 2 // skip the escaped byte
		if j > len(data) {
			return 0, errNotObject
		}
	}
}

// skipValue returns the index just past the value starting at data[i].
func skipValue(data []byte, i int) (int, error) {
	if i >= len(data) {
		return 0, errNotObject
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, err := skipString(data, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errNotObject
	}
	j := i
	for j < len(data) && !bytes.ContainsRune([]byte(",}] \t\r\n"), rune(data[j])) {
		j++
	}
	if j == i {
		return 0, errNotObject
	}
	return j, nil
}

// keyString decodes a raw quoted key as encoding/json would (escapes
// resolved, invalid UTF-8 replaced by U+FFFD).
func keyString(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// stringContent returns the bytes of a JSON string value: directly when
// it has no escapes (base64 never needs one), else decoded. ok is false
// when raw is not a string.
func stringContent(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1], true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil, false
	}
	return []byte(s), true
}

// joinObject writes members back as one JSON object.
func joinObject(ms []member, extra int) []byte {
	n := 2 + extra
	for _, m := range ms {
		n += len(m.key) + len(m.value) + 2
	}
	out := make([]byte, 0, n)
	out = append(out, '{')
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, m.key...)
		out = append(out, ':')
		out = append(out, m.value...)
	}
	return append(out, '}')
}
