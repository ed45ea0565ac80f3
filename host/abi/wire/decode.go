package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"lemon/protocol"
)

// DecodeParams decodes params strictly into v, a pointer to a struct:
// protocol.DecodeParams's result and errors, fast. Input the fast path
// does not take as plain (see the package doc) goes to
// protocol.DecodeParams itself, so every error code and message is its.
func DecodeParams(params []byte, v any) *protocol.Error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return protocol.DecodeParams(params, v)
	}
	p := planFor(t.Elem())
	q := reflect.ValueOf(v).UnsafePointer()
	if !p.decOK || q == nil {
		return protocol.DecodeParams(params, v)
	}
	d := decoder{in: params}
	d.space()
	if d.i == len(d.in) {
		return nil // missing params decode as {}
	}
	if d.in[d.i] != '{' {
		return protocol.DecodeParams(params, v)
	}
	// Decode into a scratch copy, so a fallback sees v untouched.
	scratch := reflect.New(t.Elem())
	scratch.Elem().Set(reflect.ValueOf(v).Elem())
	if !p.dec(&d, scratch.UnsafePointer()) {
		return protocol.DecodeParams(params, v)
	}
	d.space()
	if d.i != len(d.in) {
		return protocol.DecodeParams(params, v)
	}
	reflect.ValueOf(v).Elem().Set(scratch.Elem())
	return nil
}

// Unmarshal decodes data into v (a non-nil pointer) with json.Unmarshal's
// result and errors, fast for plain input (see the package doc).
func Unmarshal(data []byte, v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return json.Unmarshal(data, v)
	}
	q := reflect.ValueOf(v).UnsafePointer()
	p := planFor(t.Elem())
	if !p.decOK || q == nil {
		return json.Unmarshal(data, v)
	}
	if t.Elem() == rawMessageType {
		d := decoder{in: data}
		d.space()
		start := d.i
		if d.skip(0) {
			end := d.i
			if d.end() {
				*(*[]byte)(q) = append((*(*[]byte)(q))[:0], data[start:end]...)
				return nil
			}
		}
		return json.Unmarshal(data, v)
	}
	if t.Elem().Kind() == reflect.Struct {
		scratch := reflect.New(t.Elem())
		scratch.Elem().Set(reflect.ValueOf(v).Elem())
		d := decoder{in: data}
		if p.dec(&d, scratch.UnsafePointer()) && d.end() {
			reflect.ValueOf(v).Elem().Set(scratch.Elem())
			return nil
		}
		return json.Unmarshal(data, v)
	}
	return json.Unmarshal(data, v)
}

// decoder reads one JSON text. Every method returns false for input the
// fast path does not take; the caller then falls back to encoding/json.
type decoder struct {
	in []byte
	i  int
}

func (d *decoder) space() {
	for d.i < len(d.in) {
		switch d.in[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) end() bool {
	d.space()
	return d.i == len(d.in)
}

// null consumes a null literal if one comes next.
func (d *decoder) null() bool {
	d.space()
	if len(d.in)-d.i >= 4 && d.in[d.i] == 'n' && string(d.in[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// consume consumes c if it comes next (after space).
func (d *decoder) consume(c byte) bool {
	d.space()
	if d.i < len(d.in) && d.in[d.i] == c {
		d.i++
		return true
	}
	return false
}

// number returns the next number literal.
func (d *decoder) number() ([]byte, bool) {
	d.space()
	n := scanNumber(d.in[d.i:])
	if n == 0 {
		return nil, false
	}
	lit := d.in[d.i : d.i+n]
	d.i += n
	return lit, true
}

// integer reads an integer literal that fits in a signed int of bits.
func (d *decoder) integer(bits int) (int64, bool) {
	lit, ok := d.number()
	if !ok || bytes.IndexAny(lit, ".eE") >= 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(lit), 10, bits)
	return n, err == nil
}

func (d *decoder) unsigned(bits int) (uint64, bool) {
	lit, ok := d.number()
	if !ok || lit[0] == '-' || bytes.IndexAny(lit, ".eE") >= 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(lit), 10, bits)
	return n, err == nil
}

// rawString returns the bytes between the quotes of the next string when
// it holds no escape and only printable ASCII (the usual key), else ok is
// false and nothing is consumed.
func (d *decoder) rawString() ([]byte, bool) {
	d.space()
	if d.i >= len(d.in) || d.in[d.i] != '"' {
		return nil, false
	}
	for j := d.i + 1; j < len(d.in); j++ {
		c := d.in[j]
		if c == '"' {
			s := d.in[d.i+1 : j]
			d.i = j + 1
			return s, true
		}
		if c < 0x20 || c == '\\' || c >= utf8.RuneSelf {
			return nil, false
		}
	}
	return nil, false
}

// str reads the next string: valid UTF-8, escapes decoded, a lone
// surrogate escape refused (both would be U+FFFD in encoding/json).
func (d *decoder) str() (string, bool) {
	b, ok := d.strBytes(nil)
	return string(b), ok
}

func (d *decoder) strBytes(buf []byte) ([]byte, bool) {
	d.space()
	if d.i >= len(d.in) || d.in[d.i] != '"' {
		return nil, false
	}
	j := d.i + 1
	start := j
	plain := true
	for j < len(d.in) {
		c := d.in[j]
		switch {
		case c == '"':
			if plain {
				d.i = j + 1
				return d.in[start:j], true
			}
			buf = append(buf, d.in[start:j]...)
			d.i = j + 1
			return buf, true
		case c < 0x20:
			return nil, false
		case c == '\\':
			plain = false
			buf = append(buf, d.in[start:j]...)
			if j+1 >= len(d.in) {
				return nil, false
			}
			switch e := d.in[j+1]; e {
			case '"', '\\', '/':
				buf = append(buf, e)
				j += 2
			case 'b':
				buf = append(buf, '\b')
				j += 2
			case 'f':
				buf = append(buf, '\f')
				j += 2
			case 'n':
				buf = append(buf, '\n')
				j += 2
			case 'r':
				buf = append(buf, '\r')
				j += 2
			case 't':
				buf = append(buf, '\t')
				j += 2
			case 'u':
				r, ok := hex4(d.in, j+2)
				if !ok {
					return nil, false
				}
				j += 6
				if utf16.IsSurrogate(r) {
					if r >= 0xDC00 || j+6 > len(d.in) || d.in[j] != '\\' || d.in[j+1] != 'u' {
						return nil, false
					}
					lo, ok := hex4(d.in, j+2)
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return nil, false
					}
					r = utf16.DecodeRune(r, lo)
					j += 6
				}
				buf = utf8.AppendRune(buf, r)
			default:
				return nil, false
			}
			start = j
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(d.in[j:])
			if r == utf8.RuneError && size == 1 {
				return nil, false
			}
			j += size
		}
	}
	return nil, false
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

// skip returns the next value's bytes, checked as the fast path checks
// strings (valid UTF-8, no lone surrogate).
func (d *decoder) skip(depth int) bool {
	d.space()
	if d.i >= len(d.in) || depth >= maxDepth {
		return false
	}
	switch c := d.in[d.i]; c {
	case '{', '[':
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		d.i++
		if d.consume(end) {
			return true
		}
		for {
			if c == '{' {
				if _, ok := d.strBytes(nil); !ok || !d.consume(':') {
					return false
				}
			}
			if !d.skip(depth + 1) {
				return false
			}
			if d.consume(end) {
				return true
			}
			if !d.consume(',') {
				return false
			}
		}
	case '"':
		_, ok := d.strBytes(nil)
		return ok
	case 't', 'f', 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if len(d.in)-d.i >= len(lit) && string(d.in[d.i:d.i+len(lit)]) == lit {
				d.i += len(lit)
				return true
			}
		}
		return false
	default:
		_, ok := d.number()
		return ok
	}
}

func decBool(d *decoder, p unsafe.Pointer) bool {
	d.space()
	switch {
	case d.null():
		return true
	case len(d.in)-d.i >= 4 && string(d.in[d.i:d.i+4]) == "true":
		*(*bool)(p) = true
		d.i += 4
		return true
	case len(d.in)-d.i >= 5 && string(d.in[d.i:d.i+5]) == "false":
		*(*bool)(p) = false
		d.i += 5
		return true
	}
	return false
}

func decString(d *decoder, p unsafe.Pointer) bool {
	if d.null() {
		return true
	}
	s, ok := d.str()
	if ok {
		*(*string)(p) = s
	}
	return ok
}

func decFloat32(d *decoder, p unsafe.Pointer) bool {
	if d.null() {
		return true
	}
	lit, ok := d.number()
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(string(lit), 32)
	*(*float32)(p) = float32(f)
	return err == nil
}

func decFloat64(d *decoder, p unsafe.Pointer) bool {
	if d.null() {
		return true
	}
	lit, ok := d.number()
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	*(*float64)(p) = f
	return err == nil
}

func decBytes(d *decoder, p unsafe.Pointer) bool {
	if d.null() {
		*(*[]byte)(p) = nil
		return true
	}
	s, ok := d.strBytes(nil)
	if !ok {
		return false
	}
	b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(b, s)
	if err != nil {
		return false
	}
	*(*[]byte)(p) = b[:n]
	return true
}

func decRaw(d *decoder, p unsafe.Pointer) bool {
	d.space()
	start := d.i
	if !d.skip(0) {
		return false
	}
	*(*[]byte)(p) = append([]byte(nil), d.in[start:d.i]...)
	return true
}

func decMapStringString(d *decoder, p unsafe.Pointer) bool {
	if d.null() {
		*(*map[string]string)(p) = nil
		return true
	}
	if !d.consume('{') {
		return false
	}
	m := *(*map[string]string)(p)
	if m == nil {
		m = map[string]string{}
		*(*map[string]string)(p) = m
	}
	if d.consume('}') {
		return true
	}
	for {
		k, ok := d.str()
		if !ok || !d.consume(':') {
			return false
		}
		if d.null() {
			// encoding/json stores the zero value for a null element
			m[k] = ""
		} else {
			v, ok := d.str()
			if !ok {
				return false
			}
			m[k] = v
		}
		if d.consume('}') {
			return true
		}
		if !d.consume(',') {
			return false
		}
	}
}

// decStruct decodes an object whose keys are the struct's JSON names
// spelled exactly, each at most once.
func (p *plan) decStruct(d *decoder, q unsafe.Pointer) bool {
	if d.null() {
		return true
	}
	if !d.consume('{') {
		return false
	}
	if d.consume('}') {
		return true
	}
	if len(p.fields) > 64 {
		return false
	}
	var seen uint64
	for {
		k, ok := d.rawString()
		if !ok {
			return false
		}
		idx, ok := p.byName[string(k)]
		if !ok || seen&(1<<idx) != 0 || !d.consume(':') {
			return false
		}
		seen |= 1 << idx
		f := &p.fields[idx]
		if !f.p.dec(d, f.alloc(q)) {
			return false
		}
		if d.consume('}') {
			return true
		}
		if !d.consume(',') {
			return false
		}
	}
}
