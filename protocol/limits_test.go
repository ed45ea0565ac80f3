package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// decoderCheck is the former CheckJSONLimits, kept as the reference the
// scanner is compared with: it walks json.Decoder.Token, counting depth on
// delimiters and one item per other token (scalars and object keys).
// Unlike the scanner it accepts an empty input and a stream of several
// top-level values ("{}{}", "1 2", even "01"); see decoderRef.
func decoderCheck(data []byte, maxDepth, maxItems int) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	depth, items := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if depth != 0 {
				return io.ErrUnexpectedEOF
			}
			return nil
		}
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			if depth > maxDepth {
				return ErrTooDeep
			}
		case json.Delim('}'), json.Delim(']'):
			depth--
		default:
			items++
			if items > maxItems {
				return ErrTooManyItems
			}
		}
	}
}

// decoderRef is decoderCheck narrowed to exactly one top-level value, the
// rule json.Valid and the scanner apply: once the first value is complete
// the only token left may be EOF, and an empty input is invalid.
func decoderRef(data []byte, maxDepth, maxItems int) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	depth, items := 0, 0
	for n := 0; ; n++ {
		tok, err := dec.Token()
		if err == io.EOF {
			if depth != 0 || n == 0 {
				return ErrInvalidJSON
			}
			return nil
		}
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			if depth > maxDepth {
				return ErrTooDeep
			}
		case json.Delim('}'), json.Delim(']'):
			depth--
		default:
			items++
			if items > maxItems {
				return ErrTooManyItems
			}
		}
		if depth == 0 {
			// The top-level value is complete; only EOF may follow.
			if _, err := dec.Token(); err != io.EOF {
				return ErrInvalidJSON
			}
			return nil
		}
	}
}

// outcome folds an error into the decision callers act on.
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrTooDeep):
		return "too-deep"
	case errors.Is(err, ErrTooManyItems):
		return "too-many-items"
	default:
		return "invalid"
	}
}

func nestedArrays(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

func nestedObjects(depth int) string {
	return strings.Repeat(`{"k":`, depth) + "null" + strings.Repeat("}", depth)
}

// arrayOf returns a JSON array of count copies of elem.
func arrayOf(elem string, count int) string {
	return "[" + strings.TrimSuffix(strings.Repeat(elem+",", count), ",") + "]"
}

// objectOf returns a JSON object of members k0..k{count-1}, each holding 1:
// 2*count items.
func objectOf(count int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range count {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":1`, i)
	}
	b.WriteByte('}')
	return b.String()
}

func TestCheckJSONLimits(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		// Depth: MaxJSONDepth (32) passes, 33 fails, arrays and objects alike.
		{"arrays at depth 32", nestedArrays(MaxJSONDepth), "ok"},
		{"arrays at depth 33", nestedArrays(MaxJSONDepth + 1), "too-deep"},
		{"objects at depth 32", nestedObjects(MaxJSONDepth), "ok"},
		{"objects at depth 33", nestedObjects(MaxJSONDepth + 1), "too-deep"},
		{"mixed at depth 32", strings.Repeat(`[{"a":`, 16) + "1" + strings.Repeat("}]", 16), "ok"},
		{"mixed at depth 33", "[" + strings.Repeat(`[{"a":`, 16) + "1" + strings.Repeat("}]", 16) + "]", "too-deep"},
		{"depth 32 twice in a row", "[" + nestedArrays(MaxJSONDepth-1) + "," + nestedArrays(MaxJSONDepth-1) + "]", "ok"},
		{"unclosed depth 33 is too deep first", strings.Repeat("[", MaxJSONDepth+1), "too-deep"},
		{"garbage after depth 33 is too deep first", strings.Repeat("[", MaxJSONDepth+1) + "x", "too-deep"},
		{"garbage before depth 33 is invalid", strings.Repeat("[", MaxJSONDepth) + "x[", "invalid"},

		// Items: MaxJSONItems (10,000) passes, 10,001 fails; keys count,
		// containers do not.
		{"10000 numbers", arrayOf("1", MaxJSONItems), "ok"},
		{"10001 numbers", arrayOf("1", MaxJSONItems+1), "too-many-items"},
		{"10000 strings", arrayOf(`"s"`, MaxJSONItems), "ok"},
		{"10001 literals", arrayOf("null", MaxJSONItems+1), "too-many-items"},
		{"5000 members are 10000 items", objectOf(MaxJSONItems / 2), "ok"},
		{"5000 members and a scalar", "[" + objectOf(MaxJSONItems/2) + ",true]", "too-many-items"},
		{"key is the 10001st item", "[" + objectOf(MaxJSONItems/2) + `,{"x":1}]`, "too-many-items"},
		{"empty containers are not items", arrayOf("[]", 3*MaxJSONItems), "ok"},
		{"empty objects are not items", arrayOf("{}", 3*MaxJSONItems), "ok"},
		{"garbage after item 10001 is too many first", strings.TrimSuffix(arrayOf("1", MaxJSONItems+1), "]") + "x", "too-many-items"},
		{"top-level scalar", "1", "ok"},

		// Strings: brackets, quotes and escapes inside strings are content.
		{"brackets in a string", `["` + strings.Repeat("[{", 40) + `"]`, "ok"},
		{"closers in a string", `{"]]]}}}":"}}}]]]"}`, "ok"},
		{"escaped quote", `["a\"]"]`, "ok"},
		{"escaped backslash before quote", `["a\\"]`, "ok"},
		{"escaped backslash then escaped quote", `["\\\"]"]`, "ok"},
		{"all simple escapes", `"\" \\ \/ \b \f \n \r \t"`, "ok"},
		{"unicode escapes", `"\u005d\u005B\uD83D\uDE00\u0000"`, "ok"},
		{"lone surrogate escape", `"\ud800"`, "ok"},
		{"invalid UTF-8 passes like json.Valid", "\"\xff\xfe\xc0\"", "ok"},
		{"raw DEL and UTF-8", "\"\x7f é 漢\"", "ok"},
		{"long string over the word loop", `"` + strings.Repeat("abcdefgh", 100) + `\"` + strings.Repeat("x", 13) + `"`, "ok"},
		{"escaped quote leaves string open", `["a\"]`, "invalid"},
		{"control byte in string", "\"a\x01b\"", "invalid"},
		{"newline in string", "\"a\nb\"", "invalid"},
		{"control byte deep in long string", `"` + strings.Repeat("a", 77) + "\x1f" + `"`, "invalid"},
		{"bad escape", `"\x41"`, "invalid"},
		{"short unicode escape", `"\u12"`, "invalid"},
		{"non-hex unicode escape", `"\u12G4"`, "invalid"},
		{"backslash at end", `"\`, "invalid"},
		{"unterminated string", `"abc`, "invalid"},
		{"string items count", arrayOf(`"[\"]"`, MaxJSONItems+1), "too-many-items"},

		// Numbers and literals.
		{"numbers", `[0,-0,1.5,-1.5e10,2E-3,1e+2,123456789012345678901234567890]`, "ok"},
		{"tiny number underflows to zero", "1e-400", "ok"},
		{"largest float64", "1.7976931348623157e308", "ok"},
		{"float64 overflow refused", "1e400", "invalid"},
		{"negative overflow refused", "[-1e400]", "invalid"},
		{"309-digit overflow refused", "[" + strings.Repeat("9", 309) + "]", "invalid"},
		{"309-digit in range", "[1" + strings.Repeat("0", 308) + "]", "ok"},
		{"leading zero", "[01]", "invalid"},
		{"minus alone", "[-]", "invalid"},
		{"trailing dot", "1.", "invalid"},
		{"leading dot", ".5", "invalid"},
		{"plus sign", "+1", "invalid"},
		{"bare exponent", "1e", "invalid"},
		{"signed bare exponent", "1e+", "invalid"},
		{"hex", "0x10", "invalid"},
		{"NaN", "NaN", "invalid"},
		{"literals", `[true,false,null]`, "ok"},
		{"truncated literal", "[tru", "invalid"},
		{"misspelled literal", "nul1", "invalid"},
		{"capital literal", "True", "invalid"},

		// Structure.
		{"whitespace around", " \t\r\n{ \"a\" : [ 1 , 2 ] }\n", "ok"},
		{"empty input", "", "invalid"},
		{"only whitespace", " \n\t", "invalid"},
		{"two top-level values", "{}{}", "invalid"},
		{"two top-level numbers", "1 2", "invalid"},
		{"glued numbers", "01", "invalid"},
		{"glued literals", "truefalse", "invalid"},
		{"second value past depth 33", "[] " + nestedArrays(MaxJSONDepth+1), "invalid"},
		{"trailing garbage", "{} x", "invalid"},
		{"trailing comma in array", "[1,]", "invalid"},
		{"trailing comma in object", `{"a":1,}`, "invalid"},
		{"missing comma", "[1 2]", "invalid"},
		{"missing colon", `{"a" 1}`, "invalid"},
		{"missing value", `{"a":}`, "invalid"},
		{"key without value", `{"a"}`, "invalid"},
		{"number key", `{1:2}`, "invalid"},
		{"unclosed array", "[1,2", "invalid"},
		{"unclosed object", `{"a":1`, "invalid"},
		{"mismatched close", "[1}", "invalid"},
		{"extra close", "[]]", "invalid"},
		{"lone close", "]", "invalid"},
		{"leading comma", "[,1]", "invalid"},
		{"NUL byte", "\x00", "invalid"},
		{"BOM", "\xef\xbb\xbf{}", "invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.in)
			got := outcome(CheckJSONLimits(data))
			if got != tc.want {
				t.Fatalf("CheckJSONLimits = %s, want %s", got, tc.want)
			}
			if ref := outcome(decoderRef(data, MaxJSONDepth, MaxJSONItems)); ref != tc.want {
				t.Fatalf("decoder reference = %s, want %s", ref, tc.want)
			}
			// Syntax decisions match json.Valid, except float64 overflow,
			// which json.Valid accepts and both checks refuse.
			valid := json.Valid(data)
			if got == "ok" && !valid || got == "invalid" && valid && !strings.Contains(tc.name, "overflow") {
				t.Fatalf("json.Valid = %v, CheckJSONLimits = %s", valid, got)
			}
		})
	}
}

// TestCheckJSONLimitsRefusesStreams pins the one deliberate change from the
// decoder-based version: it accepted an empty input and several top-level
// values, which json.Valid (and so the frame decoder) refuses.
func TestCheckJSONLimitsRefusesStreams(t *testing.T) {
	for _, in := range []string{"", "  ", "{}{}", "1 2", "01", "truefalse", `"a""b"`, "[] [[[1]]]"} {
		data := []byte(in)
		if err := decoderCheck(data, MaxJSONDepth, MaxJSONItems); err != nil {
			t.Fatalf("%q: the old check refused it (%v); this case no longer shows the difference", in, err)
		}
		if json.Valid(data) {
			t.Fatalf("%q: json.Valid accepts it", in)
		}
		if err := CheckJSONLimits(data); !errors.Is(err, ErrInvalidJSON) {
			t.Fatalf("%q: CheckJSONLimits = %v, want ErrInvalidJSON", in, err)
		}
	}
}

// TestCheckJSONLimitsEveryByteInStrings places each byte value at each
// offset of a 24-byte string, so the eight-byte word loop and the byte loop
// both meet every special and plain byte, and compares with the decoder.
func TestCheckJSONLimitsEveryByteInStrings(t *testing.T) {
	for pos := range 24 {
		for c := range 256 {
			body := bytes.Repeat([]byte{'a'}, 24)
			body[pos] = byte(c)
			data := append(append([]byte(`["`), body...), `"]`...)
			got := outcome(CheckJSONLimits(data))
			want := outcome(decoderRef(data, MaxJSONDepth, MaxJSONItems))
			if got != want {
				t.Fatalf("byte %#x at %d: got %s, want %s", c, pos, got, want)
			}
			// Plain bytes pass, quote ends the string early, backslash
			// escapes an 'a' (bad escape), control bytes fail.
			wantPlain := c >= 0x20 && c != '"' && c != '\\'
			if (got == "ok") != wantPlain {
				t.Fatalf("byte %#x at %d: got %s", c, pos, got)
			}
		}
	}
}

// TestCheckLimitsSmallLimits checks that the limit parameters are honoured
// exactly, with the decoder as the reference.
func TestCheckLimitsSmallLimits(t *testing.T) {
	cases := []struct {
		in           string
		depth, items int
		want         string
	}{
		{"[[1]]", 2, 1, "ok"},
		{"[[1]]", 1, 1, "too-deep"},
		{"[[1]]", 2, 0, "too-many-items"},
		{`{"a":{"b":2}}`, 2, 3, "ok"},
		{`{"a":{"b":2}}`, 2, 2, "too-many-items"},
		{`{"a":{"b":2}}`, 1, 3, "too-deep"},
		{"[1,2,[[[", 2, 2, "too-deep"},
		{"[1,2,3,[[[", 2, 2, "too-many-items"},
		{strings.Repeat("[", 64) + strings.Repeat("]", 64), 64, 0, "ok"},
		{strings.Repeat("[", 65) + strings.Repeat("]", 65), 64, 0, "too-deep"},
	}
	for _, tc := range cases {
		data := []byte(tc.in)
		got := outcome(checkLimits(data, tc.depth, tc.items))
		ref := outcome(decoderRef(data, tc.depth, tc.items))
		if got != tc.want || ref != tc.want {
			t.Errorf("%q depth %d items %d: got %s, reference %s, want %s", tc.in, tc.depth, tc.items, got, ref, tc.want)
		}
	}
}

// FuzzCheckJSONLimits compares the scanner with the decoder-based reference
// at the real limits and at small ones (so short inputs reach both limits
// and their ordering against syntax errors).
func FuzzCheckJSONLimits(f *testing.F) {
	for _, s := range []string{
		"", "{}", "[]", `{"a":[1,2,{"b":null}]}`, `["\"\\\/\b\f\n\r\t\u00e9"]`, "1e400", "-0.5e-3",
		"[01]", "{}{}", "1 2", "[1,]", `{"a" 1}`, "\"\xff\"", "\"a\x01\"", "[tru", "[[[[[[",
		nestedArrays(MaxJSONDepth + 1), `"` + strings.Repeat("abcdefg\\\"", 5) + `"`,
		"[1,2,3,4,5,6,7,8,9]", `{"a":1,"b":[true,false],"c":"x"}`, `[[1,2],[3,{"k":"v","l":null}]]`,
		`"\u0041\uZZZZ"`, "1.7976931348623159e308", "-" + strings.Repeat("9", 310),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := CheckJSONLimits(data)
		if want := decoderRef(data, MaxJSONDepth, MaxJSONItems); outcome(got) != outcome(want) {
			t.Fatalf("%q: got %v, reference %v", data, got, want)
		}
		if got == nil && !json.Valid(data) {
			t.Fatalf("%q: accepted but json.Valid refuses it", data)
		}
		if got == nil {
			if err := decoderCheck(data, MaxJSONDepth, MaxJSONItems); err != nil {
				t.Fatalf("%q: accepted but the old check refused it: %v", data, err)
			}
		}
		if old := decoderCheck(data, MaxJSONDepth, MaxJSONItems); old == nil && json.Valid(data) && got != nil {
			t.Fatalf("%q: refused (%v) but valid and accepted by the old check", data, got)
		}
		for _, lim := range [][2]int{{1, 1}, {2, 3}, {3, 8}} {
			got := checkLimits(data, lim[0], lim[1])
			if want := decoderRef(data, lim[0], lim[1]); outcome(got) != outcome(want) {
				t.Fatalf("%q limits %v: got %v, reference %v", data, lim, got, want)
			}
		}
	})
}

// BenchmarkCheckJSONLimits measures the scanner ("new") against the former
// decoder-based check ("old") on a 1 MiB frame carrying one base64 string
// and on a frame of MaxJSONItems small values.
func BenchmarkCheckJSONLimits(b *testing.B) {
	raw := make([]byte, (1<<20-64)*3/4)
	for i := range raw {
		raw[i] = byte(i * 7)
	}
	bulk := []byte(`{"id":"r1","method":"node.fs.write","params":{"dataBase64":"` +
		base64.StdEncoding.EncodeToString(raw) + `"}}`)
	var items strings.Builder
	items.WriteString(`{"id":"r2","result":[`)
	for i := range MaxJSONItems - 3 { // plus id, "r2", result
		if i > 0 {
			items.WriteByte(',')
		}
		if i%2 == 0 {
			fmt.Fprintf(&items, "%d", i)
		} else {
			fmt.Fprintf(&items, `"v%d"`, i)
		}
	}
	items.WriteString("]}")
	frames := []struct {
		name string
		data []byte
	}{{"base64-1MiB", bulk}, {"items-10000", []byte(items.String())}}
	impls := []struct {
		name  string
		check func([]byte) error
	}{
		{"new", CheckJSONLimits},
		{"old", func(d []byte) error { return decoderCheck(d, MaxJSONDepth, MaxJSONItems) }},
	}
	for _, fr := range frames {
		for _, im := range impls {
			if err := im.check(fr.data); err != nil {
				b.Fatalf("%s/%s: %v", fr.name, im.name, err)
			}
			b.Run(fr.name+"/"+im.name, func(b *testing.B) {
				b.SetBytes(int64(len(fr.data)))
				b.ReportAllocs()
				for b.Loop() {
					if err := im.check(fr.data); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// worstBase64 is the longest base64 of n bytes split over fields
// strings, by enumeration.
func worstBase64(n, fields int) int {
	enc := func(a int) int { return 4 * ((a + 2) / 3) }
	if fields == 1 {
		return enc(n)
	}
	worst := 0
	for a := 0; a <= n; a++ {
		worst = max(worst, enc(a)+worstBase64(n-a, fields-1))
	}
	return worst
}

// Base64Budget is exact at its boundary: the budget encodes within room
// for every split, and one byte more exceeds room for some split.
func TestBase64Budget(t *testing.T) {
	for fields := 1; fields <= 3; fields++ {
		for room := 0; room <= 120; room++ {
			n := Base64Budget(room, fields)
			if w := worstBase64(n, fields); w > room {
				t.Fatalf("room %d, %d fields: budget %d encodes to %d", room, fields, n, w)
			}
			if w := worstBase64(n+1, fields); w <= room {
				t.Fatalf("room %d, %d fields: budget %d is not the largest (%d encodes to %d)", room, fields, n, n+1, w)
			}
		}
	}
	if got := Base64Budget(-5, 1); got != 0 {
		t.Fatalf("negative room: %d", got)
	}
	if got := Base64Budget(1<<20, 1); got != 786432 {
		t.Fatalf("1 MiB, one field: %d", got)
	}
}
