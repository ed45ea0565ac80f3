package shape_test

import (
	"encoding/json"
	"testing"

	"lemon/plugins/secrets/shape"
	"lemon/protocol"
)

// TestAppendSetResultIsMarshal: the hand-written payload is exactly
// json.Marshal's, with and without a receipt, escapes included.
func TestAppendSetResultIsMarshal(t *testing.T) {
	tr := true
	for _, c := range []struct{ name, op string }{
		{"db/password", ""}, {"db/password", "op-1"}, {"<a>&\u2028\"\\\x01é", "A_b:c-1"},
	} {
		want := protocol.SecretsSetResult{Name: c.name, Set: true}
		if c.op != "" {
			want.OperationID, want.Status, want.CurrentBindingMatches = c.op, protocol.SecretStatusApplied, &tr
		}
		w, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if got := shape.AppendSetResult(nil, c.name, c.op); string(got) != string(w) {
			t.Errorf("AppendSetResult(%q, %q)\n got %s\nwant %s", c.name, c.op, got, w)
		}
	}
}

// TestSetParams: the plain shape gives the three params (operationId
// only when present); anything else is left to the strict decode
// (sdk.PlainStrings is tested against protocol.DecodeParams).
func TestSetParams(t *testing.T) {
	n, name, op, ok := shape.SetParams([]byte(`{"nodeId":"n1","name":" a ","operationId":"op-1"}`))
	if !ok || n != "n1" || name != " a " || op == nil || *op != "op-1" {
		t.Fatalf("%q %q %v %v", n, name, op, ok)
	}
	if _, _, op, ok := shape.SetParams([]byte(`{"nodeId":"n1","name":"a"}`)); !ok || op != nil {
		t.Fatalf("without operationId: %v %v", op, ok)
	}
	if _, _, _, ok := shape.SetParams([]byte(`{"nodeId":"n1","name":"a","value":"x"}`)); ok {
		t.Fatal("a value member took the fast path")
	}
}
