package vault

import (
	"encoding/json"
	"testing"

	"lemon/host/abi/wire"
	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// TestSplitListResult: from the binary result the host encodes, the names
// array comes back byte for byte as json.Marshal encodes the names
// (escapes included), with More; malformed results are INTERNAL_ERROR.
func TestSplitListResult(t *testing.T) {
	for _, r := range []contract.VaultListResult{
		{Names: []string{}},
		{Names: []string{"a"}, More: true},
		{Names: []string{"<a>&b/\u2028é", `q"uo\te`, "],\"more\":true}", ""}},
	} {
		res, err := wire.AppendBinary(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(r.Names)
		names, more, err := SplitListResult(res)
		if err != nil || string(names) != string(want) || more != r.More {
			t.Fatalf("%x: %s %v %v", res, names, more, err)
		}
		for n := 0; n < len(res); n++ {
			if _, _, err := SplitListResult(res[:n]); err == nil {
				t.Fatalf("%x cut at %d accepted", res, n)
			}
		}
	}
	nilNames, _ := wire.AppendBinary(nil, contract.VaultListResult{})
	for _, bad := range [][]byte{nil, []byte(`{"names":[],"more":false}`), nilNames,
		{1, 0, 0, 0, 9, 0, 0, 0, 'a', 0}, {0, 0, 0, 0, 2}, {0, 0, 0, 0, 0, 0}} {
		_, _, err := SplitListResult(bad)
		var pe *protocol.Error
		if pe, _ = err.(*protocol.Error); pe == nil || pe.Code != protocol.CodeInternal {
			t.Fatalf("%q: %v, want INTERNAL_ERROR", bad, err)
		}
	}
}
