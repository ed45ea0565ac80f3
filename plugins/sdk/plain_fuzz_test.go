package sdk_test

import (
	"encoding/json"
	"testing"

	"lemon/host/abi/wire"
	"lemon/plugins/sdk"
	"lemon/protocol"
)

// FuzzPlainStrings: whatever PlainStrings accepts, protocol.DecodeParams
// and wire.DecodeParams (Request.Decode) accept too, with the same values
// and the same members present.
func FuzzPlainStrings(f *testing.F) {
	for _, s := range []string{
		`{"nodeId":"n1","name":" db/x ","operationId":"op-1"}`,
		`{"operationId":"op-1","nodeId":"n1","name":"a"}`,
		`{"nodeId":"n1","name":"a"}`, `{}`, `{"name":""}`,
		`{"nodeId":"n1","name":"a","value":"v"}`,
		`{"nodeId":"n1", "name":"a"}`, `{"nodeId":"n\u0031"}`,
	} {
		f.Add([]byte(s))
	}
	keys := []string{"nodeId", "name", "operationId"}
	f.Fuzz(func(t *testing.T, in []byte) {
		vals := make([]string, 3)
		present, ok := sdk.PlainStrings(in, keys, vals)
		if !ok {
			return
		}
		for _, dec := range []func(*plainParams) error{
			func(p *plainParams) error {
				if e := protocol.DecodeParams(json.RawMessage(in), p); e != nil {
					return e
				}
				return nil
			},
			func(p *plainParams) error {
				if e := wire.DecodeParams(in, p); e != nil {
					return e
				}
				return nil
			},
		} {
			var p plainParams
			if err := dec(&p); err != nil {
				t.Fatalf("%q: PlainStrings accepted, strict decode: %v", in, err)
			}
			op := ""
			if p.OperationID != nil {
				op = *p.OperationID
			}
			if p.NodeID != vals[0] || p.Name != vals[1] || op != vals[2] || (p.OperationID != nil) != (present&4 != 0) {
				t.Fatalf("%q: PlainStrings %q (present %b), decode %+v", in, vals, present, p)
			}
		}
	})
}
