package vault

import (
	"context"

	"lemon/hostcalls"
	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// Host-call names of the vault primitives (from lemon/hostcalls/contract).
var (
	HostCallSet     = contract.VaultSet.Name()
	HostCallDelete  = contract.VaultDelete.Name()
	HostCallReceipt = contract.VaultReceipt.Name()
	HostCallList    = contract.VaultList.Name()
)

// Table returns the vault primitives, all under capability "secrets"
// (docs/HOSTCALLS.md, docs/SECRETS.md "Vault primitives"):
//
//	vault.set          {name, valueBlob, record?{key, value, maxPerName?}} → {revision, written}
//	vault.delete       {name}  → {deleted}
//	vault.receipt      {key}   → {found, value, name, revision, currentRevision, live, writtenAtMs}
//	vault.list         {limit} → {names, more}  (limit 1 to 1000; names sorted bytewise)
//
// Records belong to the calling module's family (call.Module()); there is
// no way to name another module's. The secret-operation logic (operation
// ids, their node scope, reserved names, receipt statuses) is the secrets
// module's (plugins/secrets). No result carries plaintext, ciphertext,
// nonces, salts or tags.
func (v *Vault) Table() hostcalls.Table {
	sec := hostcalls.CapSecrets
	return hostcalls.Table{
		hostcalls.Define(contract.VaultSet, sec, hostcalls.AuditMutation, v.hcSet, setErrors...).ReadsSecretBlobs(),
		hostcalls.Define(contract.VaultList, sec, hostcalls.AuditRead, v.hcList,
			hostcalls.Err(protocol.InvalidParams("limit", ""), "limit is not 1 to 1000"), errsUnavailable),
		hostcalls.Define(contract.VaultDelete, sec, hostcalls.AuditMutation, v.hcDelete, deleteErrors...),
		hostcalls.Define(contract.VaultReceipt, sec, hostcalls.AuditRead, v.hcReceipt,
			hostcalls.Err(protocol.InvalidParams("record", ""), "key is empty, longer than 512 bytes, not UTF-8 or has NUL"),
			errsUnavailable),
	}
}

// The errors of the vault host calls, as data for docs/HOSTCALLS.md.
var (
	errsUnavailable = hostcalls.Err(errUnavailable(), "no usable vault key or storage (retry safe)")
	errsCorrupt     = hostcalls.Err(errCorruptRecord(), "a stored record fails authentication")
	setErrors       = []hostcalls.ErrorSpec{
		hostcalls.Err(protocol.InvalidParams("name", ""), "name breaks the secret-name rules or is not in stored (trimmed) form"),
		hostcalls.Err(protocol.InvalidParams("value", ""), "valueBlob is missing, names no input blob or exceeds 1 MiB"),
		hostcalls.Err(protocol.InvalidParams("record", ""), "record key, value or maxPerName out of bounds"),
		hostcalls.Err(protocol.Errorf(protocol.CodeTimeout, ""), "the request deadline passed before the write"),
		hostcalls.Err(errRecordConflict(), "the record key exists and this put does not replay it (other value, name or blob, or its revision is no longer current)"),
		hostcalls.Err(errRecordCapacity(), "a new record on a name holding maxPerName records"),
		errsUnavailable,
		errsCorrupt,
		hostcalls.Err(errWriteUnknown(), "the write failed and may have applied"),
	}
	deleteErrors = []hostcalls.ErrorSpec{
		hostcalls.Err(protocol.InvalidParams("name", ""), "name breaks the secret-name rules or is not in stored form"),
		errsUnavailable,
		hostcalls.Err(errWriteUnknown(), "the write failed and may have applied"),
	}
)

// hcSet checks the name and record before it reads the value blob, and
// the deadline before it writes.
func (v *Vault) hcSet(ctx context.Context, call hostcalls.Call, a contract.VaultSetArgs) (contract.VaultSetResult, error) {
	var zero contract.VaultSetResult
	if perr := CheckName(a.Name); perr != nil {
		return zero, perr
	}
	var rec *Record
	if a.Record != nil {
		rec = &Record{Key: a.Record.Key, Value: a.Record.Value, MaxPerName: a.Record.MaxPerName}
		if perr := checkRecord(call.Module(), rec); perr != nil {
			return zero, perr
		}
	}
	if a.ValueBlob == nil {
		return zero, protocol.InvalidParams("value", "value is required")
	}
	value, ok := call.Blob(*a.ValueBlob)
	if !ok {
		return zero, protocol.InvalidParams("value", "value is required")
	}
	if perr := ctx.Err(); perr != nil {
		return zero, protocol.Errorf(protocol.CodeTimeout, "request deadline passed before the vault write")
	}
	res, perr := v.Put(PutRequest{Family: call.Module(), Name: a.Name, Value: value, Record: rec})
	if perr != nil {
		return zero, perr
	}
	return contract.VaultSetResult{Revision: res.Revision, Written: res.Written}, nil
}

func (v *Vault) hcList(ctx context.Context, call hostcalls.Call, a contract.VaultListArgs) (contract.VaultListResult, error) {
	res, perr := v.List(a.Limit)
	if perr != nil {
		return contract.VaultListResult{}, perr
	}
	return contract.VaultListResult{Names: res.Names, More: res.More}, nil
}

func (v *Vault) hcDelete(ctx context.Context, call hostcalls.Call, a contract.VaultDeleteArgs) (contract.VaultDeleteResult, error) {
	deleted, perr := v.Delete(a.Name)
	if perr != nil {
		return contract.VaultDeleteResult{}, perr
	}
	return contract.VaultDeleteResult{Deleted: deleted}, nil
}

func (v *Vault) hcReceipt(ctx context.Context, call hostcalls.Call, a contract.VaultReceiptArgs) (contract.VaultReceiptResult, error) {
	st, perr := v.Record(call.Module(), a.Key)
	if perr != nil {
		return contract.VaultReceiptResult{}, perr
	}
	return contract.VaultReceiptResult{Found: st.Found, Value: st.Value, Name: st.Name, Revision: st.Revision,
		CurrentRevision: st.CurrentRevision, Live: st.Live, WrittenAtMs: st.WrittenAtMs}, nil
}
