package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
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
		{`{"a":1,"a":2}`, []string{`"a"`, `"a"`}, []string{`1`, `2`}},
		{"{\"a\":-1.5e3\t}", []string{`"a"`}, []string{`-1.5e3`}},
	}
	for _, c := range cases {
		ms, err := SplitObject([]byte(c.in))
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		var keys, vals []string
		for _, m := range ms {
			keys = append(keys, string(m.Key))
			vals = append(vals, string(m.Value))
		}
		if !reflect.DeepEqual(keys, c.keys) || !reflect.DeepEqual(vals, c.vals) {
			t.Fatalf("%s: keys %q vals %q", c.in, keys, vals)
		}
		// Joining gives back an equivalent object.
		var a, b any
		json.Unmarshal([]byte(c.in), &a)
		joined := AppendObject(nil, ms)
		if err := json.Unmarshal(joined, &b); err != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: rejoined %s", c.in, joined)
		}
	}
	for _, bad := range []string{``, `[]`, `"s"`, `null`, `{"a"}`, `{"a":1,}`, `{"a":"unterminated}`, `{"a":1}x`,
		`{"a":1 "b":2}`, `{"a":"\`, `{"a":}`, `{"a":[1,2}`, `{a:1}`, `{"a":1`} {
		if _, err := SplitObject([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestMemberNameAndIs(t *testing.T) {
	cases := []struct {
		key, name string
		is        bool
	}{
		{`"nodeId"`, "nodeId", true},
		{`"\u006eodeId"`, "nodeId", false}, // same name, spelled with an escape
		{`"node\/Id"`, "node/Id", false},
		{`"NodeID"`, "NodeID", false},
		{"\"a\xffb\"", "a\ufffdb", false}, // invalid UTF-8 reads as U+FFFD, as encoding/json does
	}
	for _, c := range cases {
		m := Member{Key: []byte(c.key)}
		if got := m.Name(); got != c.name {
			t.Errorf("Name(%s) = %q, want %q", c.key, got, c.name)
		}
		if got := m.Is("nodeId"); got != c.is {
			t.Errorf("Is(%s, nodeId) = %v", c.key, got)
		}
	}
}

func TestStringContent(t *testing.T) {
	if b, ok := StringContent([]byte(`"YWJj"`)); !ok || string(b) != "YWJj" {
		t.Fatal("plain string")
	}
	if b, ok := StringContent([]byte(`"a\/b\n\u0041"`)); !ok || string(b) != "a/b\nA" {
		t.Fatalf("escaped string: %q", b)
	}
	for _, notString := range []string{`null`, `5`, `{}`, `"unterminated`, `"a"b"`, "\"a\x01b\"", `"`} {
		if _, ok := StringContent([]byte(notString)); ok {
			t.Errorf("%q accepted as a string", notString)
		}
	}
}

// TestAppendMatchesMarshal: the builders write the bytes json.Marshal writes.
func TestAppendMatchesMarshal(t *testing.T) {
	raws := []json.RawMessage{
		nil, json.RawMessage(`{}`), json.RawMessage(`{"a":"YWJj","b":[1,2,{"c":null}]}`),
		json.RawMessage(" { \"a\" : [ 1 , 2 ] }\n"), json.RawMessage(`{"a":"x y\tz"}`),
		json.RawMessage(`{"h":"<b>&amp;</b>"}`), json.RawMessage("{\"l\":\"\u2028\u2029\"}"),
		json.RawMessage(`"s"`), json.RawMessage(`12`), json.RawMessage(`null`),
		json.RawMessage(`{"a":"\"<\\"}`), json.RawMessage("{\"é\":\"ü\"}"),
	}
	strs := []string{"", "r1", "node.fs.write", `quo"te`, "back\\slash", "<tag>&", "ctl\x01\n", "bad\xffutf8",
		"\u2028", "ünï", "del\x7f"}
	for _, raw := range raws {
		for _, s := range strs {
			check := func(name string, got []byte, err error, v any) {
				t.Helper()
				want, werr := json.Marshal(v)
				if (err != nil) != (werr != nil) || (err == nil && !bytes.Equal(got, want)) {
					t.Fatalf("%s(%q, %q):\n got %s %v\nwant %s %v", name, s, raw, got, err, want, werr)
				}
			}
			got, err := AppendRequest(nil, s, s, raw)
			check("AppendRequest", got, err, Request{Type: FrameReq, ID: s, Method: s, Params: raw})
			got, err = AppendOKResponse(nil, s, raw)
			check("AppendOKResponse", got, err, OKResponse(s, raw))
			got, err = AppendEvent(nil, s, 7, raw)
			check("AppendEvent", got, err, Event{Type: FrameEvent, Event: s, Seq: 7, Payload: raw})
			got, err = AppendInvokeResult(nil, s, raw)
			check("AppendInvokeResult", got, err, InvokeResult{InvokeID: s, Result: raw})
			for _, gen := range []uint64{0, 3} {
				r := InvokeRequest{InvokeID: s, NodeID: s, Method: s, Args: raw, TimeoutMs: -5, SessionGeneration: gen, ExecutionContext: raw}
				got, err = AppendInvokeRequest(nil, &r)
				check("AppendInvokeRequest", got, err, r)
			}
			got = AppendString([]byte("x"), s)
			want, _ := json.Marshal(s)
			if string(got) != "x"+string(want) {
				t.Fatalf("AppendString(%q) = %s, want x%s", s, got, want)
			}
		}
	}
	// An invalid raw value that needs rewriting goes through encoding/json,
	// which refuses it (one that does not is trusted, per the contract).
	for _, bad := range []string{`{"a" 1}`, `<`, ` {"a":1`} {
		if _, err := AppendOKResponse(nil, "r1", json.RawMessage(bad)); err == nil {
			t.Errorf("invalid raw %q accepted", bad)
		}
	}
	if _, err := AppendInvokeRequest(nil, &InvokeRequest{Args: json.RawMessage{}}); err == nil {
		t.Error("empty non-nil args accepted (json.Marshal refuses them)")
	}
}

// decodeCases are frames whose decoding must match json.Unmarshal:
// case variants, repeated keys, null, escapes in keys and values, and
// wrong types.
var decodeCases = []string{
	`{"type":"res","id":"r1","ok":true,"payload":{"a":1}}`,
	`{"type":"res","id":"r1","ok":true,"payload":{"a":1},"payload":[2]}`,
	`{"TYPE":"res","Id":"r1","OK":true,"Payload":null}`,
	`{"type":"res","id":"r1","id":null}`,
	`{"type":"res","id":null,"id":"r2"}`,
	`{"type":"res","\u0069d":"r3","ok":false,"error":{"code":"X","message":"m"}}`,
	`{"type":"res","id":"r1","error":{"code":"A","message":"m"},"error":{"code":"B"}}`,
	`{"type":"res","id":"r1","error":{"code":"A"},"error":null}`,
	`{"type":"res","id":"r\u00e9\n","ok":true}`,
	`{"type":"res","id":5}`,
	`{"type":"res","ok":"yes"}`,
	`{"type":"res","error":"boom"}`,
	`{"type":"event","event":"node.invoke.request","seq":7,"payload":{"invokeId":"i"}}`,
	`{"type":"event","event":"e","seq":-1}`,
	`{"type":"event","event":"e","seq":1.5}`,
	`{"type":"event","event":"e","seq":"7"}`,
	`{"type":"event","ſeq":9,"event":"e"}`, // U+017F folds to s in encoding/json
	`{"type":"req","id":"r1","method":"m","params":{"x":"y"},"extra":[1,{"z":2}]}`,
	`{"type":"req","id":"r1","method":"m","params":null}`,
	`{"type":"req","id":"r1","method":"m","method":"n","METHOD":"o"}`,
	`{"type":"req","id":"r1","method":["m"]}`,
	"{\"type\":\"req\",\"id\":\"a\xffb\"}",
	`{}`,
	`{"unrelated":{"deep":[[[["x"]]]]}}`,
}

func TestDecodeMatchesUnmarshal(t *testing.T) {
	for _, in := range decodeCases {
		ms, err := SplitObject([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		compareDecode(t, in, ms)
	}
}

func compareDecode(t *testing.T, in string, ms []Member) {
	t.Helper()
	same := func(name string, got, want any, gerr, werr error) {
		t.Helper()
		if (gerr != nil) != (werr != nil) || (werr == nil && !reflect.DeepEqual(got, want)) {
			t.Fatalf("%s(%q):\n got %+v %v\nwant %+v %v", name, in, got, gerr, want, werr)
		}
	}
	var env Envelope
	werr := json.Unmarshal([]byte(in), &env)
	genv, gerr := DecodeEnvelope(ms)
	same("DecodeEnvelope", genv, env, gerr, werr)
	var req Request
	werr = json.Unmarshal([]byte(in), &req)
	greq, gerr := DecodeRequest(ms)
	same("DecodeRequest", greq, req, gerr, werr)
	var res Response
	werr = json.Unmarshal([]byte(in), &res)
	gres, gerr := DecodeResponse(ms)
	same("DecodeResponse", gres, res, gerr, werr)
	var ev Event
	werr = json.Unmarshal([]byte(in), &ev)
	gev, gerr := DecodeEvent(ms)
	same("DecodeEvent", gev, ev, gerr, werr)
	var ir InvokeRequest
	werr = json.Unmarshal([]byte(in), &ir)
	gir, gerr := ParseInvokeRequest([]byte(in))
	same("ParseInvokeRequest", gir, ir, gerr, werr)
}

func TestParseInvokeRequestMatchesUnmarshal(t *testing.T) {
	for _, in := range []string{
		`{"invokeId":"i1","nodeId":"n","method":"node.fs.write","args":{"dataBase64":"YWJj"},"timeoutMs":30000,"sessionGeneration":2,"executionContext":{"capabilities":["fs.read"]}}`,
		`{"invokeId":"i1","invokeid":"i2","INVOKEID":null}`,
		`{"invokeId":"i1","timeoutMs":1e3}`,
		`{"invokeId":"i1","timeoutMs":-1}`,
		`{"invokeId":"i1","sessionGeneration":-1}`,
		`{"invokeId":"i1","args":null,"executionContext":null}`,
		`{"invokeId":"i1","args":"x","args":[1]}`,
		`{"invokeId":{"a":1}}`,
		`{"K\u0069nd":1,"timeoutms":"5"}`,
	} {
		var want InvokeRequest
		werr := json.Unmarshal([]byte(in), &want)
		got, gerr := ParseInvokeRequest([]byte(in))
		if (gerr != nil) != (werr != nil) || (werr == nil && !reflect.DeepEqual(got, want)) {
			t.Fatalf("%s:\n got %+v %v\nwant %+v %v", in, got, gerr, want, werr)
		}
	}
	for _, notObject := range []string{`null`, `[1]`, `"s"`, `7`} {
		if _, err := ParseInvokeRequest([]byte(notObject)); err == nil {
			t.Errorf("%s accepted", notObject)
		}
	}
}

func TestLookupMember(t *testing.T) {
	ms, _ := SplitObject([]byte(`{"nodeId":"a","NODEID":"b","other":1}`))
	if v, ok := LookupMember(ms, "nodeId"); !ok || string(v) != `"b"` {
		t.Fatalf("LookupMember = %s %v, want the last folded match", v, ok)
	}
	if _, ok := LookupMember(ms, "path"); ok {
		t.Fatal("absent member found")
	}
}

// TestDecodeInvokeResultMatchesDecodeParams: the fast path decides as
// DecodeParams does.
func TestDecodeInvokeResultMatchesDecodeParams(t *testing.T) {
	big := `{"path":"/x","dataBase64":"` + strings.Repeat("QUJD", 1000) + `"}`
	for _, in := range []string{
		`{"invokeId":"i1","result":` + big + `}`,
		`{"result":[1,2],"invokeId":"i1"}`,
		`{"invokeId":"i1","result":null}`,
		`{"invokeId":"i1","result":{"a":1},"result":{"b":2}}`,
		`{"invokeId":"i1","invokeId":"i2","result":1}`,
		`{"invokeId":"i1","Result":1}`,
		`{"invokeId":"i\u0031","result":1}`,
		`{"\u0069nvokeId":"i1","result":1}`,
		`{"invokeId":7,"result":1}`,
		`{"invokeId":null,"result":1}`,
		`{"invokeId":"i1","error":{"code":"X","message":"m"}}`,
		`{"invokeId":"i1","error":{"code":"X","message":"m","extra":1}}`,
		`{"invokeId":"i1","result":1,"more":2}`,
		`{"invokeId":"i1"}`,
		`{}`,
		`null`,
	} {
		got, gerr := DecodeInvokeResult(json.RawMessage(in))
		var want InvokeResult
		werr := DecodeParams(json.RawMessage(in), &want)
		if !reflect.DeepEqual(gerr, werr) || (werr == nil && !reflect.DeepEqual(got, want)) {
			t.Fatalf("%.80s:\n got %+v %v\nwant %+v %v", in, got, gerr, want, werr)
		}
	}
}

func FuzzSplitObject(f *testing.F) {
	for _, s := range append([]string{`{}`, `{"a":1}`, `{"a":"\"","b":[{"c":"}"}]}`, `{"a":"\\"}`}, decodeCases...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := SplitObject([]byte(s))
		// The frame check comes first: only a frame it passes is split.
		if CheckJSONLimits([]byte(s)) != nil {
			return
		}
		var want map[string]json.RawMessage
		werr := json.Unmarshal([]byte(s), &want)
		if werr != nil || want == nil {
			if err == nil && len(bytes.TrimSpace([]byte(s))) > 0 && bytes.TrimSpace([]byte(s))[0] != '{' {
				t.Fatalf("non-object %q split", s)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid object refused: %q", s)
		}
		got := map[string]json.RawMessage{}
		for _, m := range ms {
			got[m.Name()] = m.Value
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d members, want %d", s, len(got), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("%q: member %q = %s, want %s", s, k, got[k], v)
			}
		}
		compareDecode(t, s, ms)
		if !bytes.Equal(AppendObject(nil, ms), mustCompact(t, s)) && !needsRewrite([]byte(s)) {
			t.Fatalf("%q: AppendObject differs from the compact text", s)
		}
	})
}

func mustCompact(t *testing.T, s string) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func FuzzAppendRaw(f *testing.F) {
	for _, s := range []string{`{}`, ` {"a" : "<>"} `, "\"\u2028\"", `[1, 2]`, `{"a":"x y"}`, `nul`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return // AppendRaw's contract: raw is valid JSON
		}
		got, err := AppendRaw([]byte("p"), json.RawMessage(s))
		want, werr := json.Marshal(json.RawMessage(s))
		if (err != nil) != (werr != nil) || (werr == nil && string(got) != "p"+string(want)) {
			t.Fatalf("AppendRaw(%q) = %s %v, want p%s %v", s, got, err, want, werr)
		}
	})
}

func FuzzDecodeInvokeResult(f *testing.F) {
	for _, s := range []string{`{"invokeId":"i1","result":{"a":1}}`, `{"result":null,"invokeId":"i"}`,
		`{"invokeId":"i1","error":{"code":"X","message":"m"}}`, `{"invokeId":"i\u0031","result":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// The precondition: params come from a frame that passed both checks.
		if CheckJSONLimits([]byte(s)) != nil || !ValidJSONText([]byte(s)) {
			return
		}
		got, gerr := DecodeInvokeResult(json.RawMessage(s))
		var want InvokeResult
		werr := DecodeParams(json.RawMessage(s), &want)
		if !reflect.DeepEqual(gerr, werr) || (werr == nil && !reflect.DeepEqual(got, want)) {
			t.Fatalf("%q:\n got %+v %v\nwant %+v %v", s, got, gerr, want, werr)
		}
	})
}
