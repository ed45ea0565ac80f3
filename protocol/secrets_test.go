package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCheckSecretNameBoundaries(t *testing.T) {
	cases := []struct {
		name    string
		raw     string
		want    string
		wantErr bool
	}{
		{"one byte", "a", "a", false},
		{"256 bytes", strings.Repeat("a", 256), strings.Repeat("a", 256), false},
		{"257 bytes", strings.Repeat("a", 257), "", true},
		{"256 bytes of multibyte UTF-8", strings.Repeat("é", 128), strings.Repeat("é", 128), false},
		{"258 bytes of multibyte UTF-8", strings.Repeat("é", 129), "", true},
		{"empty", "", "", true},
		{"only white space", " \t\n ", "", true},
		{"NUL inside", "a\x00b", "", true},
		{"invalid UTF-8", "a\xffb", "", true},
		{"trimmed", "  integration/token\t", "integration/token", false},
		// The limit applies to the supplied string: 254 bytes plus two
		// spaces is 256 and passes; 255 plus two spaces is 257 and fails
		// even though the trimmed name would fit.
		{"padded to exactly 256", " " + strings.Repeat("b", 254) + " ", strings.Repeat("b", 254), false},
		{"padded to 257", " " + strings.Repeat("b", 255) + " ", "", true},
		{"unicode space trimmed", "\u00a0x\u2003", "x", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := CheckSecretName(c.raw)
			if c.wantErr {
				if err == nil {
					t.Fatalf("accepted %q", c.raw)
				}
				if err.Code != CodeInvalidParams || err.Details == nil || err.Details.Field != "name" {
					t.Fatalf("error = %+v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if got != c.want {
				t.Fatalf("got %q want %q", got, c.want)
			}
		})
	}
}

func TestCheckSecretOperationID(t *testing.T) {
	ok := []string{"a", strings.Repeat("x", 128), "install:token-1", "A_Z-0:9", "0"}
	bad := []string{"", strings.Repeat("x", 129), "has space", "a/b", "a.b", "é", "a\x00", " a", "a+b"}
	for _, id := range ok {
		if err := CheckSecretOperationID(id); err != nil {
			t.Errorf("refused %q: %v", id, err)
		}
	}
	for _, id := range bad {
		err := CheckSecretOperationID(id)
		if err == nil {
			t.Errorf("accepted %q", id)
			continue
		}
		if err.Details.Field != "operationId" || len(id) > 3 && strings.Contains(err.Message, id) {
			t.Errorf("error for %q = %+v", id, err)
		}
	}
}

func TestCheckSecretValueSize(t *testing.T) {
	if err := CheckSecretValueSize(1 << 20); err != nil {
		t.Fatalf("1 MiB refused: %v", err)
	}
	if err := CheckSecretValueSize(1<<20 + 1); err == nil || err.Details.Field != "value" {
		t.Fatalf("1 MiB + 1 = %v", err)
	}
	if err := CheckSecretValueSize(0); err != nil {
		t.Fatalf("empty value refused: %v", err)
	}
}

func TestReservedSecretName(t *testing.T) {
	s := func(v string) *string { return &v }
	cases := []struct {
		name string
		op   *string
		ok   bool
	}{
		{"lemon_bot/invocations/run-1", s("run-1"), true},
		{"lemon_bot/invocations/run-1", s("run-2"), false},
		{"lemon_bot/invocations/run-1", nil, false},
		{"lemon_bot/invocations/run-1", s(" run-1"), false},
		{"lemon_bot/invocations/", s(""), false},
		{"lemon_bot/invocations/", nil, false},
		{"lemon_bot/invocations", nil, true}, // not under the prefix
		{"lemon_bot/other/run-1", nil, true},
		{"integration/token", nil, true},
	}
	for _, c := range cases {
		err := CheckReservedSecretName(c.name, c.op)
		if c.ok != (err == nil) {
			t.Errorf("%q op=%v: err=%v", c.name, c.op, err)
		}
		if err != nil && (err.Code != CodeInvalidParams || err.DomainCode() != DomainReservedSecretName) {
			t.Errorf("%q: error = %+v", c.name, err)
		}
	}
}

func TestSecretsSetValidate(t *testing.T) {
	spec, ok := LookupMethod(MethodSecretsSet)
	if !ok {
		t.Fatal("node.secrets.set not registered")
	}
	big := strings.Repeat("v", 1<<20)
	cases := []struct {
		name   string
		params any
		field  string // "" = valid
	}{
		{"plain", map[string]any{"nodeId": "n1", "name": "a", "value": "v"}, ""},
		{"with id", map[string]any{"nodeId": "n1", "name": "a", "value": "v", "operationId": "install:token-1"}, ""},
		{"empty value", map[string]any{"nodeId": "n1", "name": "a", "value": ""}, ""},
		{"1 MiB value", map[string]any{"nodeId": "n1", "name": "a", "value": big}, ""},
		{"1 MiB + 1 value", map[string]any{"nodeId": "n1", "name": "a", "value": big + "v"}, "value"},
		{"missing value", map[string]any{"nodeId": "n1", "name": "a"}, "value"},
		{"null value", map[string]any{"nodeId": "n1", "name": "a", "value": nil}, "value"},
		{"numeric value", map[string]any{"nodeId": "n1", "name": "a", "value": 5}, "value"},
		{"missing name", map[string]any{"nodeId": "n1", "value": "v"}, "name"},
		{"missing nodeId", map[string]any{"name": "a", "value": "v"}, "nodeId"},
		{"unknown field", map[string]any{"nodeId": "n1", "name": "a", "value": "v", "owner": "x"}, "owner"},
		{"bad operationId", map[string]any{"nodeId": "n1", "name": "a", "value": "v", "operationId": "a b"}, "operationId"},
		{"empty operationId", map[string]any{"nodeId": "n1", "name": "a", "value": "v", "operationId": ""}, "operationId"},
		{"reserved ok", map[string]any{"nodeId": "n1", "name": " lemon_bot/invocations/r1 ", "value": "v", "operationId": "r1"}, ""},
		{"reserved no id", map[string]any{"nodeId": "n1", "name": "lemon_bot/invocations/r1", "value": "v"}, "operationId"},
		{"reserved wrong id", map[string]any{"nodeId": "n1", "name": "lemon_bot/invocations/r1", "value": "v", "operationId": "r2"}, "operationId"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := spec.Validate(mustJSON(t, c.params))
			if c.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if err.Code != CodeInvalidParams || err.Details == nil || err.Details.Field != c.field {
				t.Fatalf("error = %+v, want field %s", err, c.field)
			}
		})
	}
}

func TestSecretsOtherValidate(t *testing.T) {
	cases := []struct {
		method string
		params string
		field  string
	}{
		{MethodSecretsList, `{"nodeId":"n1"}`, ""},
		{MethodSecretsList, `{"nodeId":"n1","limit":5}`, "limit"},
		{MethodSecretsList, `{}`, "nodeId"},
		{MethodSecretsDelete, `{"nodeId":"n1","name":"a"}`, ""},
		{MethodSecretsDelete, `{"nodeId":"n1","name":""}`, "name"},
		{MethodSecretsDelete, `{"nodeId":"n1","name":"a\u0000"}`, "name"},
		{MethodSecretsReceipt, `{"nodeId":"n1","operationId":"install:token-1"}`, ""},
		{MethodSecretsReceipt, `{"nodeId":"n1"}`, "operationId"},
		{MethodSecretsReceipt, `{"nodeId":"n1","operationId":"x","name":"a"}`, "name"},
	}
	for _, c := range cases {
		spec, ok := LookupMethod(c.method)
		if !ok {
			t.Fatalf("%s not registered", c.method)
		}
		err := spec.Validate(json.RawMessage(c.params))
		if c.field == "" {
			if err != nil {
				t.Errorf("%s %s refused: %v", c.method, c.params, err)
			}
			continue
		}
		if err == nil || err.Details == nil || err.Details.Field != c.field {
			t.Errorf("%s %s: err=%+v want field %s", c.method, c.params, err, c.field)
		}
	}
}

func TestSecretsSetRecheck(t *testing.T) {
	spec, _ := LookupMethod(MethodSecretsSet)
	if spec.RecheckSession == nil {
		t.Fatal("no RecheckSession")
	}
	cases := map[string]bool{
		`{"nodeId":"n","name":"lemon_bot/invocations/r1","value":"v","operationId":"r1"}`:    true,
		`{"nodeId":"n","name":"  lemon_bot/invocations/r1 ","value":"v","operationId":"r1"}`: true,
		`{"nodeId":"n","name":"integration/token","value":"v"}`:                              false,
		`{"nodeId":"n","name":"lemon_bot/invocations","value":"v"}`:                          false,
	}
	for params, want := range cases {
		if got := spec.RecheckSession(json.RawMessage(params)); got != want {
			t.Errorf("%s: got %v", params, got)
		}
	}
	for _, m := range []string{MethodSecretsList, MethodSecretsDelete, MethodSecretsReceipt} {
		s, _ := LookupMethod(m)
		if s.RecheckSession != nil {
			t.Errorf("%s has a recheck", m)
		}
	}
}

func TestSecretsResultShapes(t *testing.T) {
	tr := true
	got := string(mustJSON(t, SecretsSetResult{Name: "a", Set: true}))
	if got != `{"name":"a","set":true}` {
		t.Errorf("plain set = %s", got)
	}
	got = string(mustJSON(t, SecretsSetResult{Name: "a", Set: true, OperationID: "op", Status: SecretStatusApplied, CurrentBindingMatches: &tr}))
	if got != `{"name":"a","set":true,"operationId":"op","status":"applied","currentBindingMatches":true}` {
		t.Errorf("set with id = %s", got)
	}
	got = string(mustJSON(t, SecretsReceiptResult{NodeID: "n", OperationID: "op", Status: SecretStatusNotFound}))
	if got != `{"nodeId":"n","operationId":"op","status":"not_found","name":null,"currentBindingMatches":false}` {
		t.Errorf("not_found receipt = %s", got)
	}
	got = string(mustJSON(t, SecretsListResult{Names: []string{}, Limit: SecretListLimit}))
	if got != `{"names":[],"limit":500,"truncated":false}` {
		t.Errorf("list = %s", got)
	}
}
