package wire

import (
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
// protocol.DecodeParams's result and errors, fast. After an error v may
// hold part of the input (as after a type error of encoding/json). Input the fast path
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
	d := newDecoder(params)
	d.space()
	if d.i == len(d.in) {
		return nil // missing params decode as {}
	}
	if d.in[d.i] != '{' {
		return protocol.DecodeParams(params, v)
	}
	// Decoded in place: when the fast path gives up half way, the slow
	// path decodes the whole input again over it, and every field the
	// fast path set is one the input holds, so the slow path sets it too
	// (to the same value when it succeeds; after an error v is
	// unspecified, as with encoding/json).
	if !p.dec(d, q) || !d.end() {
		return protocol.DecodeParams(params, v)
	}
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
		// In place, as DecodeParams.
		d := newDecoder(data)
		if p.dec(d, q) && d.end() {
			return nil
		}
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
	if d.i < len(d.in) && d.in[d.i] > ' ' {
		return
	}
	d.spaceSlow()
}

func (d *decoder) spaceSlow() {
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

// integer reads an integer literal (-?(0|[1-9][0-9]*), no fraction or
// exponent) that fits in a signed int of bits.
func (d *decoder) integer(bits int) (int64, bool) {
	d.space()
	neg := d.i < len(d.in) && d.in[d.i] == '-'
	if neg {
		d.i++
	}
	u, ok := d.digits()
	if !ok {
		return 0, false
	}
	limit := uint64(1) << (bits - 1) // |min|; max is limit-1
	if neg {
		if u > limit {
			return 0, false
		}
		return -int64(u), true
	}
	if u >= limit {
		return 0, false
	}
	return int64(u), true
}

func (d *decoder) unsigned(bits int) (uint64, bool) {
	d.space()
	u, ok := d.digits()
	if !ok || bits < 64 && u >= 1<<bits {
		return 0, false
	}
	return u, true
}

// digits reads 0 or [1-9][0-9]* not followed by a fraction or exponent,
// up to 2^64-1.
func (d *decoder) digits() (uint64, bool) {
	i := d.i
	if i >= len(d.in) || d.in[i] < '0' || d.in[i] > '9' {
		return 0, false
	}
	var u uint64
	if d.in[i] == '0' {
		i++
	} else {
		// Eight digits at a time while they last (SWAR), then one by one.
		if i+8 <= len(d.in) {
			x := *(*uint64)(unsafe.Pointer(&d.in[i]))
			if x&0xF0F0F0F0F0F0F0F0 == 0x3030303030303030 && (x+0x0606060606060606)&0xF0F0F0F0F0F0F0F0 == 0x3030303030303030 {
				x -= 0x3030303030303030
				x = x*10 + x>>8
				x = ((x&0x000000FF000000FF)*(100+(1000000<<32)) + (x>>16&0x000000FF000000FF)*(1+(10000<<32))) >> 32
				u = x
				i += 8
			}
		}
		for i < len(d.in) && d.in[i] >= '0' && d.in[i] <= '9' {
			c := uint64(d.in[i] - '0')
			if u > (1<<64-1-c)/10 {
				return 0, false
			}
			u = u*10 + c
			i++
		}
	}
	if i < len(d.in) && (d.in[i] == '.' || d.in[i] == 'e' || d.in[i] == 'E' || d.in[i] >= '0' && d.in[i] <= '9') {
		return 0, false
	}
	d.i = i
	return u, true
}

// rawString returns the bytes between the quotes of the next string when
// it holds no escape and only printable ASCII (the usual key), else ok is
// false and nothing is consumed.
func (d *decoder) rawString() ([]byte, bool) {
	if d.i >= len(d.in) || d.in[d.i] != '"' {
		d.space()
	}
	if d.i >= len(d.in) || d.in[d.i] != '"' {
		return nil, false
	}
	j := plainPrefix(d.in, d.i+1)
	if j < len(d.in) && d.in[j] == '"' {
		s := d.in[d.i+1 : j]
		d.i = j + 1
		return s, true
	}
	return nil, false
}

// str reads the next string: valid UTF-8, escapes decoded, a lone
// surrogate escape refused (both would be U+FFFD in encoding/json).
func (d *decoder) str() (string, bool) {
	b, ok := d.strBytes(nil)
	if aliasStrings {
		if len(b) == 0 {
			return "", ok
		}
		return unsafe.String(&b[0], len(b)), ok
	}
	return string(b), ok
}

func (d *decoder) strBytes(buf []byte) ([]byte, bool) {
	d.space()
	if d.i >= len(d.in) || d.in[d.i] != '"' {
		return nil, false
	}
	start := d.i + 1
	j := plainPrefix(d.in, start)
	if j < len(d.in) && d.in[j] == '"' {
		d.i = j + 1
		return d.in[start:j], true
	}
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
			j = plainPrefix(d.in, j+1)
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
	if err != nil {
		return false
	}
	*(*float32)(p) = float32(f)
	return true
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
	if err != nil {
		return false
	}
	*(*float64)(p) = f
	return true
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
	next := 0 // keys usually come in field order: try that one first
	for {
		idx := -1
		// The expected next member's `"name":` is matched in one go (two
		// word compares); otherwise the key is read and looked up.
		if next < len(p.fields) {
			if f := &p.fields[next]; f.keyFirst8 != 0 && d.i+16 <= len(d.in) {
				n := len(f.key)
				w := *(*uint64)(unsafe.Pointer(&d.in[d.i]))
				if n < 8 {
					w &= 1<<(8*uint(n)) - 1
				}
				if w == f.keyFirst8 && (n < 8 || *(*uint64)(unsafe.Pointer(&d.in[d.i+n-8])) == f.keyLast8) {
					idx = next
					d.i += n
				}
			}
		}
		if idx < 0 {
			k, ok := d.rawString()
			if !ok {
				return false
			}
			if next < len(p.fields) && d.keyIs(k, &p.fields[next]) {
				idx = next
			} else if idx, ok = p.byName[string(k)]; !ok {
				return false
			}
			// The common layout (no space) is checked inline: a call
			// costs more than the check in a guest.
			if d.i < len(d.in) && d.in[d.i] == ':' {
				d.i++
			} else if !d.consume(':') {
				return false
			}
		}
		if seen&(1<<idx) != 0 {
			return false
		}
		seen |= 1 << idx
		next = idx + 1
		f := &p.fields[idx]
		fp := f.alloc(q)
		switch f.kind {
		case kString:
			if d.i < len(d.in) && d.in[d.i] == '"' {
				if j := plainPrefix(d.in, d.i+1); j < len(d.in) && d.in[j] == '"' {
					v := d.in[d.i+1 : j]
					d.i = j + 1
					switch {
					case len(v) == 0:
						*(*string)(fp) = ""
					case aliasStrings:
						*(*string)(fp) = unsafe.String(&v[0], len(v))
					default:
						*(*string)(fp) = string(v)
					}
					break
				}
			}
			if !decString(d, fp) {
				return false
			}
		case kBool:
			if !decBool(d, fp) {
				return false
			}
		case kInt, kInt64:
			if d.i < len(d.in) && d.in[d.i]-'0' < 10 {
				n, ok := d.digits() // a non-negative literal, the usual case
				if !ok || n > 1<<63-1 {
					return false
				}
				*(*int64)(fp) = int64(n)
			} else if !d.null() {
				n, ok := d.integer(64)
				if !ok {
					return false
				}
				*(*int64)(fp) = n
			}
		case kInt32:
			if !d.null() {
				n, ok := d.integer(32)
				if !ok {
					return false
				}
				*(*int32)(fp) = int32(n)
			}
		case kUint32:
			if !d.null() {
				n, ok := d.unsigned(32)
				if !ok {
					return false
				}
				*(*uint32)(fp) = uint32(n)
			}
		case kUint64:
			if d.i < len(d.in) && d.in[d.i]-'0' < 10 {
				n, ok := d.digits()
				if !ok {
					return false
				}
				*(*uint64)(fp) = n
			} else if !d.null() {
				n, ok := d.unsigned(64)
				if !ok {
					return false
				}
				*(*uint64)(fp) = n
			}
		default:
			if !f.p.dec(d, fp) {
				return false
			}
		}
		if d.i < len(d.in) && d.in[d.i] == ',' {
			d.i++
			continue
		}
		if d.consume('}') {
			return true
		}
		if !d.consume(',') {
			return false
		}
	}
}

// keyIs reports whether key k (a slice of d.in just read) is f's name,
// comparing words rather than bytes when the input has room to load them.
func (d *decoder) keyIs(k []byte, f *field) bool {
	n := len(k)
	if n != len(f.name) {
		return false
	}
	if n == 0 || n > 16 || cap(k) < 8 {
		return string(k) == f.name
	}
	w := *(*uint64)(unsafe.Pointer(&k[0])) // k's capacity reaches into d.in
	if n < 8 {
		return w&(1<<(8*uint(n))-1) == f.first8
	}
	return w == f.first8 && *(*uint64)(unsafe.Pointer(&k[n-8])) == f.last8
}
