package wire

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// Marshal returns the JSON encoding of v, byte for byte what json.Marshal
// returns (see the package doc); its errors are json.Marshal's in kind
// (an unsupported float, an invalid json.RawMessage).
func Marshal(v any) ([]byte, error) { return Append(nil, v) }

// Append appends the JSON encoding of v to b (Marshal).
func Append(b []byte, v any) ([]byte, error) {
	if v == nil {
		return append(b, "null"...), nil
	}
	if raw, ok := v.(json.RawMessage); ok {
		return encRaw(b, unsafe.Pointer(&raw))
	}
	p := planFor(reflect.TypeOf(v))
	if !p.encOK {
		return appendMarshal(b, v)
	}
	// The interface's data word is the value (pointer-shaped types) or
	// points to it; the encoder only reads it.
	data := (*[2]unsafe.Pointer)(unsafe.Pointer(&v))[1]
	if !p.directIface {
		return p.enc(b, data)
	}
	if p.t.Kind() == reflect.Pointer {
		// The word is the pointer: encode what it points to (taking the
		// word's address would move it to the heap).
		if data == nil {
			return append(b, "null"...), nil
		}
		return planFor(p.t.Elem()).enc(b, data)
	}
	// A map or one-pointer struct: the word needs a home of its own.
	word := data
	return p.enc(b, unsafe.Pointer(&word))
}

// appendMarshal is the encoding/json path, for what the plan does not
// cover.
func appendMarshal(b []byte, v any) ([]byte, error) {
	out, err := json.Marshal(v)
	if err != nil {
		return b, err
	}
	return append(b, out...), nil
}

// errUnsupportedFloat is json.Marshal's refusal of NaN and ±Inf.
var errUnsupportedFloat = errors.New("json: unsupported value: NaN or Inf")

// errInvalidRaw is json.Marshal's refusal of a json.RawMessage that is
// not one JSON value.
var errInvalidRaw = errors.New("json: error calling MarshalJSON for type json.RawMessage: invalid JSON")

func encBool(b []byte, p unsafe.Pointer) ([]byte, error) {
	if *(*bool)(p) {
		return append(b, "true"...), nil
	}
	return append(b, "false"...), nil
}

func encString(b []byte, p unsafe.Pointer) ([]byte, error) {
	return appendString(b, *(*string)(p)), nil
}

func (p *plan) intPlan(t reflect.Type) {
	var get func(unsafe.Pointer) int64
	var bits int
	switch t.Kind() {
	case reflect.Int:
		get, bits = func(q unsafe.Pointer) int64 { return int64(*(*int)(q)) }, strconv.IntSize
	case reflect.Int8:
		get, bits = func(q unsafe.Pointer) int64 { return int64(*(*int8)(q)) }, 8
	case reflect.Int16:
		get, bits = func(q unsafe.Pointer) int64 { return int64(*(*int16)(q)) }, 16
	case reflect.Int32:
		get, bits = func(q unsafe.Pointer) int64 { return int64(*(*int32)(q)) }, 32
	default:
		get, bits = func(q unsafe.Pointer) int64 { return *(*int64)(q) }, 64
	}
	p.enc = func(b []byte, q unsafe.Pointer) ([]byte, error) { return appendInt(b, get(q)), nil }
	p.empty = func(q unsafe.Pointer) bool { return get(q) == 0 }
	p.dec = func(d *decoder, q unsafe.Pointer) bool {
		if d.null() {
			return true
		}
		n, ok := d.integer(bits)
		if !ok {
			return false
		}
		switch bits {
		case 8:
			*(*int8)(q) = int8(n)
		case 16:
			*(*int16)(q) = int16(n)
		case 32:
			*(*int32)(q) = int32(n)
		default:
			*(*int64)(q) = n // int is 64 bits wide on every port built for
		}
		return true
	}
	if t.Kind() == reflect.Int && strconv.IntSize == 32 {
		p.dec = func(d *decoder, q unsafe.Pointer) bool {
			if d.null() {
				return true
			}
			n, ok := d.integer(32)
			*(*int)(q) = int(n)
			return ok
		}
	}
}

func (p *plan) uintPlan(t reflect.Type) {
	var get func(unsafe.Pointer) uint64
	var bits int
	switch t.Kind() {
	case reflect.Uint:
		get, bits = func(q unsafe.Pointer) uint64 { return uint64(*(*uint)(q)) }, strconv.IntSize
	case reflect.Uintptr:
		get, bits = func(q unsafe.Pointer) uint64 { return uint64(*(*uintptr)(q)) }, strconv.IntSize
	case reflect.Uint8:
		get, bits = func(q unsafe.Pointer) uint64 { return uint64(*(*uint8)(q)) }, 8
	case reflect.Uint16:
		get, bits = func(q unsafe.Pointer) uint64 { return uint64(*(*uint16)(q)) }, 16
	case reflect.Uint32:
		get, bits = func(q unsafe.Pointer) uint64 { return uint64(*(*uint32)(q)) }, 32
	default:
		get, bits = func(q unsafe.Pointer) uint64 { return *(*uint64)(q) }, 64
	}
	p.enc = func(b []byte, q unsafe.Pointer) ([]byte, error) { return appendUint(b, get(q)), nil }
	p.empty = func(q unsafe.Pointer) bool { return get(q) == 0 }
	size := t.Size()
	p.dec = func(d *decoder, q unsafe.Pointer) bool {
		if d.null() {
			return true
		}
		n, ok := d.unsigned(bits)
		if !ok {
			return false
		}
		switch size {
		case 1:
			*(*uint8)(q) = uint8(n)
		case 2:
			*(*uint16)(q) = uint16(n)
		case 4:
			*(*uint32)(q) = uint32(n)
		default:
			*(*uint64)(q) = n
		}
		return true
	}
}

func appendFloat(b []byte, f float64, bits int) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, errUnsupportedFloat
	}
	abs := math.Abs(f)
	fmt := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			fmt = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, fmt, -1, bits)
	if fmt == 'e' {
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

func encFloat32(b []byte, p unsafe.Pointer) ([]byte, error) {
	return appendFloat(b, float64(*(*float32)(p)), 32)
}

func encFloat64(b []byte, p unsafe.Pointer) ([]byte, error) {
	return appendFloat(b, *(*float64)(p), 64)
}

func encBytes(b []byte, p unsafe.Pointer) ([]byte, error) {
	s := *(*[]byte)(p)
	if s == nil {
		return append(b, "null"...), nil
	}
	n := base64.StdEncoding.EncodedLen(len(s))
	b = append(b, '"')
	b = append(b, make([]byte, n)...)
	base64.StdEncoding.Encode(b[len(b)-n:], s)
	return append(b, '"'), nil
}

// encRaw appends a json.RawMessage compacted and HTML-escaped, as
// json.Marshal does; nil is null, anything but one JSON value an error.
func encRaw(b []byte, p unsafe.Pointer) ([]byte, error) {
	raw := *(*[]byte)(p)
	if raw == nil {
		return append(b, "null"...), nil
	}
	out, ok := AppendCompact(b, raw)
	if !ok {
		return b, errInvalidRaw
	}
	return out, nil
}

func encMapStringString(b []byte, p unsafe.Pointer) ([]byte, error) {
	m := *(*map[string]string)(p)
	if m == nil {
		return append(b, "null"...), nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendString(b, m[k])
	}
	return append(b, '}'), nil
}

func (p *plan) encStruct(b []byte, q unsafe.Pointer) ([]byte, error) {
	b = append(b, '{')
	first := true
	var err error
	for i := range p.fields {
		f := &p.fields[i]
		fp := q
		if f.direct {
			fp = unsafe.Add(q, f.off)
		} else if fp = f.at(q); fp == nil {
			continue
		}
		switch f.kind {
		case kString:
			s := *(*string)(fp)
			if f.omitEmpty && len(s) == 0 {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			b = append(b, f.key...)
			b = appendString(b, s)
		case kBool:
			v := *(*bool)(fp)
			if f.omitEmpty && !v {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			b = append(b, f.key...)
			if v {
				b = append(b, "true"...)
			} else {
				b = append(b, "false"...)
			}
		case kInt, kInt64, kInt32:
			var v int64
			if f.kind == kInt32 {
				v = int64(*(*int32)(fp))
			} else {
				v = *(*int64)(fp)
			}
			if f.omitEmpty && v == 0 {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			b = append(b, f.key...)
			b = appendInt(b, v)
		case kUint32, kUint64:
			var v uint64
			if f.kind == kUint32 {
				v = uint64(*(*uint32)(fp))
			} else {
				v = *(*uint64)(fp)
			}
			if f.omitEmpty && v == 0 {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			b = append(b, f.key...)
			b = appendUint(b, v)
		default:
			if f.omitEmpty && f.p.empty(fp) {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			b = append(b, f.key...)
			if b, err = f.p.enc(b, fp); err != nil {
				return b, err
			}
		}
		first = false
	}
	return append(b, '}'), nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string exactly as encoding/json does
// with HTML escaping: <, > and & as \u003c etc., U+2028 and U+2029
// escaped, invalid UTF-8 as \ufffd.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	i := safePrefix(s, 0)
	if i == len(s) {
		b = append(b, s...)
		return append(b, '"')
	}
	start := 0
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if htmlSafe[c] {
				i = safePrefix(s, i+1)
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// htmlSafe[c] is true for the ASCII bytes encoding/json writes as is when
// it escapes HTML.
var htmlSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// AppendCompact appends the JSON value raw with insignificant space
// removed and <, >, &, U+2028 and U+2029 escaped: what json.Marshal makes
// of a json.RawMessage (json.Compact, then json.HTMLEscape). ok is false
// unless raw is exactly one JSON value (space around it allowed), as
// json.Valid decides.
func AppendCompact(b, raw []byte) ([]byte, bool) {
	start := len(b)
	c := compactor{in: raw, out: b}
	c.space()
	if !c.value(0) {
		return b[:start], false
	}
	c.space()
	if c.i != len(raw) {
		return b[:start], false
	}
	return c.out, true
}

type compactor struct {
	in  []byte
	i   int
	out []byte
}

func (c *compactor) space() {
	for c.i < len(c.in) {
		switch c.in[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

func (c *compactor) value(depth int) bool {
	if c.i >= len(c.in) || depth >= maxDepth {
		return false
	}
	switch ch := c.in[c.i]; ch {
	case '{', '[':
		end := byte('}')
		if ch == '[' {
			end = ']'
		}
		c.out = append(c.out, ch)
		c.i++
		c.space()
		if c.i < len(c.in) && c.in[c.i] == end {
			c.out = append(c.out, end)
			c.i++
			return true
		}
		for {
			if ch == '{' {
				if c.i >= len(c.in) || c.in[c.i] != '"' || !c.str() {
					return false
				}
				c.space()
				if c.i >= len(c.in) || c.in[c.i] != ':' {
					return false
				}
				c.out = append(c.out, ':')
				c.i++
				c.space()
			}
			if !c.value(depth + 1) {
				return false
			}
			c.space()
			if c.i >= len(c.in) {
				return false
			}
			switch c.in[c.i] {
			case ',':
				c.out = append(c.out, ',')
				c.i++
				c.space()
			case end:
				c.out = append(c.out, end)
				c.i++
				return true
			default:
				return false
			}
		}
	case '"':
		return c.str()
	case 't':
		return c.lit("true")
	case 'f':
		return c.lit("false")
	case 'n':
		return c.lit("null")
	default:
		n := scanNumber(c.in[c.i:])
		if n == 0 {
			return false
		}
		c.out = append(c.out, c.in[c.i:c.i+n]...)
		c.i += n
		return true
	}
}

func (c *compactor) lit(s string) bool {
	if len(c.in)-c.i < len(s) || string(c.in[c.i:c.i+len(s)]) != s {
		return false
	}
	c.out = append(c.out, s...)
	c.i += len(s)
	return true
}

// str copies a string token (at c.i, a quote), escaping HTML-unsafe
// characters; invalid UTF-8 is copied as is (json.Compact does).
func (c *compactor) str() bool {
	c.i++
	start := c.i - 1
	for c.i < len(c.in) {
		ch := c.in[c.i]
		switch {
		case ch == '"':
			c.i++
			c.out = append(c.out, c.in[start:c.i]...)
			return true
		case ch < 0x20:
			return false
		case ch == '\\':
			if c.i+1 >= len(c.in) {
				return false
			}
			switch c.in[c.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				c.i += 2
			case 'u':
				if len(c.in)-c.i < 6 || !isHex(c.in[c.i+2]) || !isHex(c.in[c.i+3]) || !isHex(c.in[c.i+4]) || !isHex(c.in[c.i+5]) {
					return false
				}
				c.i += 6
			default:
				return false
			}
		case ch == '<' || ch == '>' || ch == '&':
			c.out = append(c.out, c.in[start:c.i]...)
			c.out = append(c.out, '\\', 'u', '0', '0', hexDigits[ch>>4], hexDigits[ch&0xF])
			c.i++
			start = c.i
		case ch == 0xE2 && c.i+2 < len(c.in) && c.in[c.i+1] == 0x80 && c.in[c.i+2]&^1 == 0xA8:
			c.out = append(c.out, c.in[start:c.i]...)
			c.out = append(c.out, '\\', 'u', '2', '0', '2', hexDigits[c.in[c.i+2]&0xF])
			c.i += 3
			start = c.i
		default:
			c.i++
		}
	}
	return false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// scanNumber returns the length of the JSON number at the start of b, 0
// when there is none.
func scanNumber(b []byte) int {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return 0
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return 0
	}
	if i < len(b) && b[i] == '.' {
		i++
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == j {
			return 0
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == j {
			return 0
		}
	}
	return i
}
