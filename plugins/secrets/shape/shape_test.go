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

// TestSetParamsIsDecode: whatever SetParams accepts, protocol.DecodeParams
// accepts too with the same values; what it refuses goes to the strict
// decode. Checked on hand-picked cases and on every truncation and
// one-byte mutation of them.
func TestSetParamsIsDecode(t *testing.T) {
	cases := []string{
		`{"nodeId":"n1","name":" db/x ","operationId":"op-1"}`,
		`{"operationId":"op-1","nodeId":"n1","name":"a"}`,
		`{"nodeId":"n1","name":"a"}`,
		`{}`,
		`{"nodeId":"n1","name":"a","value":"v"}`,
		`{"nodeId":"n1","nodeId":"n2","name":"a"}`,
		`{"nodeId":"n1", "name":"a"}`,
		`{"nodeId":"n\u0031","name":"a"}`,
		`{"nodeId":"n1","name":"é"}`,
		`{"nodeId":null,"name":"a"}`,
		`{"nodeId":"n1","name":"a"}x`,
		`{"NodeId":"n1","name":"a"}`,
	}
	accepted := 0
	check := func(in string) {
		nodeID, name, op, ok := shape.SetParams([]byte(in))
		if !ok {
			return
		}
		accepted++
		var p protocol.SecretsSetParams
		if perr := protocol.DecodeParams(json.RawMessage(in), &p); perr != nil {
			t.Fatalf("%q: SetParams accepted, DecodeParams: %v", in, perr)
		}
		if p.NodeID != nodeID || p.Name != name || p.Value != nil || (p.OperationID == nil) != (op == nil) ||
			(op != nil && *op != *p.OperationID) {
			t.Fatalf("%q: SetParams %q %q %v, DecodeParams %+v", in, nodeID, name, op, p)
		}
	}
	for _, c := range cases {
		check(c)
		for n := 0; n < len(c); n++ {
			check(c[:n])
			for _, x := range []byte{'"', '\\', ',', ':', '}', '{', ' ', 'a', 0, 0xff} {
				m := []byte(c)
				m[n] = x
				check(string(m))
			}
		}
	}
	if accepted < 4 {
		t.Fatalf("only %d inputs took the fast path", accepted)
	}
	for _, in := range cases[4:] {
		if _, _, _, ok := shape.SetParams([]byte(in)); ok {
			t.Errorf("%q took the fast path", in)
		}
	}
}
