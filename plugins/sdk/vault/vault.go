// Package vault is the typed guest wrapper of the vault primitives
// (docs/HOSTCALLS.md, docs/SECRETS.md "Vault primitives"): a write-only
// encrypted store of the node. Values are opaque blobs: they enter as
// secret input blobs and nothing reads them back. Beside the values a
// module keeps small records of its own, written atomically with a put.
// All need capability "secrets"; list the calls used in the manifest's
// HostCalls. Errors are *protocol.Error values.
package vault

import (
	"strconv"

	"lemon/host/abi/wire"
	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
)

// Set seals the bytes of input blob valueBlob and puts them under name
// (stored form) at its next revision (vault.set). record, when not nil, is
// written in the same transaction; if its key exists the call is a replay
// that writes nothing (Written false) or fails CONFLICT (see
// contract.VaultSetArgs).
func Set(name string, valueBlob uint32, record *contract.VaultRecord) (contract.VaultSetResult, error) {
	return sdk.Invoke(vaultSet, contract.VaultSet, contract.VaultSetArgs{Name: name, ValueBlob: &valueBlob, Record: record})
}

// Put is Set for a module that needs only success: the same host call,
// but its result is not decoded (each decoded field costs the guest
// microseconds, docs/ABI.md "Codec"). A replay that writes nothing is a success
// too.
func Put(name string, valueBlob uint32, record *contract.VaultRecord) error {
	putArgs = AppendSetArgs(putArgs[:0], name, valueBlob, record)
	return sdk.SendBytes(vaultSet, putArgs)
}

// putArgs is reused for Put's args (the host copies them during the call).
var putArgs []byte

// AppendSetArgs appends vault.set's args for name, valueBlob and record
// (nil: none) as JSON, the bytes the SDK codec writes for
// contract.VaultSetArgs, without its per-field dispatch (Put's hot path).
func AppendSetArgs(b []byte, name string, valueBlob uint32, record *contract.VaultRecord) []byte {
	b = append(b, `{"name":`...)
	b = wire.AppendString(b, name)
	b = append(b, `,"valueBlob":`...)
	b = strconv.AppendUint(b, uint64(valueBlob), 10)
	if record != nil {
		b = append(b, `,"record":{"key":`...)
		b = wire.AppendString(b, record.Key)
		b = append(b, `,"value":`...)
		b = wire.AppendString(b, record.Value)
		if record.MaxPerName != 0 {
			b = append(b, `,"maxPerName":`...)
			b = strconv.AppendInt(b, int64(record.MaxPerName), 10)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// List returns the first limit (1 to contract.VaultListMaxLimit) names
// holding a current, unexpired value, sorted bytewise, and whether more
// exist (vault.list).
func List(limit int) (contract.VaultListResult, error) {
	return sdk.Invoke(vaultList, contract.VaultList, contract.VaultListArgs{Limit: limit})
}

// Delete deletes the value of name (stored form) (vault.delete); Deleted
// is false when there was none.
func Delete(name string) (contract.VaultDeleteResult, error) {
	return sdk.Invoke(vaultDelete, contract.VaultDelete, contract.VaultDeleteArgs{Name: name})
}

// Receipt reads this module's record key and the raw state of the name
// its put wrote (vault.receipt).
func Receipt(key string) (contract.VaultReceiptResult, error) {
	return sdk.Invoke(vaultReceipt, contract.VaultReceipt, contract.VaultReceiptArgs{Key: key})
}
