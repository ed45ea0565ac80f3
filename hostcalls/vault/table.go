package vault

import (
	"context"
	"encoding/json"

	"lemon/hostcalls"
	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// Host-call names of the secrets family (from lemon/hostcalls/contract).
var (
	HostCallSet     = contract.VaultSet.Name()
	HostCallList    = contract.VaultList.Name()
	HostCallDelete  = contract.VaultDelete.Name()
	HostCallReceipt = contract.VaultReceipt.Name()
	// HostCallListPayload answers {payloadBlob}: the id of an invocation
	// blob holding the whole node.secrets.list payload, which the module
	// returns unread (sdk.Result.PayloadBlob, docs/ABI.md). Guest-side JSON
	// costs about 1 µs a byte and 500 names are ~20 KB. Secrets modules
	// from 1.1.0 use it; vault.list stays for modules built before.
	HostCallListPayload = contract.VaultListPayload.Name()
)

// The host-call shapes of the family, defined once in
// lemon/hostcalls/contract and shared with the guest SDK (plugins/sdk/vault).
type (
	// PayloadCall is the result of HostCallListPayload.
	PayloadCall = contract.PayloadResult
	// SetArgs are the args of vault.set.
	SetArgs = contract.VaultSetArgs
	// DeleteArgs are the args of vault.delete.
	DeleteArgs = contract.VaultDeleteArgs
	// ReceiptArgs are the args of vault.receipt.
	ReceiptArgs = contract.VaultReceiptArgs
)

// Table returns the secrets family's host calls, all under capability
// "secrets" (docs/HOSTCALLS.md):
//
//	vault.set     {name, valueBlob, operationId?} → protocol.SecretsSetResult
//	vault.list    {}                              → protocol.SecretsListResult
//	vault.list_payload {}                         → PayloadCall; blob = protocol.SecretsListResult JSON
//	vault.delete  {name}                          → protocol.SecretsDeleteResult
//	vault.receipt {operationId}                   → protocol.SecretsReceiptResult
//
// Operation IDs are scoped to the authenticated node identity of the
// invocation (hostcalls.Invocation.NodeID), never to a request field. No
// result carries plaintext, ciphertext, nonces, salts or tags.
func (v *Vault) Table() hostcalls.Table {
	sec := hostcalls.CapSecrets
	return hostcalls.Table{
		hostcalls.Define(contract.VaultSet, sec, hostcalls.AuditMutation, v.hcSet, setErrors...).ReadsSecretBlobs(),
		hostcalls.Define(contract.VaultList, sec, hostcalls.AuditRead, v.hcList, errsUnavailable, errsCorrupt),
		hostcalls.Define(contract.VaultListPayload, sec, hostcalls.AuditRead, v.hcListPayload, errsUnavailable, errsCorrupt),
		hostcalls.Define(contract.VaultDelete, sec, hostcalls.AuditMutation, v.hcDelete, deleteErrors...),
		hostcalls.Define(contract.VaultReceipt, sec, hostcalls.AuditRead, v.hcReceipt,
			hostcalls.Err(protocol.InvalidParams("operationId", ""), "operationId is not a valid operation id"),
			hostcalls.Err(errNoIdentity(), "the node identity is unknown"), errsUnavailable),
	}
}

// The errors of the vault host calls, as data for docs/HOSTCALLS.md.
var (
	errsUnavailable = hostcalls.Err(errUnavailable(), "no usable vault key or storage (retry safe)")
	errsCorrupt     = hostcalls.Err(errCorruptRecord(), "a stored record fails authentication")
	setErrors       = []hostcalls.ErrorSpec{
		hostcalls.Err(protocol.InvalidParams("name", ""), "name breaks the secret-name rules"),
		hostcalls.Err(protocol.InvalidParams("operationId", ""), "operationId is not a valid operation id"),
		hostcalls.Err(protocol.InvalidParams("value", ""), "valueBlob is missing or names no input blob"),
		hostcalls.Err(protocol.CheckReservedSecretName(protocol.SecretReservedPrefix+"run", nil), "name is under the reserved prefix and operationId is not its run id"),
		hostcalls.Err(protocol.Errorf(protocol.CodeTimeout, ""), "the request deadline passed before the write"),
		hostcalls.Err(errOperationConflict(), "operationId was used with another intent"),
		hostcalls.Err(errReceiptCapacity(), "the secret holds its maximum of operation receipts"),
		hostcalls.Err(errNoIdentity(), "operationId given but the node identity is unknown"),
		errsUnavailable,
		hostcalls.Err(errWriteUnknown(), "the write failed and may have applied (query the receipt)"),
	}
	deleteErrors = []hostcalls.ErrorSpec{
		hostcalls.Err(protocol.InvalidParams("name", ""), "name breaks the secret-name rules"),
		errsUnavailable,
		hostcalls.Err(errWriteUnknown(), "the write failed and may have applied"),
	}
)

// hcSet validates everything it can before reading the value blob or
// touching the vault: name, operationId and the reserved-name rule.
func (v *Vault) hcSet(ctx context.Context, call hostcalls.Call, a SetArgs) (contract.VaultSetResult, error) {
	var zero contract.VaultSetResult
	if _, perr := checkSetParams(a.Name, a.OperationID); perr != nil {
		return zero, perr
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
	res, perr := v.Set(SetRequest{NodeID: call.Invocation().NodeID, Name: a.Name, Value: value, OperationID: a.OperationID})
	if perr != nil {
		return zero, perr
	}
	return res, nil
}

func (v *Vault) hcList(ctx context.Context, call hostcalls.Call, _ contract.Empty) (contract.VaultListResult, error) {
	res, perr := v.List()
	if perr != nil {
		return contract.VaultListResult{}, perr
	}
	return res, nil
}

func (v *Vault) hcListPayload(ctx context.Context, call hostcalls.Call, _ contract.Empty) (PayloadCall, error) {
	res, perr := v.List()
	if perr != nil {
		return PayloadCall{}, perr
	}
	b, err := marshal(res)
	if err != nil {
		return PayloadCall{}, err
	}
	return PayloadCall{PayloadBlob: call.PutBlob(b)}, nil
}

func (v *Vault) hcDelete(ctx context.Context, call hostcalls.Call, a DeleteArgs) (contract.VaultDeleteResult, error) {
	name, perr := v.Delete(a.Name)
	if perr != nil {
		return contract.VaultDeleteResult{}, perr
	}
	return protocol.SecretsDeleteResult{Name: name, Deleted: true}, nil
}

func (v *Vault) hcReceipt(ctx context.Context, call hostcalls.Call, a ReceiptArgs) (contract.VaultReceiptResult, error) {
	res, perr := v.Receipt(call.Invocation().NodeID, a.OperationID)
	if perr != nil {
		return contract.VaultReceiptResult{}, perr
	}
	return res, nil
}

func marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "internal error")
	}
	return b, nil
}
