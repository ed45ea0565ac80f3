package host

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestSplitObject(t *testing.T) {
	cases := []struct {
		in   string
		keys []string
		vals []string
	}{
		{`{}`, nil, nil},
		{` { "a" : 1 , "b":"x\"}y" ,"c":{"d":[1,{"e":"]}"}]},"f":null} `, []string{`"a"`, `"b"`, `"c"`, `"f"`},
			[]string{`1`, `"x\"}y"`, `{"d":[1,{"e":"]}"}]}`, `null`}},
		{`{"k\"ey":"\\\\"}`, []string{`"k\"ey"`}, []string{`"\\\\"`}},
		{`{"a":"\\\"\\"}`, []string{`"a"`}, []string{`"\\\"\\"`}},
	}
	for _, c := range cases {
		ms, err := splitObject([]byte(c.in))
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		var keys, vals []string
		for _, m := range ms {
			keys = append(keys, string(m.key))
			vals = append(vals, string(m.value))
		}
		if !reflect.DeepEqual(keys, c.keys) || !reflect.DeepEqual(vals, c.vals) {
			t.Fatalf("%s: keys %q vals %q", c.in, keys, vals)
		}
		// Joining gives back an equivalent object.
		var a, b any
		json.Unmarshal([]byte(c.in), &a)
		if err := json.Unmarshal(joinObject(ms, 0), &b); err != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: rejoined %s", c.in, joinObject(ms, 0))
		}
	}
	for _, bad := range []string{``, `[]`, `"s"`, `{"a"}`, `{"a":1,}`, `{"a":"unterminated}`, `{"a":1}x`, `{"a":1 "b":2}`, `{"a":"\`} {
		if _, err := splitObject([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestStringContent(t *testing.T) {
	if b, ok := stringContent([]byte(`"YWJj"`)); !ok || string(b) != "YWJj" {
		t.Fatal("plain string")
	}
	if b, ok := stringContent([]byte(`"a\/b\n"`)); !ok || string(b) != "a/b\n" {
		t.Fatalf("escaped string: %q", b)
	}
	for _, notString := range []string{`null`, `5`, `{}`, `"unterminated`} {
		if _, ok := stringContent([]byte(notString)); ok {
			t.Errorf("%s accepted as a string", notString)
		}
	}
}

func FuzzSplitObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":"\"","b":[{"c":"}"}]}`, `{"a":"\\"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want map[string]json.RawMessage
		werr := json.Unmarshal([]byte(s), &want)
		ms, err := splitObject([]byte(s))
		if werr != nil || want == nil {
			return // splitObject may accept what the frame check refuses earlier
		}
		if err != nil {
			t.Fatalf("valid object refused: %q", s)
		}
		got := map[string]json.RawMessage{}
		for _, m := range ms {
			got[keyString(m.key)] = m.value
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d members, want %d", s, len(got), len(want))
		}
		for k, v := range want {
			var a, b any
			json.Unmarshal(v, &a)
			json.Unmarshal(got[k], &b)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("%q: member %q = %s, want %s", s, k, got[k], v)
			}
		}
	})
}
