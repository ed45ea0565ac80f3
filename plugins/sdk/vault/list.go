package vault

import (
	"encoding/binary"
	"encoding/json"
	"unsafe"

	"lemon/host/abi/wire"
	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
	"lemon/protocol"
)

// ListNamesJSON is List with the names encoded as JSON: names is the JSON
// array of the result (contract.VaultListResult.Names, byte for byte as
// json.Marshal encodes it; SplitListResult), for a module that puts the
// names into its payload without building 500 strings in the guest (docs/SECRETS.md,
// "Performance"). more is the result's More. names is never null.
func ListNamesJSON(limit int) (names json.RawMessage, more bool, err error) {
	res, err := sdk.CallRaw(vaultList, contract.VaultListArgs{Limit: limit})
	if err != nil {
		return nil, false, err
	}
	return SplitListResult(res)
}

// SplitListResult turns a vault.list result (contract.VaultListResult in
// the binary layout of docs/ABI.md, "Host-call results") into the names
// as a JSON array, json.Marshal's bytes of Names, and More. The names are
// encoded straight from the result's bytes, with no []string built (the
// host checks every payload a module returns, docs/ABI.md "Result"). A
// malformed result, or nil names, is INTERNAL_ERROR.
func SplitListResult(res []byte) (names json.RawMessage, more bool, err error) {
	bad := protocol.Errorf(protocol.CodeInternal, "vault.list returned malformed data")
	if len(res) < 5 {
		return nil, false, bad
	}
	n := binary.LittleEndian.Uint32(res)
	if n == 0xFFFFFFFF || uint64(n)*4 > uint64(len(res)-5) {
		return nil, false, bad // nil names, or more than the bytes could hold
	}
	out := make([]byte, 0, len(res)+int(n)*3)
	out = append(out, '[')
	i := 4
	for k := uint32(0); k < n; k++ {
		if len(res)-i < 4 {
			return nil, false, bad
		}
		l := int(binary.LittleEndian.Uint32(res[i:]))
		i += 4
		if l < 0 || l > len(res)-i {
			return nil, false, bad
		}
		if k > 0 {
			out = append(out, ',')
		}
		if l == 0 {
			out = append(out, '"', '"')
		} else {
			out = wire.AppendString(out, unsafe.String(&res[i], l))
		}
		i += l
	}
	out = append(out, ']')
	if len(res)-i != 1 || res[i] > 1 {
		return nil, false, bad
	}
	return out, res[i] == 1, nil
}
