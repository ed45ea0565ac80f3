package wire_test

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"lemon/host/abi/wire"
	"lemon/hostcalls/contract"
	"lemon/protocol"
)

type inner struct {
	A string `json:"a"`
	B int    `json:"b,omitempty"`
}

type Embedded struct {
	E1 string `json:"e1"`
	E2 uint32 `json:"e2,omitempty"`
}

type every struct {
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
	U32   uint32            `json:"u32,omitempty"`
	U64   uint64            `json:"u64"`
	F32   float32           `json:"f32"`
	F64   float64           `json:"f64,omitempty"`
	Bytes []byte            `json:"bytes"`
	BO2   []byte            `json:"bo2,omitempty"`
	Raw   json.RawMessage   `json:"raw,omitempty"`
	Strs  []string          `json:"strs"`
	In    inner             `json:"in"`
	InP   *inner            `json:"inp,omitempty"`
	Ins   []inner           `json:"ins,omitempty"`
	InPs  []*inner          `json:"inps"`
	M     map[string]string `json:"m"`
	MU    map[string]uint32 `json:"mu,omitempty"`
	PS    *string           `json:"ps"`
	PI    *int64            `json:"pi,omitempty"`
	NoTag string
	Dash  string `json:"-"`
	priv  string
	*Embedded
}

type withAny struct {
	Any  any            `json:"any,omitempty"`
	Anys map[string]any `json:"anys"`
	E    every          `json:"e"`
}

var trickyStrings = []string{"", "plain", "<a href=\"x\">&amp;</a>", "tab\tnl\ncr\r\b\f\x00\x1f", "\u2028\u2029",
	"é ü 日本 🎉", "bad \xff\xfe utf8", "\xed\xa0\x80", "back\\slash /", "\x7f"}

func randString(r *rand.Rand) string {
	if r.Intn(3) == 0 {
		return trickyStrings[r.Intn(len(trickyStrings))]
	}
	var sb strings.Builder
	for n := r.Intn(12); n > 0; n-- {
		switch r.Intn(6) {
		case 0:
			sb.WriteByte(byte(r.Intn(128)))
		case 1:
			sb.WriteRune(rune(r.Intn(0x10FFFF)))
		case 2:
			sb.WriteByte(byte(r.Intn(256)))
		default:
			sb.WriteByte(byte('a' + r.Intn(26)))
		}
	}
	return sb.String()
}

// fill sets v to a random value of its type.
func fill(r *rand.Rand, v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(randString(r))
	case reflect.Bool:
		v.SetBool(r.Intn(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := v.Type().Bits()
		n := r.Int63() >> (64 - bits)
		if r.Intn(2) == 0 {
			n = -n - 1
		}
		if r.Intn(3) == 0 {
			n = 0
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n := r.Uint64() >> (64 - v.Type().Bits())
		if r.Intn(3) == 0 {
			n = 0
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		fs := []float64{0, 1.5, -2, 1e-7, 1e21, 123456789.125, math.MaxFloat32, 3.4e-39, r.NormFloat64() * 1e6}
		v.SetFloat(fs[r.Intn(len(fs))])
	case reflect.Slice:
		if r.Intn(4) == 0 || depth > 3 {
			return // nil
		}
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			raws := []string{`{"a" : [1, 2.5e3, true, null, "x<y"]}`, `"\u2028 & é"`, ` 42 `, `[]`, `{}`, "\"\xff\""}
			v.SetBytes([]byte(raws[r.Intn(len(raws))]))
			return
		}
		n := r.Intn(4)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := 0; i < n; i++ {
			fill(r, s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		if r.Intn(4) == 0 || v.Type().Elem().Kind() == reflect.Interface {
			return
		}
		m := reflect.MakeMap(v.Type())
		for n := r.Intn(4); n > 0; n-- {
			k := reflect.New(v.Type().Key()).Elem()
			fill(r, k, depth+1)
			e := reflect.New(v.Type().Elem()).Elem()
			fill(r, e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Pointer:
		if r.Intn(3) == 0 || depth > 3 {
			return
		}
		e := reflect.New(v.Type().Elem())
		fill(r, e.Elem(), depth+1)
		v.Set(e)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(r, v.Field(i), depth+1)
			}
		}
	case reflect.Interface:
		if r.Intn(2) == 0 {
			v.Set(reflect.ValueOf(map[string]any{"k": randString(r), "n": 1.5}))
		}
	}
}

// types are the shapes the codec must match encoding/json on: a struct
// of every kind, and every contract args and result type.
func types() []reflect.Type {
	ts := []reflect.Type{reflect.TypeFor[every](), reflect.TypeFor[withAny](), reflect.TypeFor[protocol.Error](), reflect.TypeFor[map[string]uint32]()}
	for _, s := range contract.Specs() {
		ts = append(ts, s.Args, s.Result)
	}
	return ts
}

func TestMarshalMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, typ := range types() {
		for i := 0; i < 300; i++ {
			v := reflect.New(typ)
			fill(r, v.Elem(), 0)
			want, werr := json.Marshal(v.Interface())
			got, gerr := wire.Marshal(v.Interface())
			if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("%v: Marshal\n got %s (%v)\nwant %s (%v)", typ, got, gerr, want, werr)
			}
			// By value as well as by pointer.
			got, gerr = wire.Marshal(v.Elem().Interface())
			if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("%v: Marshal by value\n got %s\nwant %s", typ, got, want)
			}
			if werr != nil {
				continue
			}
			// Round trip: decode what encoding/json wrote, both ways.
			a, b := reflect.New(typ), reflect.New(typ)
			aerr := json.Unmarshal(want, a.Interface())
			berr := wire.Unmarshal(want, b.Interface())
			if (aerr != nil) != (berr != nil) || aerr == nil && !reflect.DeepEqual(a.Interface(), b.Interface()) {
				t.Fatalf("%v: Unmarshal of %s\n got %+v (%v)\nwant %+v (%v)", typ, want, b.Elem(), berr, a.Elem(), aerr)
			}
		}
	}
}

func TestMarshalEdgeCases(t *testing.T) {
	n := 0
	for _, v := range []any{nil, (*inner)(nil), json.RawMessage(nil), json.RawMessage(` {"a" :1} `), json.RawMessage(`{`),
		json.RawMessage{}, math.NaN(), math.Inf(1), float32(1e-7), 1e21, "x", []int(nil), []int{}, &n,
		map[string]string{"b": "1", "a": "<"}, struct{ X []byte }{[]byte("hi")}, []json.RawMessage{[]byte(`"\u2029"`)}} {
		want, werr := json.Marshal(v)
		got, gerr := wire.Marshal(v)
		if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
			t.Errorf("Marshal(%#v) = %s, %v; want %s, %v", v, got, gerr, want, werr)
		}
	}
}

// paramsCases are params texts, plain and hostile, for DecodeParams.
var paramsCases = []string{
	``, `null`, `{}`, ` { } `, `{"s":"x","i":1,"b":true}`, `{"s":"x","s":"y"}`, `{"S":"x"}`, `{"nope":1}`,
	`{"i":1.0}`, `{"i":1e2}`, `{"i":-0}`, `{"i8":128}`, `{"i8":-128}`, `{"u8":-1}`, `{"u":18446744073709551615}`,
	`{"u64":18446744073709551616}`, `{"s":1}`, `{"b":"true"}`, `{"s":"\ud800"}`, `{"s":"\ud83d\ude00 \u00e9"}`,
	"{\"s\":\"\xff\"}", `{"s":"a\"b\\c\/d\n"}`, `{"in":{"a":"x","A":"y"}}`, `{"in":{"a":"x","a":"y"}}`,
	`{"in":null}`, `{"inp":null}`, `{"inp":{"b":2}}`, `{"ins":[{"a":"1"},{"b":2}]}`, `{"ins":[]}`, `{"strs":null}`,
	`{"m":{"k":"v","k":"w"}}`, `{"m":{"k":null}}`, `{"mu":{"x":4294967295}}`, `{"mu":{"x":4294967296}}`,
	`{"bytes":"aGk="}`, `{"bytes":"aGk"}`, `{"bytes":"aG\nk="}`, `{"raw":{"x":[1,{"y":null}]}}`, `{"raw":"\ud800"}`,
	`{"e1":"x"}`, `{"e2":5}`, `{"NoTag":"x"}`, `{"notag":"x"}`, `{"Dash":"x"}`, `{"-":"x"}`, `{"priv":"x"}`,
	`{"f32":3.4e39}`, `{"f64":1e400}`, `{"f64":-1.5e-3}`, `{} x`, `{}{}`, `[]`, `"s"`, `{"s":"x",}`, `{"s" "x"}`,
	`{"ps":"p","pi":7}`, `{"pi":null}`, `{"any":1}`, `{"s":"<&>"}`, `{"i": 01}`, `{"i":-}`, `{"b":nul}`,
}

func TestDecodeParamsMatchesProtocol(t *testing.T) {
	check := func(t *testing.T, in string) {
		var a, b every
		a.I, b.I = 9, 9 // a field given before decoding stays when absent
		perr := protocol.DecodeParams(json.RawMessage(in), &a)
		werr := wire.DecodeParams([]byte(in), &b)
		if !reflect.DeepEqual(perr, werr) || perr == nil && !reflect.DeepEqual(a, b) {
			t.Fatalf("DecodeParams(%q):\n got %+v %v\nwant %+v %v", in, b, werr, a, perr)
		}
		type small struct {
			NodeID string `json:"nodeId"`
			Path   string `json:"path"`
			Limit  int    `json:"limit,omitempty"`
		}
		var c, d small
		perr = protocol.DecodeParams(json.RawMessage(in), &c)
		werr = wire.DecodeParams([]byte(in), &d)
		if !reflect.DeepEqual(perr, werr) || perr == nil && c != d {
			t.Fatalf("DecodeParams(%q) small:\n got %+v %v\nwant %+v %v", in, d, werr, c, perr)
		}
	}
	for _, in := range paramsCases {
		check(t, in)
	}
	// Random mutations of the cases.
	r := rand.New(rand.NewSource(2))
	for i := 0; i < 20000; i++ {
		b := []byte(paramsCases[r.Intn(len(paramsCases))])
		for n := r.Intn(3); n >= 0 && len(b) > 0; n-- {
			switch j := r.Intn(len(b)); r.Intn(3) {
			case 0:
				const alphabet = `{}[]":,\ 0123456789-.eEtrufalsn`
				b[j] = alphabet[r.Intn(len(alphabet))]
			case 1:
				b = append(b[:j], b[j+1:]...)
			default:
				b = append(b[:j], append([]byte{byte(r.Intn(256))}, b[j:]...)...)
			}
		}
		check(t, string(b))
	}
}

func FuzzDecodeParams(f *testing.F) {
	for _, c := range paramsCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var a, b every
		perr := protocol.DecodeParams(json.RawMessage(in), &a)
		werr := wire.DecodeParams([]byte(in), &b)
		if !reflect.DeepEqual(perr, werr) || perr == nil && !reflect.DeepEqual(a, b) {
			t.Fatalf("DecodeParams(%q):\n got %+v %v\nwant %+v %v", in, b, werr, a, perr)
		}
	})
}

func FuzzAppendCompact(f *testing.F) {
	for _, c := range paramsCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, in string) {
		want, werr := json.Marshal(json.RawMessage(in))
		got, gerr := wire.Marshal(json.RawMessage(in))
		if in == "" {
			return // json.Marshal of an empty non-nil RawMessage: both fail
		}
		if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("Marshal(RawMessage(%q)) = %s, %v; want %s, %v", in, got, gerr, want, werr)
		}
	})
}

func TestIntegersAtTheirBounds(t *testing.T) {
	type ints struct {
		A int64  `json:"a"`
		B uint64 `json:"b"`
		C int32  `json:"c"`
		D uint32 `json:"d"`
		E int8   `json:"e"`
	}
	for _, v := range []ints{{math.MinInt64, math.MaxUint64, math.MinInt32, math.MaxUint32, math.MinInt8},
		{math.MaxInt64, 0, math.MaxInt32, 0, math.MaxInt8}, {-1, 1, -9, 9, 10}} {
		want, _ := json.Marshal(v)
		got, _ := wire.Marshal(v)
		if !bytes.Equal(got, want) {
			t.Fatalf("Marshal = %s, want %s", got, want)
		}
		var back ints
		if err := wire.DecodeParams(want, &back); err != nil || back != v {
			t.Fatalf("DecodeParams(%s) = %+v, %v", want, back, err)
		}
	}
	// One past each bound is refused as protocol.DecodeParams refuses it.
	for _, in := range []string{`{"a":9223372036854775808}`, `{"a":-9223372036854775809}`, `{"b":18446744073709551616}`,
		`{"b":-1}`, `{"c":2147483648}`, `{"c":-2147483649}`, `{"d":4294967296}`, `{"e":128}`, `{"e":-129}`} {
		var a, b ints
		perr := protocol.DecodeParams(json.RawMessage(in), &a)
		werr := wire.DecodeParams([]byte(in), &b)
		if perr == nil || !reflect.DeepEqual(perr, werr) {
			t.Fatalf("DecodeParams(%s) = %v, want %v", in, werr, perr)
		}
	}
}
