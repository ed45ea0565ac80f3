package vault

import (
	"bytes"
	"encoding/json"

	"lemon/host/abi/wire"
	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
	"lemon/protocol"
)

// ListNamesJSON is List with the names left encoded: names is the JSON
// array of the result (contract.VaultListResult.Names, byte for byte as
// json.Marshal encodes it), for a module that puts the names into its
// payload without decoding 500 strings in the guest (docs/SECRETS.md,
// "Performance"). more is the result's More. names is never null.
func ListNamesJSON(limit int) (names json.RawMessage, more bool, err error) {
	res, err := sdk.CallRaw(vaultList, contract.VaultListArgs{Limit: limit})
	if err != nil {
		return nil, false, err
	}
	return SplitListResult(res)
}

// The canonical encoding of contract.VaultListResult: the host encodes
// fields in declaration order with no white space (docs/ABI.md, "Codec").
var (
	listPrefix    = []byte(`{"names":`)
	listMoreFalse = []byte(`,"more":false}`)
	listMoreTrue  = []byte(`,"more":true}`)
)

// SplitListResult splits the JSON of a vault.list result into the names
// array (sharing res's bytes) and More. The canonical encoding is split by
// its fixed prefix and suffix, without a scan (the host checks every
// payload a module returns, docs/ABI.md "Result", so names reach no
// response unchecked); any other encoding is decoded as json.Unmarshal
// would, and malformed JSON or a names value that is not an array is
// INTERNAL_ERROR.
func SplitListResult(res []byte) (names json.RawMessage, more bool, err error) {
	if bytes.HasPrefix(res, listPrefix) {
		rest := res[len(listPrefix):]
		for _, s := range [...]struct {
			suffix []byte
			more   bool
		}{{listMoreFalse, false}, {listMoreTrue, true}} {
			if a, ok := bytes.CutSuffix(rest, s.suffix); ok && len(a) >= 2 && a[0] == '[' && a[len(a)-1] == ']' {
				return a, s.more, nil
			}
		}
	}
	var r struct {
		Names json.RawMessage `json:"names"`
		More  bool            `json:"more"`
	}
	if err := wire.Unmarshal(res, &r); err != nil || len(r.Names) == 0 || r.Names[0] != '[' {
		return nil, false, protocol.Errorf(protocol.CodeInternal, "vault.list returned malformed data")
	}
	return r.Names, r.More, nil
}
