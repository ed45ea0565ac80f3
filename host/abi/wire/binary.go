package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"unicode/utf8"
	"unsafe"
)

// The binary layout of host-call results (docs/ABI.md, "Host-call
// results"), driven by the same per-type plan as the JSON codec:
//
//   - struct: its fields in declaration order (json "-" and unexported
//     fields skipped, embedded structs inline, omitempty ignored: every
//     field is present), nested structs inline;
//   - bool: 1 byte, 0 or 1;
//   - every integer kind: 8 bytes little endian, two's complement;
//   - float32 and float64: the float64 value, 8 bytes IEEE 754 little
//     endian (NaN and ±Inf are refused, as json.Marshal refuses them);
//   - string: u32 length + bytes (valid UTF-8: the encoder replaces an
//     invalid byte with U+FFFD as json.Marshal does);
//   - []byte, json.RawMessage, other slices and map[string]X: u32 count +
//     bytes, elements, or (key, value) pairs in sorted key order; the count
//     0xFFFFFFFF is nil (JSON null). A json.RawMessage holds the bytes
//     json.Marshal would write for it (compacted, HTML-escaped, null for
//     nil);
//   - pointer: u8 0 (nil) or 1 followed by the value.
//
// An omitempty field whose value is empty is encoded as its type's zero
// value (what the JSON path's decoder would see), so UnmarshalBinary of
// AppendBinary's output equals Unmarshal of Marshal's.

// nilCount is the u32 count of a nil slice, []byte, json.RawMessage or map.
const nilCount = 0xFFFFFFFF

// maxBinaryDepth bounds the nesting of pointers, slices and maps a
// decoder follows (recursive types only).
const maxBinaryDepth = 1000

// ErrMalformed is UnmarshalBinary's error for input that is truncated,
// has bytes left over, or holds a value its type cannot (a count past the
// input, a bool or pointer tag other than 0 or 1, an integer out of the
// field's range).
var ErrMalformed = errors.New("wire: malformed binary value")

// bkind is a leaf kind of the binary struct loop.
type bkind uint8

const (
	bOther bkind = iota // p.benc / p.bdec
	bBool
	bInt // signed, size in bsize
	bUint
	bFloat32
	bFloat64
	bString
	bBytes // []byte or json.RawMessage (bRaw on encode)
	bRaw
)

// bfield is one leaf of a struct's binary layout: nested structs are
// flattened into their parent's list, so decoding a struct is one loop.
type bfield struct {
	off  uintptr
	kind bkind
	size uintptr // integer size in bytes
	p    *plan
	// zero is a zero value of the field's type, encoded in place of an
	// empty omitempty value; nil when the field is not omitempty.
	zero unsafe.Pointer
}

// binary is what a plan knows of its type's binary layout.
type binaryPlan struct {
	err     error // the type cannot be encoded in binary
	enc     func(b []byte, p unsafe.Pointer) ([]byte, error)
	dec     func(r *binReader, p unsafe.Pointer) bool
	fields  []bfield // structs
	minSize int      // the fewest bytes a value takes
}

// binReader reads one binary value.
type binReader struct {
	in    []byte
	i     int
	depth int
}

// CheckBinary reports why values of type t cannot be encoded in the
// binary layout (an interface, a custom marshaler other than
// json.RawMessage, an array, a channel or function, a map with non-string
// keys, a slice of zero-size elements, an embedded struct pointer, a
// struct the JSON plan does not cover); nil when they can.
func CheckBinary(t reflect.Type) error {
	if t == nil {
		return errors.New("wire: binary: nil type")
	}
	return planFor(t).bin.err
}

// AppendBinary appends the binary encoding of v (docs/ABI.md, "Host-call
// results") to b. Errors: a type CheckBinary refuses, a NaN or infinite
// float, an invalid json.RawMessage, a string, slice or map longer than
// 0xFFFFFFFE.
func AppendBinary(b []byte, v any) ([]byte, error) {
	if v == nil {
		return b, errors.New("wire: binary: nil value")
	}
	p := planFor(reflect.TypeOf(v))
	if p.bin.err != nil {
		return b, p.bin.err
	}
	data := (*[2]unsafe.Pointer)(unsafe.Pointer(&v))[1]
	if !p.directIface {
		return p.bin.enc(b, data)
	}
	word := data
	return p.bin.enc(b, unsafe.Pointer(&word))
}

// UnmarshalBinary decodes data, one value in the binary layout, into v (a
// non-nil pointer), setting every field. In a wasip1 guest strings and
// byte slices share data's bytes (it must not change afterwards); on the
// host they are copies. Errors: v not a non-nil pointer, a type
// CheckBinary refuses, ErrMalformed. After an error v holds part of the
// input.
func UnmarshalBinary(data []byte, v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return errors.New("wire: UnmarshalBinary needs a non-nil pointer")
	}
	q := reflect.ValueOf(v).UnsafePointer()
	if q == nil {
		return errors.New("wire: UnmarshalBinary needs a non-nil pointer")
	}
	p := planFor(t.Elem())
	if p.bin.err != nil {
		return p.bin.err
	}
	r := newBinReader(data)
	if !p.bin.dec(r, noescape(q)) || r.i != len(data) {
		return ErrMalformed
	}
	return nil
}

// noescape hides p from escape analysis, as the runtime's noescape does:
// the decoders write through the pointer they are given and never keep
// it, so a caller's `var out T; UnmarshalBinary(b, &out)` need not move
// out to the heap (an allocation costs about 0.5 µs in a Go wasm guest).
//
// This is sound because no decoder stores the pointer (or one derived
// from it) anywhere but in its own frames: they write through it with
// plain stores, never through reflect.NewAt, so no heap object can come
// to point into a stack that may move. nosplit: the stack cannot move
// between the two conversions.
//
//go:nosplit
func noescape(p unsafe.Pointer) unsafe.Pointer {
	x := uintptr(p)
	return *(*unsafe.Pointer)(unsafe.Pointer(&x))
}

// binPlan fills p.bin; called once p's JSON plan is filled.
func (p *plan) binPlan() {
	t := p.t
	bp := &p.bin
	refuse := func(format string, a ...any) {
		bp.err = fmt.Errorf("wire: binary: type %s: "+format, append([]any{t}, a...)...)
		bp.enc, bp.dec = nil, nil
	}
	if t == rawMessageType {
		bp.enc, bp.dec, bp.minSize = encBinRaw, decBinBytes, 4
		return
	}
	if customEnc(t) || customDec(t) {
		refuse("has a custom JSON or text marshaler")
		return
	}
	switch t.Kind() {
	case reflect.Bool:
		bp.enc, bp.dec, bp.minSize = encBinBool, decBinBool, 1
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		size := t.Size()
		bp.minSize = 8
		bp.enc = func(b []byte, q unsafe.Pointer) ([]byte, error) {
			return binary.LittleEndian.AppendUint64(b, uint64(loadInt(q, size))), nil
		}
		bp.dec = func(r *binReader, q unsafe.Pointer) bool { return r.int(q, size) }
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		size := t.Size()
		bp.minSize = 8
		bp.enc = func(b []byte, q unsafe.Pointer) ([]byte, error) {
			return binary.LittleEndian.AppendUint64(b, loadUint(q, size)), nil
		}
		bp.dec = func(r *binReader, q unsafe.Pointer) bool { return r.uint(q, size) }
	case reflect.Float32:
		bp.enc, bp.dec, bp.minSize = encBinFloat32, decBinFloat32, 8
	case reflect.Float64:
		bp.enc, bp.dec, bp.minSize = encBinFloat64, decBinFloat64, 8
	case reflect.String:
		bp.enc, bp.dec, bp.minSize = encBinString, decBinString, 4
	case reflect.Pointer:
		elem := build(t.Elem())
		if elem.bin.err != nil {
			refuse("%v", elem.bin.err)
			return
		}
		et := t.Elem()
		bp.minSize = 1
		bp.enc = func(b []byte, q unsafe.Pointer) ([]byte, error) {
			e := *(*unsafe.Pointer)(q)
			if e == nil {
				return append(b, 0), nil
			}
			return elem.bin.enc(append(b, 1), e)
		}
		bp.dec = func(r *binReader, q unsafe.Pointer) bool {
			if r.i >= len(r.in) || r.depth >= maxBinaryDepth {
				return false
			}
			tag := r.in[r.i]
			r.i++
			switch tag {
			case 0:
				*(*unsafe.Pointer)(q) = nil
				return true
			case 1:
				e := *(*unsafe.Pointer)(q)
				if e == nil {
					e = reflect.New(et).UnsafePointer()
					*(*unsafe.Pointer)(q) = e
				}
				r.depth++
				ok := elem.bin.dec(r, e)
				r.depth--
				return ok
			}
			return false
		}
	case reflect.Slice:
		p.binSlice(refuse)
	case reflect.Map:
		p.binMap(refuse)
	case reflect.Struct:
		var fields []bfield
		if err := flatten(t, 0, &fields, 0); err != nil {
			refuse("%v", err)
			return
		}
		for _, f := range fields {
			bp.minSize += f.p.bin.minSize
		}
		bp.fields = fields
		bp.enc = p.encBinStruct
		bp.dec = p.decBinStruct
	default:
		refuse("kind %s has no binary layout", t.Kind())
	}
}

// flatten appends the binary leaves of struct type t (at offset base) to
// out, in the JSON plan's field order; nested structs (not pointers) are
// flattened in turn.
func flatten(t reflect.Type, base uintptr, out *[]bfield, depth int) error {
	if depth > 16 {
		return errors.New("structs nested too deep")
	}
	p := build(t)
	if p.byName == nil {
		return fmt.Errorf("struct %s not covered by the JSON plan", t)
	}
	for i := range p.fields {
		f := &p.fields[i]
		if !f.direct {
			return fmt.Errorf("field %s is reached through an embedded pointer", f.name)
		}
		ft := f.p.t
		off := base + f.off
		if ft.Kind() == reflect.Struct && ft != rawMessageType && !customEnc(ft) && !customDec(ft) {
			if err := flatten(ft, off, out, depth+1); err != nil {
				return err
			}
			continue
		}
		if f.p.bin.err != nil {
			return fmt.Errorf("field %s: %w", f.name, f.p.bin.err)
		}
		bf := bfield{off: off, p: f.p, size: ft.Size()}
		switch {
		case ft == rawMessageType:
			bf.kind = bRaw
		case ft.Kind() == reflect.Bool:
			bf.kind = bBool
		case ft.Kind() >= reflect.Int && ft.Kind() <= reflect.Int64:
			bf.kind = bInt
		case ft.Kind() >= reflect.Uint && ft.Kind() <= reflect.Uintptr:
			bf.kind = bUint
		case ft.Kind() == reflect.Float32:
			bf.kind = bFloat32
		case ft.Kind() == reflect.Float64:
			bf.kind = bFloat64
		case ft.Kind() == reflect.String:
			bf.kind = bString
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Uint8 && !customEnc(ft.Elem()) && !customDec(ft.Elem()):
			bf.kind = bBytes
		}
		if f.omitEmpty {
			bf.zero = reflect.New(ft).UnsafePointer()
		}
		*out = append(*out, bf)
	}
	return nil
}

func (p *plan) binSlice(refuse func(string, ...any)) {
	t := p.t
	bp := &p.bin
	bp.minSize = 4
	et := t.Elem()
	if et.Kind() == reflect.Uint8 && !customEnc(et) && !customDec(et) {
		bp.enc, bp.dec = encBinBytes, decBinBytes
		return
	}
	elem := build(et)
	if elem.bin.err != nil {
		refuse("%v", elem.bin.err)
		return
	}
	if elem.bin.minSize == 0 && elem.bin.enc != nil {
		refuse("elements take no bytes")
		return
	}
	size := et.Size()
	bp.enc = func(b []byte, q unsafe.Pointer) ([]byte, error) {
		h := (*sliceHeader)(q)
		if h.data == nil {
			return binary.LittleEndian.AppendUint32(b, nilCount), nil
		}
		if uint64(h.len) >= nilCount {
			return b, errTooLong
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(h.len))
		var err error
		for i := 0; i < h.len; i++ {
			if b, err = elem.bin.enc(b, unsafe.Add(h.data, uintptr(i)*size)); err != nil {
				return b, err
			}
		}
		return b, nil
	}
	bp.dec = func(r *binReader, q unsafe.Pointer) bool {
		n, isNil, ok := r.count(elem.bin.minSize)
		if !ok || r.depth >= maxBinaryDepth {
			return false
		}
		if isNil {
			*(*sliceHeader)(q) = sliceHeader{}
			return true
		}
		v := reflect.MakeSlice(t, n, n)
		data := v.UnsafePointer()
		r.depth++
		for i := 0; i < n; i++ {
			if !elem.bin.dec(r, unsafe.Add(data, uintptr(i)*size)) {
				r.depth--
				return false
			}
		}
		r.depth--
		*(*sliceHeader)(q) = sliceHeader{data: data, len: n, cap: n}
		return true
	}
}

func (p *plan) binMap(refuse func(string, ...any)) {
	t := p.t
	bp := &p.bin
	bp.minSize = 4
	if t.Key().Kind() != reflect.String || customEnc(t.Key()) || customDec(t.Key()) {
		refuse("map keys are not strings")
		return
	}
	et := t.Elem()
	elem := build(et)
	if elem.bin.err != nil {
		refuse("%v", elem.bin.err)
		return
	}
	if t == reflect.TypeFor[map[string]string]() {
		bp.enc, bp.dec = encBinMapStringString, decBinMapStringString
		return
	}
	kt := t.Key()
	bp.enc = func(b []byte, q unsafe.Pointer) ([]byte, error) {
		m := reflect.NewAt(t, q).Elem()
		if m.IsNil() {
			return binary.LittleEndian.AppendUint32(b, nilCount), nil
		}
		keys := m.MapKeys()
		names := make([]string, len(keys))
		for i, k := range keys {
			names[i] = k.String()
		}
		sortKeys(names, keys)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(keys)))
		tmp := reflect.New(et)
		var err error
		for i, k := range keys {
			b = appendBinString(b, names[i])
			tmp.Elem().Set(m.MapIndex(k))
			if b, err = elem.bin.enc(b, tmp.UnsafePointer()); err != nil {
				return b, err
			}
		}
		return b, nil
	}
	bp.dec = func(r *binReader, q unsafe.Pointer) bool {
		n, isNil, ok := r.count(4 + elem.bin.minSize)
		if !ok || r.depth >= maxBinaryDepth {
			return false
		}
		if isNil {
			*(*unsafe.Pointer)(q) = nil
			return true
		}
		m := reflect.MakeMapWithSize(t, n)
		r.depth++
		defer func() { r.depth-- }()
		for i := 0; i < n; i++ {
			k, ok := r.str()
			if !ok {
				return false
			}
			v := reflect.New(et)
			if !elem.bin.dec(r, v.UnsafePointer()) {
				return false
			}
			m.SetMapIndex(reflect.ValueOf(k).Convert(kt), v.Elem())
		}
		*(*unsafe.Pointer)(q) = m.UnsafePointer() // a map is a pointer
		return true
	}
}

var (
	errTooLong        = errors.New("wire: binary: string, slice or map longer than 0xFFFFFFFE")
	errUnsupportedNum = errors.New("wire: binary: unsupported float value (NaN or Inf)")
)

func loadInt(q unsafe.Pointer, size uintptr) int64 {
	switch size {
	case 1:
		return int64(*(*int8)(q))
	case 2:
		return int64(*(*int16)(q))
	case 4:
		return int64(*(*int32)(q))
	}
	return *(*int64)(q)
}

func loadUint(q unsafe.Pointer, size uintptr) uint64 {
	switch size {
	case 1:
		return uint64(*(*uint8)(q))
	case 2:
		return uint64(*(*uint16)(q))
	case 4:
		return uint64(*(*uint32)(q))
	}
	return *(*uint64)(q)
}

func encBinBool(b []byte, q unsafe.Pointer) ([]byte, error) {
	if *(*bool)(q) {
		return append(b, 1), nil
	}
	return append(b, 0), nil
}

func encBinFloat32(b []byte, q unsafe.Pointer) ([]byte, error) {
	f := float64(*(*float32)(q))
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, errUnsupportedNum
	}
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(f)), nil
}

func encBinFloat64(b []byte, q unsafe.Pointer) ([]byte, error) {
	f := *(*float64)(q)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, errUnsupportedNum
	}
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(f)), nil
}

func encBinString(b []byte, q unsafe.Pointer) ([]byte, error) {
	s := *(*string)(q)
	if uint64(len(s)) >= nilCount {
		return b, errTooLong
	}
	return appendBinString(b, s), nil
}

// appendBinString appends s as u32 length + bytes, each byte of invalid
// UTF-8 replaced with U+FFFD (what a JSON round trip gives).
func appendBinString(b []byte, s string) []byte {
	if utf8.ValidString(s) {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
		return append(b, s...)
	}
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	binary.LittleEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

func encBinBytes(b []byte, q unsafe.Pointer) ([]byte, error) {
	s := *(*[]byte)(q)
	if s == nil {
		return binary.LittleEndian.AppendUint32(b, nilCount), nil
	}
	if uint64(len(s)) >= nilCount {
		return b, errTooLong
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...), nil
}

// encBinRaw writes the bytes json.Marshal writes for the message (null
// for nil), as a length-prefixed byte string.
func encBinRaw(b []byte, q unsafe.Pointer) ([]byte, error) {
	at := len(b)
	b, err := encRaw(append(b, 0, 0, 0, 0), q)
	if err != nil {
		return b[:at], err
	}
	if uint64(len(b)-at-4) >= nilCount {
		return b[:at], errTooLong
	}
	binary.LittleEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b, nil
}

func encBinMapStringString(b []byte, q unsafe.Pointer) ([]byte, error) {
	m := *(*map[string]string)(q)
	if m == nil {
		return binary.LittleEndian.AppendUint32(b, nilCount), nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(keys)))
	for _, k := range keys {
		b = appendBinString(b, k)
		b = appendBinString(b, m[k])
	}
	return b, nil
}

// isEmpty is the omitempty emptiness of a binary leaf.
func (f *bfield) isEmpty(fp unsafe.Pointer) bool { return f.p.empty(fp) }

func (p *plan) encBinStruct(b []byte, q unsafe.Pointer) ([]byte, error) {
	var err error
	for i := range p.bin.fields {
		f := &p.bin.fields[i]
		fp := unsafe.Add(q, f.off)
		if f.zero != nil && f.isEmpty(fp) {
			if f.kind == bRaw {
				// Left out of the JSON, it decodes as nil, not null.
				b = binary.LittleEndian.AppendUint32(b, nilCount)
				continue
			}
			fp = f.zero
		}
		switch f.kind {
		case bBool:
			b, _ = encBinBool(b, fp)
		case bInt:
			b = binary.LittleEndian.AppendUint64(b, uint64(loadInt(fp, f.size)))
		case bUint:
			b = binary.LittleEndian.AppendUint64(b, loadUint(fp, f.size))
		case bString:
			if b, err = encBinString(b, fp); err != nil {
				return b, err
			}
		default:
			if b, err = f.p.bin.enc(b, fp); err != nil {
				return b, err
			}
		}
	}
	return b, nil
}

// count reads a u32 count of items of at least min bytes each: refused
// when the rest of the input cannot hold them.
func (r *binReader) count(min int) (n int, isNil, ok bool) {
	if len(r.in)-r.i < 4 {
		return 0, false, false
	}
	c := binary.LittleEndian.Uint32(r.in[r.i:])
	r.i += 4
	if c == nilCount {
		return 0, true, true
	}
	if min < 1 {
		min = 1
	}
	if uint64(c)*uint64(min) > uint64(len(r.in)-r.i) {
		return 0, false, false
	}
	return int(c), false, true
}

// str reads a u32 length + bytes as a string (sharing the input in a
// guest).
func (r *binReader) str() (string, bool) {
	in, i := r.in, r.i
	if len(in)-i < 4 {
		return "", false
	}
	n := uint64(binary.LittleEndian.Uint32(in[i:]))
	i += 4
	if n > uint64(len(in)-i) {
		return "", false
	}
	r.i = i + int(n)
	switch {
	case n == 0:
		return "", true
	case aliasStrings:
		return unsafe.String(&in[i], int(n)), true
	}
	return string(in[i : i+int(n)]), true
}

func (r *binReader) u64() (uint64, bool) {
	if len(r.in)-r.i < 8 {
		return 0, false
	}
	u := binary.LittleEndian.Uint64(r.in[r.i:])
	r.i += 8
	return u, true
}

// int reads a signed integer into a field of size bytes, refusing one out
// of its range.
func (r *binReader) int(q unsafe.Pointer, size uintptr) bool {
	u, ok := r.u64()
	if !ok {
		return false
	}
	return storeInt(q, size, int64(u))
}

func storeInt(q unsafe.Pointer, size uintptr, n int64) bool {
	switch size {
	case 1:
		if n != int64(int8(n)) {
			return false
		}
		*(*int8)(q) = int8(n)
	case 2:
		if n != int64(int16(n)) {
			return false
		}
		*(*int16)(q) = int16(n)
	case 4:
		if n != int64(int32(n)) {
			return false
		}
		*(*int32)(q) = int32(n)
	default:
		*(*int64)(q) = n
	}
	return true
}

func (r *binReader) uint(q unsafe.Pointer, size uintptr) bool {
	u, ok := r.u64()
	if !ok {
		return false
	}
	return storeUint(q, size, u)
}

func storeUint(q unsafe.Pointer, size uintptr, u uint64) bool {
	switch size {
	case 1:
		if u > math.MaxUint8 {
			return false
		}
		*(*uint8)(q) = uint8(u)
	case 2:
		if u > math.MaxUint16 {
			return false
		}
		*(*uint16)(q) = uint16(u)
	case 4:
		if u > math.MaxUint32 {
			return false
		}
		*(*uint32)(q) = uint32(u)
	default:
		*(*uint64)(q) = u
	}
	return true
}

func decBinBool(r *binReader, q unsafe.Pointer) bool {
	if r.i >= len(r.in) || r.in[r.i] > 1 {
		return false
	}
	*(*bool)(q) = r.in[r.i] == 1
	r.i++
	return true
}

func decBinFloat64(r *binReader, q unsafe.Pointer) bool {
	u, ok := r.u64()
	if !ok {
		return false
	}
	*(*float64)(q) = math.Float64frombits(u)
	return true
}

func decBinFloat32(r *binReader, q unsafe.Pointer) bool {
	u, ok := r.u64()
	if !ok {
		return false
	}
	*(*float32)(q) = float32(math.Float64frombits(u))
	return true
}

func decBinString(r *binReader, q unsafe.Pointer) bool {
	s, ok := r.str()
	if ok {
		*(*string)(q) = s
	}
	return ok
}

// decBinBytes reads a []byte or json.RawMessage: shared with the input
// in a guest (capacity cut at its end), a copy on the host.
func decBinBytes(r *binReader, q unsafe.Pointer) bool {
	n, isNil, ok := r.count(1)
	if !ok {
		return false
	}
	if isNil {
		*(*[]byte)(q) = nil
		return true
	}
	i := r.i
	r.i += n
	if aliasStrings {
		*(*[]byte)(q) = r.in[i : i+n : i+n]
	} else {
		*(*[]byte)(q) = append(make([]byte, 0, n), r.in[i:i+n]...)
	}
	return true
}

func decBinMapStringString(r *binReader, q unsafe.Pointer) bool {
	n, isNil, ok := r.count(8)
	if !ok {
		return false
	}
	if isNil {
		*(*map[string]string)(q) = nil
		return true
	}
	m := make(map[string]string, n)
	for i := 0; i < n; i++ {
		k, ok := r.str()
		if !ok {
			return false
		}
		v, ok := r.str()
		if !ok {
			return false
		}
		m[k] = v
	}
	*(*map[string]string)(q) = m
	return true
}

// decBinStruct decodes a struct's flattened leaves in one loop; the
// common kinds inline (a call through a function value costs about as
// much as the work in a Go wasm guest).
func (p *plan) decBinStruct(r *binReader, q unsafe.Pointer) bool {
	fields := p.bin.fields
	for k := range fields {
		f := &fields[k]
		fp := unsafe.Add(q, f.off)
		in, i := r.in, r.i
		switch f.kind {
		case bString:
			if len(in)-i < 4 {
				return false
			}
			n := uint64(*(*uint32)(unsafe.Pointer(&in[i])))
			i += 4
			if n > uint64(len(in)-i) {
				return false
			}
			switch {
			case n == 0:
				*(*string)(fp) = ""
			case aliasStrings:
				*(*string)(fp) = unsafe.String(&in[i], int(n))
			default:
				*(*string)(fp) = string(in[i : i+int(n)])
			}
			r.i = i + int(n)
		case bUint:
			if len(in)-i < 8 {
				return false
			}
			u := *(*uint64)(unsafe.Pointer(&in[i]))
			r.i = i + 8
			if f.size == 8 {
				*(*uint64)(fp) = u
			} else if !storeUint(fp, f.size, u) {
				return false
			}
		case bInt:
			if len(in)-i < 8 {
				return false
			}
			n := *(*int64)(unsafe.Pointer(&in[i]))
			r.i = i + 8
			if f.size == 8 {
				*(*int64)(fp) = n
			} else if !storeInt(fp, f.size, n) {
				return false
			}
		case bBool:
			if i >= len(in) || in[i] > 1 {
				return false
			}
			*(*bool)(fp) = in[i] == 1
			r.i = i + 1
		case bBytes, bRaw:
			if !decBinBytes(r, fp) {
				return false
			}
		default:
			if !f.p.bin.dec(r, fp) {
				return false
			}
		}
	}
	return true
}
