package protocol

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// fsWriteCases are node.fs.write params on which the fast path must decide
// exactly as the slow path: escapes inside the base64 and in keys,
// repeated keys, case variants, null, wrong types, padding and strict-bit
// corner cases, and the 1 MiB boundary.
func fsWriteCases() []string {
	mib := base64.StdEncoding.EncodeToString(make([]byte, FSMaxWriteBytes))
	mibPlus := base64.StdEncoding.EncodeToString(make([]byte, FSMaxWriteBytes+1))
	mibMinus := base64.StdEncoding.EncodeToString(make([]byte, FSMaxWriteBytes-1))
	w := func(data string) string { return `{"nodeId":"n","path":"a","dataBase64":` + data + `}` }
	cases := []string{
		w(`""`), w(`"YQ=="`), w(`"YWI="`), w(`"YWJj"`), w(`"` + mib + `"`), w(`"` + mibMinus + `"`), w(`"` + mibPlus + `"`),
		w(`"` + mib + `AAAA"`), w(`"` + mib[:len(mib)-4] + `"`),
		// Escapes inside the string: the same base64 for encoding/json.
		w(`"YW\/j"`), w(`"\u0059WJj"`), w(`"YWJj\n"`), w(`"YW\r\nJj"`), w(`"YWJj\u0000"`), w(`"\ud800YWJj"`),
		// Bad base64.
		w(`"YWJ"`), w(`"YQ="`), w(`"Y==="`), w(`"===="`), w(`"YQ==YWJj"`), w(`"YW=j"`), w(`"YR=="`), w(`"YWK="`),
		w(`"YWJj YWJj"`), w(`"YW-j"`), w(`"YW_j"`), w(`"YWJ*"`), w(`"=YWJ"`), w(`"YQ"`), w(`"Y"`),
		// Not ASCII or control bytes inside the string.
		w("\"YW\xc3\xa9j\""), w("\"YW\xffj\""), w("\"YW\x01j\""), w("\"YW\tj\""),
		// Not a string.
		w(`null`), w(`5`), w(`["YWJj"]`), w(`{"a":"YWJj"}`), w(`true`),
		// Keys: repeated, case variants, escaped, unknown, absent.
		`{"nodeId":"n","path":"a","dataBase64":"YWJj","dataBase64":"YWJj"}`,
		`{"nodeId":"n","path":"a","dataBase64":"YWJj","DataBase64":"YWJj"}`,
		`{"nodeId":"n","path":"a","DATABASE64":"YWJj"}`,
		`{"nodeId":"n","path":"a","d\u0061taBase64":"YWJj"}`,
		`{"nodeId":"n","path":"a","dataBase64":"YWJj","Path":"b"}`,
		`{"nodeId":"n","path":"a","path":"b","dataBase64":"YWJj"}`,
		`{"nodeId":"n","p\u0061th":"a","dataBase64":"YWJj"}`,
		`{"nodeId":"n","path":"a","dataBase64":"YWJj","x":1}`,
		`{"nodeId":"n","path":"a","dataBase64":"YWJj","x\u00e9":1}`,
		`{"nodeId":"n","path":"a"}`,
		`{"dataBase64":"YWJj"}`,
		`{}`, `null`, ``, `[]`, `"YWJj"`,
		// Other fields: types, limits, order of errors.
		`{"nodeId":"n","path":"a","dataBase64":"YWJj","offset":-1}`,
		`{"nodeId":"n","path":"a","dataBase64":"YWJj","offset":9007199254740991,"expectedModifiedAtMs":9007199254740992}`,
		`{"nodeId":"n","path":"a","dataBase64":"YWJj","truncate":"yes"}`,
		`{"nodeId":"n","path":"a","dataBase64":"YWJj","truncate":null,"mkdirs":true,"expectedModifiedAtMs":null}`,
		`{"nodeId":"n","path":"a","dataBase64":"YWJ","offset":"1"}`,
		`{"nodeId":"n","path":"","dataBase64":"YWJ"}`,
		`{"nodeId":"n","path":"","dataBase64":"` + mibPlus + `"}`,
		`{"nodeId":"","path":"a","dataBase64":"YWJj"}`,
		`{"nodeId":"n","path":"a\u0000","dataBase64":"YWJj"}`,
		`{"nodeId":"n","path":"\udc00","dataBase64":"YWJj"}`,
		"{\"nodeId\":\"n\",\"path\":\"a\xff\",\"dataBase64\":\"YWJj\"}",
		"{\"nodeId\":\"n\",\"path\":\"a\xff\",\"dataBase64\":\"YWJ\"}",
		`{"nodeId":"n","path":"a","dataBase64":"YWJj","offset":1.5}`,
		`{"nodeId":"n","path":"a","dataBase64":"YWJj","offset":1e2}`,
		// Not valid JSON (the controller never passes these on; the
		// decision must still match).
		`{"nodeId":"n","path":"a","dataBase64":"YWJj",}`,
		`{"nodeId":"n","path":"a","dataBase64":"YWJj"} {}`,
		`{"nodeId":"n","path":tru,"dataBase64":"YWJj"}`,
		`{"nodeId":"n","path":"a","offset":01,"dataBase64":"YWJj"}`,
		`{"nodeId":"n","path":"a","dataBase64":"YWJj"`,
		" {\"nodeId\" : \"n\" ,\n\"path\":\"a\",\t\"dataBase64\" : \"YWJj\" } ",
	}
	return cases
}

func TestValidateFSWriteFastMatchesSlow(t *testing.T) {
	fast := 0
	for _, in := range fsWriteCases() {
		got := ValidateFSWrite(json.RawMessage(in))
		want := validateFSWriteSlow(json.RawMessage(in))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%.120q:\n fast %v %+v\n slow %v %+v", in, got, details(got), want, details(want))
		}
		if _, ok := validateFSWriteFast([]byte(in)); ok {
			fast++
		}
	}
	if fast < 40 {
		t.Fatalf("only %d cases took the fast path; the table no longer exercises it", fast)
	}
}

func details(e *Error) any {
	if e == nil {
		return nil
	}
	return e.Details
}

// TestValidateFSWriteFastPath: a well-formed 1 MiB write is decided by the
// fast path, and the boundary is where the spec puts it.
func TestValidateFSWriteFastPath(t *testing.T) {
	for _, c := range []struct {
		n     int
		valid bool
	}{{0, true}, {1, true}, {2, true}, {FSMaxWriteBytes, true}, {FSMaxWriteBytes + 1, false}} {
		in := `{"nodeId":"n","path":"a","dataBase64":"` + base64.StdEncoding.EncodeToString(make([]byte, c.n)) + `","offset":0,"truncate":false}`
		e, ok := validateFSWriteFast([]byte(in))
		if !ok {
			t.Fatalf("%d bytes: not the fast path", c.n)
		}
		if (e == nil) != c.valid || (e != nil && e.Details.Field != "dataBase64") {
			t.Fatalf("%d bytes: %v", c.n, e)
		}
	}
}

func TestStrictStdBase64Len(t *testing.T) {
	for _, s := range []string{"", "YQ==", "YR==", "YWI=", "YWJ=", "YWJj", "Y===", "====", "YQ=", "YQ==YQ==", "YWJjYQ==",
		"A+/=", "AB+/", "A\nB=", "YW\rj", "YWJj\n", "ab=c", "ab c", "abc\x00"} {
		b, err := base64.StdEncoding.Strict().DecodeString(s)
		wantOK := err == nil && !strings.ContainsAny(s, "\r\n")
		n, ok := strictStdBase64Len([]byte(s), base64Class([]byte(s)))
		if ok != wantOK || (ok && n != len(b)) {
			t.Errorf("%q: got %d %v, want %d %v", s, n, ok, len(b), wantOK)
		}
	}
}

func FuzzStrictStdBase64(f *testing.F) {
	for _, s := range []string{"", "YQ==", "YR==", "YWI=", "YWJ=", "YWJj", "Y===", "A\nB="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := base64.StdEncoding.Strict().DecodeString(s)
		wantOK := err == nil && !strings.ContainsAny(s, "\r\n")
		n, ok := strictStdBase64Len([]byte(s), base64Class([]byte(s)))
		if ok != wantOK || (ok && n != len(b)) {
			t.Fatalf("%q: got %d %v, want %d %v", s, n, ok, len(b), wantOK)
		}
	})
}

func FuzzValidateFSWrite(f *testing.F) {
	for _, s := range fsWriteCases() {
		if len(s) < 4096 {
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := ValidateFSWrite(json.RawMessage(s))
		want := validateFSWriteSlow(json.RawMessage(s))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n fast %v %+v\n slow %v %+v", s, got, details(got), want, details(want))
		}
	})
}
