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
