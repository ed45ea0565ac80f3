//go:build !wasip1

package secrets_test

import (
	"strings"
	"testing"

	"lemon/protocol"
)

// Regression: node.secrets.set took "value": null as an empty secret, and
// stored a value (or name) holding invalid UTF-8 or a lone surrogate escape
// as U+FFFD: bytes other than those sent, and two different names ("z\xff",
// "z\xfe") collapsed into one, the second silently replacing the first.
// A case-variant "Value" key carried the plaintext into module memory and
// failed as INTERNAL_ERROR instead of INVALID_PARAMS.
func TestSetRefusesValuesItCannotStoreExactly(t *testing.T) {
	f := newFixture(t)
	refused := []struct{ name, args, field string }{
		{"null value", `{"nodeId":"n","name":"a","value":null}`, "value"},
		{"invalid UTF-8 value", "{\"nodeId\":\"n\",\"name\":\"a\",\"value\":\"\xff\xfe\"}", "value"},
		{"lone surrogate value", `{"nodeId":"n","name":"a","value":"\ud800"}`, "value"},
		{"invalid UTF-8 name", "{\"nodeId\":\"n\",\"name\":\"z\xff\",\"value\":\"v\"}", ""},
		{"lone surrogate name", `{"nodeId":"n","name":"z\udc00","value":"v"}`, ""},
		{"case-variant value key", `{"nodeId":"n","name":"a","Value":"CANARY-case"}`, "value"},
		{"duplicate name", `{"nodeId":"n","name":"a","value":"v","name":"b"}`, "name"},
	}
	for _, c := range refused {
		out, perr := f.invoke(t, protocol.MethodSecretsSet, c.args)
		if perr == nil {
			t.Errorf("%s: accepted: %s", c.name, out)
			continue
		}
		if perr.Code != protocol.CodeInvalidParams || perr.Details == nil || perr.Details.Field != c.field {
			t.Errorf("%s: %+v, want INVALID_PARAMS field %q", c.name, perr, c.field)
		}
		if strings.Contains(perr.Message, "CANARY") {
			t.Errorf("%s: error echoes the value", c.name)
		}
	}
	f.must(t, protocol.MethodSecretsList, `{"nodeId":"n"}`, `{"names":[],"limit":500,"truncated":false}`)
	// A valid surrogate pair and a literal U+FFFD are ordinary text.
	f.must(t, protocol.MethodSecretsSet, `{"nodeId":"n","name":"a","value":"\ud83d\ude00\ufffd"}`, `{"name":"a","set":true}`)
	if v, perr := f.v.Resolve("a"); perr != nil || string(v) != "\U0001F600\uFFFD" {
		t.Fatalf("resolve: %q %v", v, perr)
	}
}
