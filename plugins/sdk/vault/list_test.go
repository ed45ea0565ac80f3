package vault

import (
	"encoding/json"
	"fmt"
	"testing"

	"lemon/host/abi/wire"
	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// TestSplitListResult: the names array comes back byte for byte as the
// host encoded it (escapes included) with More, from the canonical
// encoding and from any other valid one; malformed results are
// INTERNAL_ERROR.
func TestSplitListResult(t *testing.T) {
	for _, r := range []contract.VaultListResult{
		{Names: []string{}},
		{Names: []string{"a"}, More: true},
		{Names: []string{"<a>&b/\u2028é", `q"uo\te`, "],\"more\":true}"}},
	} {
		res, err := wire.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(r.Names)
		names, more, err := SplitListResult(res)
		if err != nil || string(names) != string(want) || more != r.More {
			t.Fatalf("%s: %s %v %v", res, names, more, err)
		}
		// Not canonical (white space, field order): decoded.
		other := fmt.Sprintf(`{ "more" : %v, "names" : %s }`, r.More, want)
		names, more, err = SplitListResult([]byte(other))
		if err != nil || string(names) != string(want) || more != r.More {
			t.Fatalf("%s: %s %v %v", other, names, more, err)
		}
	}
	for _, bad := range []string{``, `{}`, `{"names":null,"more":false}`, `{"names":"a","more":false}`,
		`{"names":[,"more":false`, `[]`, `{"names":{},"more":true}`} {
		_, _, err := SplitListResult([]byte(bad))
		var pe *protocol.Error
		if pe, _ = err.(*protocol.Error); pe == nil || pe.Code != protocol.CodeInternal {
			t.Fatalf("%q: %v, want INTERNAL_ERROR", bad, err)
		}
	}
}
