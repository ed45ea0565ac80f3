package wire_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"lemon/host/abi/wire"
	"lemon/hostcalls/contract"
)

// everyBin is every kind the binary layout takes: every without its
// embedded struct pointer, with an embedded struct value instead.
type everyBin struct {
	S     string            `json:"s"`
	SO    string            `json:"so,omitempty"`
	B     bool              `json:"b"`
	BO    bool              `json:"bo,omitempty"`
	I     int               `json:"i"`
	I8    int8              `json:"i8"`
	I16   int16             `json:"i16,omitempty"`
	I32   int32             `json:"i32"`
	I64   int64             `json:"i64,omitempty"`
	U     uint              `json:"u"`
	U8    uint8             `json:"u8"`
	U16   uint16            `json:"u16"`
	U32   uint32            `json:"u32,omitempty"`
	U64   uint64            `json:"u64"`
	F32   float32           `json:"f32"`
	F64   float64           `json:"f64,omitempty"`
	Bytes []byte            `json:"bytes"`
	BO2   []byte            `json:"bo2,omitempty"`
	Raw   json.RawMessage   `json:"raw,omitempty"`
	Raw2  json.RawMessage   `json:"raw2"`
	Strs  []string          `json:"strs"`
	StrsO []string          `json:"strso,omitempty"`
	In    inner             `json:"in"`
	InP   *inner            `json:"inp,omitempty"`
	Ins   []inner           `json:"ins,omitempty"`
	InPs  []*inner          `json:"inps"`
	M     map[string]string `json:"m"`
	MO    map[string]string `json:"mo,omitempty"`
	MU    map[string]uint32 `json:"mu,omitempty"`
	MI    map[string]inner  `json:"mi"`
	PS    *string           `json:"ps"`
	PI    *int64            `json:"pi,omitempty"`
	NoTag string
	Dash  string `json:"-"`
	priv  string
	Embedded
}

// binaryTypes are every type the binary layout must carry: everyBin and
// every contract result type but the raw ones (RawBytes, config.get's
// Settings, served with hostcalls.DefineRaw).
func binaryTypes(t *testing.T) []reflect.Type {
	ts := []reflect.Type{reflect.TypeFor[everyBin](), reflect.TypeFor[inner]()}
	for _, s := range contract.Specs() {
		switch s.Result {
		case reflect.TypeFor[contract.RawBytes](), reflect.TypeFor[contract.Settings]():
			continue
		}
		ts = append(ts, s.Result)
	}
	return ts
}

func TestBinaryContractResultTypesSupported(t *testing.T) {
	for _, typ := range binaryTypes(t) {
		if err := wire.CheckBinary(typ); err != nil {
			t.Errorf("%v: %v", typ, err)
		}
	}
}

func TestBinaryRefusedAtPlanTime(t *testing.T) {
	type withIface struct {
		A any `json:"a"`
	}
	type withEmbeddedPtr struct {
		*Embedded
	}
	type withArray struct {
		A [2]int `json:"a"`
	}
	type withIntKeys struct {
		M map[int]string `json:"m"`
	}
	type withEmpties struct {
		E []struct{} `json:"e"`
	}
	type withStringOpt struct {
		N int `json:"n,string"`
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[withIface](), reflect.TypeFor[withEmbeddedPtr](), reflect.TypeFor[withArray](),
		reflect.TypeFor[withIntKeys](), reflect.TypeFor[withEmpties](), reflect.TypeFor[withStringOpt](), reflect.TypeFor[contract.Settings](),
		reflect.TypeFor[map[string]any](), reflect.TypeFor[every](), reflect.TypeFor[chan int]()} {
		if err := wire.CheckBinary(typ); err == nil {
			t.Errorf("%v: accepted", typ)
		}
		v := reflect.New(typ)
		if _, err := wire.AppendBinary(nil, v.Elem().Interface()); err == nil {
			t.Errorf("%v: AppendBinary accepted", typ)
		}
		if err := wire.UnmarshalBinary([]byte{0, 0, 0, 0}, v.Interface()); err == nil {
			t.Errorf("%v: UnmarshalBinary accepted", typ)
		}
	}
}

// TestBinaryRoundTripMatchesJSON: for random values of every type, what
// UnmarshalBinary makes of AppendBinary's bytes is what Unmarshal makes
// of Marshal's, and AppendBinary fails where Marshal fails.
func TestBinaryRoundTripMatchesJSON(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for _, typ := range binaryTypes(t) {
		for i := 0; i < 500; i++ {
			v := reflect.New(typ)
			fill(r, v.Elem(), 0)
			js, jerr := wire.Marshal(v.Elem().Interface())
			bin, berr := wire.AppendBinary(nil, v.Elem().Interface())
			if (jerr != nil) != (berr != nil) {
				t.Fatalf("%v: Marshal error %v, AppendBinary error %v", typ, jerr, berr)
			}
			if jerr != nil {
				continue
			}
			a, b := reflect.New(typ), reflect.New(typ)
			if err := json.Unmarshal(js, a.Interface()); err != nil {
				t.Fatalf("%v: json.Unmarshal(%s): %v", typ, js, err)
			}
			if err := wire.UnmarshalBinary(bin, b.Interface()); err != nil {
				t.Fatalf("%v: UnmarshalBinary(%x): %v", typ, bin, err)
			}
			if !reflect.DeepEqual(a.Interface(), b.Interface()) {
				t.Fatalf("%v: binary round trip\n got %+v\nwant %+v (JSON %s)", typ, b.Elem(), a.Elem(), js)
			}
			// Back to JSON (hostcalls.HostCall.ResultJSON): the bytes the
			// JSON path's decoded value encodes to (an invalid byte that
			// was \ufffd comes back as U+FFFD itself).
			ja, _ := wire.Marshal(a.Elem().Interface())
			if js2, err := wire.Marshal(b.Elem().Interface()); err != nil || !bytes.Equal(js2, ja) {
				t.Fatalf("%v: JSON of the decoded value\n got %s (%v)\nwant %s", typ, js2, err, js)
			}
			// By pointer: a u8 1 tag ahead of the value.
			pbin, err := wire.AppendBinary(nil, v.Interface())
			if err != nil || len(pbin) != len(bin)+1 || pbin[0] != 1 || !bytes.Equal(pbin[1:], bin) {
				t.Fatalf("%v: AppendBinary of a pointer = %x, %v", typ, pbin, err)
			}
			// Every truncation is an error, never a panic.
			for n := 0; n < len(bin); n++ {
				c := reflect.New(typ)
				if err := wire.UnmarshalBinary(bin[:n:n], c.Interface()); err == nil {
					t.Fatalf("%v: UnmarshalBinary of %d of %d bytes succeeded", typ, n, len(bin))
				}
			}
			if err := wire.UnmarshalBinary(append(bin, 0), reflect.New(typ).Interface()); err == nil {
				t.Fatalf("%v: a trailing byte accepted", typ)
			}
		}
	}
}

func TestBinaryLayout(t *testing.T) {
	le := binary.LittleEndian
	res := contract.FSOpenResult{Handle: 7, Path: "/a", Stat: contract.FSRawStat{Mode: 0o100644, Size: -1, Readable: true}, Link: ""}
	got, err := wire.AppendBinary(nil, res)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	want = le.AppendUint64(want, 7)
	want = le.AppendUint32(want, 2)
	want = append(want, "/a"...)
	want = le.AppendUint64(want, 0o100644)
	want = le.AppendUint64(want, 1<<64-1) // size -1
	for i := 0; i < 7; i++ {              // mtimeSec, mtimeNsec, ino, dev, nlink, uid, gid
		want = le.AppendUint64(want, 0)
	}
	want = append(want, 1, 0)       // readable, writable
	want = le.AppendUint32(want, 0) // link
	if !bytes.Equal(got, want) {
		t.Fatalf("FSOpenResult:\n got %x\nwant %x", got, want)
	}
	type ptrs struct {
		P  *uint32           `json:"p"`
		S  []string          `json:"s"`
		M  map[string]string `json:"m"`
		MO map[string]string `json:"mo,omitempty"`
	}
	x := uint32(5)
	got, err = wire.AppendBinary(nil, ptrs{P: &x, M: map[string]string{"b": "2", "a": "1"}, MO: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	want = append([]byte{1}, le.AppendUint64(nil, 5)...)
	want = le.AppendUint32(want, 0xFFFFFFFF) // nil slice
	want = le.AppendUint32(want, 2)
	for _, s := range []string{"a", "1", "b", "2"} { // sorted keys
		want = le.AppendUint32(want, 1)
		want = append(want, s...)
	}
	want = le.AppendUint32(want, 0xFFFFFFFF) // empty omitempty map: its zero value
	if !bytes.Equal(got, want) {
		t.Fatalf("ptrs:\n got %x\nwant %x", got, want)
	}
}

func TestUnmarshalBinaryRefusesBadValues(t *testing.T) {
	le := binary.LittleEndian
	type small struct {
		B  bool    `json:"b"`
		U8 uint8   `json:"u8"`
		I8 int8    `json:"i8"`
		P  *string `json:"p"`
	}
	good := append(append([]byte{1}, le.AppendUint64(nil, 255)...), le.AppendUint64(nil, uint64(1<<64-128))...)
	good = append(good, 0)
	var s small
	if err := wire.UnmarshalBinary(good, &s); err != nil || !s.B || s.U8 != 255 || s.I8 != -128 || s.P != nil {
		t.Fatalf("good: %+v %v", s, err)
	}
	for name, in := range map[string][]byte{
		"bool 2":      append([]byte{2}, good[1:]...),
		"u8 256":      append(append([]byte{1}, le.AppendUint64(nil, 256)...), good[9:]...),
		"i8 -129":     append(append(append([]byte{1}, le.AppendUint64(nil, 255)...), le.AppendUint64(nil, uint64(1<<64-129))...), 0),
		"pointer tag": append(append([]byte(nil), good[:len(good)-1]...), 2),
	} {
		if err := wire.UnmarshalBinary(in, &s); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	var l contract.StoreListResult
	huge := le.AppendUint32(nil, 0xFFFFFFFE) // count far past the input
	if err := wire.UnmarshalBinary(append(huge, 1), &l); err == nil {
		t.Fatal("huge count accepted")
	}
	if err := wire.UnmarshalBinary(nil, l); err == nil {
		t.Fatal("non-pointer accepted")
	}
}

// FuzzUnmarshalBinary: arbitrary input decodes or fails, never panics,
// and what decodes encodes back to the same bytes for types whose layout
// has one encoding per value (no float, no map).
func FuzzUnmarshalBinary(f *testing.F) {
	r := rand.New(rand.NewSource(3))
	for _, v := range []any{contract.FSOpenResult{Handle: 1, Path: "/x", Link: "l"}, contract.SysinfoFigures{Hostname: "h", CPUCount: 2},
		contract.StoreScanResult{Entries: []contract.StoreEntry{{Key: "k", Value: json.RawMessage(`{"a":1}`), Revision: 3}}, More: true},
		contract.StoreListResult{Keys: []string{"a", "b"}}} {
		b, err := wire.AppendBinary(nil, v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(0), b)
	}
	var e everyBin
	fill(r, reflect.ValueOf(&e).Elem(), 0)
	e.Raw, e.Raw2 = nil, json.RawMessage(`[1]`)
	if b, err := wire.AppendBinary(nil, e); err == nil {
		f.Add(uint8(4), b)
	}
	f.Fuzz(func(t *testing.T, which uint8, in []byte) {
		switch which % 5 {
		case 0:
			var v contract.FSOpenResult
			roundTrip(t, in, &v)
		case 1:
			var v contract.SysinfoFigures
			roundTrip(t, in, &v)
		case 2:
			var v contract.StoreScanResult
			_ = wire.UnmarshalBinary(in, &v)
		case 3:
			var v contract.StoreListResult
			roundTrip(t, in, &v)
		default:
			var v everyBin
			_ = wire.UnmarshalBinary(in, &v)
		}
	})
}

func roundTrip[T any](t *testing.T, in []byte, v *T) {
	if err := wire.UnmarshalBinary(in, v); err != nil {
		return
	}
	out, err := wire.AppendBinary(nil, *v)
	if err != nil {
		return // invalid UTF-8 is replaced, so the bytes may differ
	}
	if !bytes.Equal(out, in) && utf8Valid(in) {
		t.Fatalf("re-encoding %x gave %x", in, out)
	}
}

func utf8Valid(b []byte) bool {
	return json.Valid(append(append([]byte(`"`), bytes.ReplaceAll(bytes.ReplaceAll(b, []byte(`\`), nil), []byte(`"`), nil)...), '"'))
}

// TestBinaryConcurrentUse: plans built and used from many goroutines at
// once (the host encodes results of concurrent invocations); run with
// -race.
func TestBinaryConcurrentUse(t *testing.T) {
	type freshBin struct {
		A string            `json:"a"`
		B []inner           `json:"b"`
		C map[string]uint32 `json:"c"`
		D *inner            `json:"d"`
	}
	want := freshBin{A: "x", B: []inner{{A: "y", B: 2}}, C: map[string]uint32{"k": 1}, D: &inner{A: "z"}}
	done := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; i < 200; i++ {
				b, err := wire.AppendBinary(nil, want)
				if err != nil {
					done <- err
					return
				}
				var v freshBin
				if err := wire.UnmarshalBinary(b, &v); err != nil || !reflect.DeepEqual(v, want) {
					done <- fmt.Errorf("round trip: %+v %v", v, err)
					return
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
