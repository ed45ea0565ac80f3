package sdk_test

import (
	"encoding/json"
	"testing"

	"lemon/plugins/sdk"
	"lemon/protocol"
)

type plainParams struct {
	NodeID      string  `json:"nodeId"`
	Name        string  `json:"name"`
	OperationID *string `json:"operationId,omitempty"`
}

// TestPlainStringsIsDecode: whatever PlainStrings accepts,
// protocol.DecodeParams accepts too with the same values; the rest goes
// to the strict decode. Checked on hand-picked cases and on every
// truncation and one-byte mutation of them.
func TestPlainStringsIsDecode(t *testing.T) {
	keys := []string{"nodeId", "name", "operationId"}
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
		vals := make([]string, 3)
		present, ok := sdk.PlainStrings([]byte(in), keys, vals)
		if !ok {
			return
		}
		accepted++
		var p plainParams
		if perr := protocol.DecodeParams(json.RawMessage(in), &p); perr != nil {
			t.Fatalf("%q: PlainStrings accepted, DecodeParams: %v", in, perr)
		}
		op := ""
		if p.OperationID != nil {
			op = *p.OperationID
		}
		if p.NodeID != vals[0] || p.Name != vals[1] || op != vals[2] || (p.OperationID != nil) != (present&4 != 0) {
			t.Fatalf("%q: PlainStrings %q (present %b), DecodeParams %+v", in, vals, present, p)
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
		if _, ok := sdk.PlainStrings([]byte(in), keys, make([]string, 3)); ok {
			t.Errorf("%q took the fast path", in)
		}
	}
}
