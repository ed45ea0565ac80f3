// Package wire is the module ABI's JSON codec (docs/ABI.md, "Codec"): it
// encodes and decodes Go values exactly as encoding/json does, without
// reflection per call. The first use of a type builds a plan once with
// reflect (field offsets, kinds, JSON names, omitempty); later calls walk
// the plan over unsafe pointers. The guest SDK uses it for params, host
// call args and results and payloads, the host for host call args and
// results (hostcalls.Define), so plugin authors never write a codec.
// Host-call results use the binary layout of binary.go (AppendBinary,
// UnmarshalBinary; docs/ABI.md, "Host-call results") from the same plan.
//
// Equivalence with encoding/json is the contract:
//   - Marshal returns the bytes json.Marshal returns (field order, omitempty,
//     HTML escaping, invalid UTF-8 as \ufffd, sorted map keys, compacted
//     json.RawMessage, float format), or an error where it fails.
//   - Unmarshal and DecodeParams decode on a fast path only input whose
//     meaning is plain (exact key spelling, no duplicate key, valid UTF-8,
//     integer literals for integers); anything else, and every error, is
//     handed to json.Unmarshal / protocol.DecodeParams, so results and
//     error codes and messages are theirs.
//
// Types the plan does not cover (interfaces in decoded values, Marshaler
// and TextMarshaler implementations other than json.RawMessage, arrays,
// ",string" and "omitzero" options, name conflicts between embedded
// fields, non-string map keys) take the encoding/json path whole.
//
// It depends on the standard library and lemon/protocol only, so it
// compiles for wasip1.
package wire

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// plan is what the codec knows of one Go type.
type plan struct {
	t reflect.Type
	// enc appends the JSON of the value at p; nil when the type is not
	// covered (then the top-level value goes through encoding/json).
	enc func(b []byte, p unsafe.Pointer) ([]byte, error)
	// dec decodes the next JSON value into the value at p; false hands the
	// whole input to encoding/json. nil when the type is not covered.
	dec func(d *decoder, p unsafe.Pointer) bool
	// empty reports the omitempty emptiness of the value at p.
	empty func(p unsafe.Pointer) bool
	// fields of a struct type, in encoding order.
	fields []field
	// byName maps a JSON name to its index in fields (structs only).
	byName       map[string]int
	encOK, decOK bool
	// directIface: an interface holding this type holds the value itself
	// in its data word (pointer-shaped types), not a pointer to it.
	directIface bool
	// bin is the binary layout of host-call results (binary.go).
	bin binaryPlan
}

// isDirectIface is the compiler's rule (types.IsDirectIface): pointers,
// channels, maps, funcs and unsafe pointers, and structs and arrays of
// exactly one such element.
func isDirectIface(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Chan, reflect.Map, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return t.Len() == 1 && isDirectIface(t.Elem())
	case reflect.Struct:
		return t.NumField() == 1 && isDirectIface(t.Field(0).Type)
	}
	return false
}

// field is one JSON member of a struct: the path of offsets to reach it
// (through embedded struct pointers, which may be nil) and its plan.
type field struct {
	name      string
	key       []byte // `"name":` as encoding/json writes it
	hops      []hop
	omitEmpty bool
	p         *plan
	// direct: the field is reached without an embedded pointer, at off.
	direct bool
	off    uintptr
	// kind is the field's basic kind for the inline fast cases of
	// encStruct and decStruct (kOther: call p's functions).
	kind kind
	// first8 and last8 are the name's first and last 8 bytes as words
	// (first8 zero-padded): decStruct compares a key with them instead of
	// runtime.memequal, a loop iteration per byte in a guest.
	first8, last8 uint64
	// keyFirst8 and keyLast8 are the same of key (`"name":`), for
	// matching the expected next member in one go.
	keyFirst8, keyLast8 uint64
}

// nameWords returns the words field.first8 and field.last8 of name.
func nameWords(name string) (first8, last8 uint64) {
	for i := 0; i < 8 && i < len(name); i++ {
		first8 |= uint64(name[i]) << (8 * i)
	}
	if len(name) >= 8 {
		for i := 0; i < 8; i++ {
			last8 |= uint64(name[len(name)-8+i]) << (8 * i)
		}
	}
	return first8, last8
}

// kind names the field kinds the struct loops handle inline; a call
// through a function value costs about as much as the work in a Go wasm
// guest, so the common kinds avoid it.
type kind uint8

const (
	kOther kind = iota
	kString
	kBool
	kInt
	kInt64
	kInt32
	kUint32
	kUint64
)

func kindOf(t reflect.Type) kind {
	if customEnc(t) || customDec(t) {
		return kOther
	}
	switch t.Kind() {
	case reflect.String:
		return kString
	case reflect.Bool:
		return kBool
	case reflect.Int:
		if t.Size() == 8 {
			return kInt
		}
	case reflect.Int64:
		return kInt64
	case reflect.Int32:
		return kInt32
	case reflect.Uint32:
		return kUint32
	case reflect.Uint64:
		return kUint64
	}
	return kOther
}

// hop is one step of a field path: add off; when ptr, the field at off
// is a pointer to an embedded struct to follow.
type hop struct {
	off uintptr
	ptr bool
	typ reflect.Type // the embedded struct type when ptr
}

var plans sync.Map // reflect.Type → *plan

var (
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
	marshalerType       = reflect.TypeFor[json.Marshaler]()
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textMarshalerType   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// planFor returns the plan of t, building it once.
func planFor(t reflect.Type) *plan {
	rt := typePtr(t)
	slot := &cache[(uint64(uintptr(rt))*0x9E3779B97F4A7C15)>>(64-cacheBits)]
	if e := slot.Load(); e != nil && e.rt == rt {
		return e.p
	}
	p := planSlow(t)
	slot.Store(&cacheEntry{rt: rt, p: p})
	return p
}

// cache is a direct-mapped cache in front of plans, keyed by the type's
// *rtype (a Fibonacci hash of it picks the slot): a sync.Map load costs
// about 0.6 µs in a Go wasm guest, a slot load a few ns.
const cacheBits = 8

var cache [1 << cacheBits]atomic.Pointer[cacheEntry]

type cacheEntry struct {
	rt unsafe.Pointer // the *rtype of the plan's type
	p  *plan
}

// typePtr is the *rtype inside a reflect.Type, for hashing only.
func typePtr(t reflect.Type) unsafe.Pointer {
	return (*[2]unsafe.Pointer)(unsafe.Pointer(&t))[1]
}

func planSlow(t reflect.Type) *plan {
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	mu.Lock()
	defer mu.Unlock()
	p := build(t)
	for t, q := range building {
		plans.Store(t, q)
	}
	clear(building)
	return p
}

// mu serialises plan building; building holds the plans of one planFor
// until all are filled (a recursive type finds its own unfinished plan
// there and references it), then they are published in plans.
var (
	mu       sync.Mutex
	building = map[reflect.Type]*plan{}
)

func build(t reflect.Type) *plan {
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	if p, ok := building[t]; ok {
		return p
	}
	p := &plan{t: t, encOK: true, decOK: true, directIface: isDirectIface(t)}
	building[t] = p
	p.fill()
	p.binPlan()
	return p
}

func customEnc(t reflect.Type) bool {
	if t == rawMessageType {
		return false
	}
	return t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) ||
		t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType)
}

func customDec(t reflect.Type) bool {
	if t == rawMessageType {
		return false
	}
	return reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) ||
		t.Implements(unmarshalerType) || t.Implements(textUnmarshalerType)
}

// fill sets p's functions from its type. A sub-plan that is not covered
// makes p not covered in the same direction.
func (p *plan) fill() {
	t := p.t
	if customEnc(t) {
		p.encOK = false
	}
	if customDec(t) {
		p.decOK = false
	}
	p.empty = func(unsafe.Pointer) bool { return false }
	switch {
	case t == rawMessageType:
		p.enc = encRaw
		p.dec = decRaw
		p.empty = emptySlice
		return
	}
	switch t.Kind() {
	case reflect.Bool:
		p.enc, p.dec = encBool, decBool
		p.empty = func(q unsafe.Pointer) bool { return !*(*bool)(q) }
	case reflect.String:
		p.enc, p.dec = encString, decString
		p.empty = func(q unsafe.Pointer) bool { return len(*(*string)(q)) == 0 }
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		p.intPlan(t)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		p.uintPlan(t)
	case reflect.Float32:
		p.enc, p.dec = encFloat32, decFloat32
		p.empty = func(q unsafe.Pointer) bool { return *(*float32)(q) == 0 }
	case reflect.Float64:
		p.enc, p.dec = encFloat64, decFloat64
		p.empty = func(q unsafe.Pointer) bool { return *(*float64)(q) == 0 }
	case reflect.Pointer:
		p.pointerPlan(t)
	case reflect.Slice:
		p.slicePlan(t)
	case reflect.Map:
		p.mapPlan(t)
	case reflect.Struct:
		p.structPlan(t)
	case reflect.Interface:
		p.decOK = false
		p.enc = func(b []byte, q unsafe.Pointer) ([]byte, error) {
			v := reflect.NewAt(t, q).Elem()
			if v.IsNil() {
				return append(b, "null"...), nil
			}
			return appendMarshal(b, v.Interface())
		}
		p.empty = func(q unsafe.Pointer) bool { return reflect.NewAt(t, q).Elem().IsNil() }
	default:
		p.encOK, p.decOK = false, false
	}
}

func emptySlice(q unsafe.Pointer) bool { return (*sliceHeader)(q).len == 0 }

type sliceHeader struct {
	data unsafe.Pointer
	len  int
	cap  int
}

func (p *plan) pointerPlan(t reflect.Type) {
	elem := build(t.Elem())
	if !elem.encOK {
		p.encOK = false
	}
	if !elem.decOK {
		p.decOK = false
	}
	p.empty = func(q unsafe.Pointer) bool { return *(*unsafe.Pointer)(q) == nil }
	p.enc = func(b []byte, q unsafe.Pointer) ([]byte, error) {
		e := *(*unsafe.Pointer)(q)
		if e == nil {
			return append(b, "null"...), nil
		}
		return elem.enc(b, e)
	}
	et := t.Elem()
	p.dec = func(d *decoder, q unsafe.Pointer) bool {
		if d.null() {
			*(*unsafe.Pointer)(q) = nil
			return true
		}
		e := *(*unsafe.Pointer)(q)
		if e == nil {
			e = reflect.New(et).UnsafePointer()
			*(*unsafe.Pointer)(q) = e
		}
		return elem.dec(d, e)
	}
}

func (p *plan) slicePlan(t reflect.Type) {
	p.empty = emptySlice
	et := t.Elem()
	if et.Kind() == reflect.Uint8 && !customEnc(et) && !customDec(et) {
		p.enc, p.dec = encBytes, decBytes
		return
	}
	elem := build(et)
	if !elem.encOK {
		p.encOK = false
	}
	if !elem.decOK {
		p.decOK = false
	}
	size := et.Size()
	p.enc = func(b []byte, q unsafe.Pointer) ([]byte, error) {
		h := (*sliceHeader)(q)
		if h.data == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		var err error
		for i := 0; i < h.len; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = elem.enc(b, unsafe.Add(h.data, uintptr(i)*size)); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	}
	p.dec = func(d *decoder, q unsafe.Pointer) bool {
		if d.null() {
			*(*sliceHeader)(q) = sliceHeader{}
			return true
		}
		if (*sliceHeader)(q).len != 0 || !d.consume('[') {
			return false // decoding into a non-empty slice reuses its elements
		}
		v := reflect.MakeSlice(t, 0, 0)
		if d.consume(']') {
			reflect.NewAt(t, q).Elem().Set(v)
			return true
		}
		for {
			v = reflect.Append(v, reflect.Zero(et))
			if !elem.dec(d, v.Index(v.Len()-1).Addr().UnsafePointer()) {
				return false
			}
			if d.consume(']') {
				break
			}
			if !d.consume(',') {
				return false
			}
		}
		reflect.NewAt(t, q).Elem().Set(v)
		return true
	}
}

func (p *plan) mapPlan(t reflect.Type) {
	p.empty = func(q unsafe.Pointer) bool { return reflect.NewAt(t, q).Elem().Len() == 0 }
	if t.Key().Kind() != reflect.String || customEnc(t.Key()) || customDec(t.Key()) {
		p.encOK, p.decOK = false, false
		return
	}
	switch t {
	case reflect.TypeFor[map[string]string]():
		p.enc, p.dec = encMapStringString, decMapStringString
		p.empty = func(q unsafe.Pointer) bool { return len(*(*map[string]string)(q)) == 0 }
		return
	}
	elem := build(t.Elem())
	if !elem.encOK {
		p.encOK = false
	}
	if !elem.decOK {
		p.decOK = false
	}
	et := t.Elem()
	p.enc = func(b []byte, q unsafe.Pointer) ([]byte, error) {
		m := reflect.NewAt(t, q).Elem()
		if m.IsNil() {
			return append(b, "null"...), nil
		}
		keys := m.MapKeys()
		names := make([]string, len(keys))
		for i, k := range keys {
			names[i] = k.String()
		}
		sortKeys(names, keys)
		b = append(b, '{')
		tmp := reflect.New(et)
		var err error
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, names[i])
			b = append(b, ':')
			tmp.Elem().Set(m.MapIndex(k))
			if b, err = elem.enc(b, tmp.UnsafePointer()); err != nil {
				return b, err
			}
		}
		return append(b, '}'), nil
	}
	kt := t.Key()
	p.dec = func(d *decoder, q unsafe.Pointer) bool {
		if d.null() {
			*(*unsafe.Pointer)(q) = nil
			return true
		}
		if !d.consume('{') {
			return false
		}
		m := reflect.NewAt(t, q).Elem()
		if m.IsNil() {
			m.Set(reflect.MakeMap(t))
		}
		if d.consume('}') {
			return true
		}
		for {
			k, ok := d.str()
			if !ok || !d.consume(':') {
				return false
			}
			v := reflect.New(et)
			if !elem.dec(d, v.UnsafePointer()) {
				return false
			}
			m.SetMapIndex(reflect.ValueOf(k).Convert(kt), v.Elem())
			if d.consume('}') {
				return true
			}
			if !d.consume(',') {
				return false
			}
		}
	}
}

func sortKeys(names []string, keys []reflect.Value) {
	// insertion sort: maps in payloads are small
	for i := 1; i < len(names); i++ {
		for j := i; j > 0 && names[j] < names[j-1]; j-- {
			names[j], names[j-1] = names[j-1], names[j]
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
}

// structPlan lays out a struct's JSON members as encoding/json does
// (typeFields): exported fields in index order, embedded structs inlined.
// Any name conflict, tag option the plan does not know, or unexported
// embedded pointer leaves the type to encoding/json.
func (p *plan) structPlan(t reflect.Type) {
	p.byName = map[string]int{}
	ok := p.collect(t, nil, 0)
	if !ok {
		p.encOK, p.decOK = false, false
		p.fields, p.byName = nil, nil
		return
	}
	for _, f := range p.fields {
		if !f.p.encOK {
			p.encOK = false
		}
		if !f.p.decOK {
			p.decOK = false
		}
	}
	p.enc = p.encStruct
	p.dec = p.decStruct
}

func (p *plan) collect(t reflect.Type, hops []hop, depth int) bool {
	if depth > 8 {
		return false
	}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		omit := false
		for _, o := range strings.Split(opts, ",") {
			switch o {
			case "":
			case "omitempty":
				omit = true
			default:
				return false // ",string", "omitzero" and the like
			}
		}
		if name != "" && !validTag(name) {
			return false
		}
		if sf.Anonymous {
			ft := sf.Type
			isPtr := ft.Kind() == reflect.Pointer
			if isPtr {
				ft = ft.Elem()
			}
			if name == "" && ft.Kind() == reflect.Struct {
				if isPtr && !sf.IsExported() {
					return false
				}
				h := append(append([]hop(nil), hops...), hop{off: sf.Offset, ptr: isPtr, typ: ft})
				if customEnc(ft) || customDec(ft) || customEnc(sf.Type) || customDec(sf.Type) {
					return false
				}
				if !p.collect(ft, h, depth+1) {
					return false
				}
				continue
			}
			if !sf.IsExported() {
				continue
			}
		} else if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if _, dup := p.byName[name]; dup {
			return false // encoding/json's dominance rules: not covered
		}
		h := append(append([]hop(nil), hops...), hop{off: sf.Offset})
		key := appendString(nil, name)
		key = append(key, ':')
		p.byName[name] = len(p.fields)
		f := field{name: name, key: key, hops: h, omitEmpty: omit, p: build(sf.Type), kind: kindOf(sf.Type)}
		f.first8, f.last8 = nameWords(name)
		if len(key) <= 16 && len(key) == len(name)+3 {
			f.keyFirst8, f.keyLast8 = nameWords(string(key))
		}
		f.direct = true
		for _, x := range h {
			f.off += x.off
			f.direct = f.direct && !x.ptr
		}
		if !f.direct {
			f.off = 0 // only hops reach it (field.at, field.alloc)
		}
		p.fields = append(p.fields, f)
	}
	return true
}

func validTag(s string) bool {
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case c >= 0x80 || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		default:
			return false
		}
	}
	return true
}

// at follows f's path from the struct at p; nil when an embedded pointer
// on the way is nil.
func (f *field) at(p unsafe.Pointer) unsafe.Pointer {
	if f.direct {
		return unsafe.Add(p, f.off)
	}
	for _, h := range f.hops {
		p = unsafe.Add(p, h.off)
		if h.ptr {
			p = *(*unsafe.Pointer)(p)
			if p == nil {
				return nil
			}
		}
	}
	return p
}

// alloc follows f's path, allocating nil embedded pointers.
func (f *field) alloc(p unsafe.Pointer) unsafe.Pointer {
	if f.direct {
		return unsafe.Add(p, f.off)
	}
	for _, h := range f.hops {
		p = unsafe.Add(p, h.off)
		if h.ptr {
			q := *(*unsafe.Pointer)(p)
			if q == nil {
				q = reflect.New(h.typ).UnsafePointer()
				*(*unsafe.Pointer)(p) = q
			}
			p = q
		}
	}
	return p
}
