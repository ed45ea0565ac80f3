package protocol

import (
	"encoding/json"
	"testing"
)

// Regression: encoding/json matches keys case-insensitively, lets the last
// duplicate win and turns invalid UTF-8 and lone surrogate escapes into
// U+FFFD without an error. DecodeParams refuses all of them, so the
// controller and the node cannot read one request two ways, and two
// different names cannot collapse into one.
func TestDecodeParamsStrictText(t *testing.T) {
	type params struct {
		NodeID string  `json:"nodeId"`
		Name   string  `json:"name"`
		Value  *string `json:"value,omitempty"`
	}
	cases := []struct {
		name, in string
		ok       bool
		field    string
	}{
		{"plain", `{"nodeId":"n","name":"a"}`, true, ""},
		{"escaped key spelling", `{"nodeId":"n","n\u0061me":"a"}`, true, ""},
		{"surrogate pair", `{"nodeId":"n","name":"\ud83d\ude00"}`, true, ""},
		{"escaped backslash before u", `{"nodeId":"n","name":"\\ud800"}`, true, ""},
		{"literal U+FFFD", "{\"nodeId\":\"n\",\"name\":\"\xef\xbf\xbd\"}", true, ""},
		{"nested values skipped", `{"nodeId":"n","name":"a,}\"{"}`, true, ""},
		{"case-variant key", `{"nodeId":"n","name":"a","Value":"CANARY"}`, false, "Value"},
		{"case-variant only", `{"nodeId":"n","NAME":"a"}`, false, "NAME"},
		{"duplicate key", `{"nodeId":"n","name":"a","name":"b"}`, false, "name"},
		{"duplicate via escape", `{"nodeId":"n","name":"a","n\u0061me":"b"}`, false, "name"},
		{"invalid UTF-8 in value", "{\"nodeId\":\"n\",\"name\":\"z\xff\"}", false, ""},
		{"lone high surrogate", `{"nodeId":"n","name":"\ud800"}`, false, ""},
		{"high surrogate then letter", `{"nodeId":"n","name":"\ud800\u0041"}`, false, ""},
		{"lone low surrogate", `{"nodeId":"n","name":"\udc00x"}`, false, ""},
		{"surrogate at end", `{"nodeId":"n","name":"x\ud83d"}`, false, ""},
	}
	for _, c := range cases {
		var p params
		err := DecodeParams(json.RawMessage(c.in), &p)
		if (err == nil) != c.ok {
			t.Errorf("%s: err = %v, want ok=%v", c.name, err, c.ok)
			continue
		}
		if err != nil {
			if err.Code != CodeInvalidParams || err.Details == nil || err.Details.Field != c.field {
				t.Errorf("%s: err = %+v, want INVALID_PARAMS field %q", c.name, err, c.field)
			}
			if b, _ := json.Marshal(err); json.Valid(b) && contains(string(b), "CANARY") {
				t.Errorf("%s: error echoes a value: %s", c.name, b)
			}
		}
	}
	// The validators built on it refuse what they used to accept.
	if err := validateSecretsSet(json.RawMessage(`{"nodeId":"n","name":"a","Value":"v"}`)); err == nil {
		t.Error("secrets.set accepted a case-variant value key")
	}
	if _, err := DecodeSecretsSet(json.RawMessage("{\"nodeId\":\"n\",\"name\":\"z\xfe\",\"value\":\"v\"}")); err == nil {
		t.Error("secrets.set accepted a name that is not UTF-8")
	}
	if err := ValidateFSStat(json.RawMessage(`{"nodeId":"n","path":".","path":"/etc"}`)); err == nil {
		t.Error("fs.stat accepted a duplicate path")
	}
	if _, err := ParseProcessRun(json.RawMessage(`{"nodeId":"n","processId":"p","cwd":".","argv":["echo","\udc00"],"stdinBase64":"","timeoutMs":1000,"maxOutputBytes":1}`)); err == nil {
		t.Error("process.run accepted an argv string with a lone surrogate")
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// Regression: Go's base64 decoder skips CR and LF even in strict mode, so
// dataBase64 with line breaks passed as "standard base64".
func TestFSWriteBase64LineBreaksRefused(t *testing.T) {
	for _, d := range []string{"QQ\n==", "QQ==\r\n", "\nQQ=="} {
		b, _ := json.Marshal(d)
		err := ValidateFSWrite(json.RawMessage(`{"nodeId":"n","path":"a","dataBase64":` + string(b) + `}`))
		if err == nil || err.Details.Field != "dataBase64" {
			t.Errorf("%q: %v", d, err)
		}
	}
	if err := ValidateFSWrite(json.RawMessage(`{"nodeId":"n","path":"a","dataBase64":"QQ=="}`)); err != nil {
		t.Fatal(err)
	}
}

// Regression: an unknown key that does not look like a field name (here
// one with a dash, a slash or a space, as a secret name or a path might)
// was echoed in the message and details.field when encoding/json reported
// it, though CheckObjectKeys names only identifier-like keys. Nested
// objects reach that path too.
func TestDecodeParamsUnknownKeyNotEchoed(t *testing.T) {
	type inner struct {
		Token string `json:"token"`
	}
	type params struct {
		Auth inner `json:"auth"`
	}
	for _, in := range []string{
		`{"CANARY-7f3a":1}`,
		`{"auth":{"token":"x","CANARY-7f3a":1}}`,
		`{"auth":{"token":"x","CANARY/etc/passwd":1}}`,
		`{"auth":{"token":"x","CANARY secret name":1}}`,
	} {
		var p params
		err := DecodeParams(json.RawMessage(in), &p)
		if err == nil || err.Code != CodeInvalidParams {
			t.Fatalf("%s: %v", in, err)
		}
		if b, _ := json.Marshal(err); contains(string(b), "CANARY") {
			t.Errorf("%s: error echoes the key: %s", in, b)
		}
	}
	// Identifier-like keys are still named, top level and nested.
	var p params
	if err := DecodeParams(json.RawMessage(`{"auth":{"token":"x","extra":1}}`), &p); err == nil || err.Details.Field != "extra" {
		t.Fatalf("nested identifier key: %+v", err)
	}
}
