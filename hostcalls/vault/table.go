package vault

import (
	"context"
	"encoding/json"

	"lemon/hostcalls"
	"lemon/protocol"
)

// Host-call names of the secrets family.
const (
	HostCallSet     = "vault.set"
	HostCallList    = "vault.list"
	HostCallDelete  = "vault.delete"
	HostCallReceipt = "vault.receipt"
	// HostCallListPayload answers {payloadBlob}: the id of an invocation
	// blob holding the whole node.secrets.list payload, which the module
	// returns unread (sdk.Result.PayloadBlob, docs/ABI.md). Guest-side JSON
	// costs about 1 µs a byte and 500 names are ~20 KB. Secrets modules
	// from 1.1.0 use it; vault.list stays for modules built before.
	HostCallListPayload = "vault.list_payload"
)

// PayloadCall is the result of HostCallListPayload.
type PayloadCall struct {
	PayloadBlob uint32 `json:"payloadBlob"`
}

// SetArgs are the args of vault.set. ValueBlob is the id of the input blob
// the host decoded from the request's value field (encoding "string",
// at most 1 MiB): the plaintext never enters module memory.
type SetArgs struct {
	Name        string  `json:"name"`
	ValueBlob   *uint32 `json:"valueBlob"`
	OperationID *string `json:"operationId,omitempty"`
}

// DeleteArgs are the args of vault.delete.
type DeleteArgs struct {
	Name string `json:"name"`
}

// ReceiptArgs are the args of vault.receipt.
type ReceiptArgs struct {
	OperationID string `json:"operationId"`
}

// Table returns the secrets family's host calls, all under capability
// "secrets":
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
	return hostcalls.Table{
		{Name: HostCallSet, Params: []string{"name", "valueBlob", "operationId"},
			Capability: hostcalls.CapSecrets, Audit: hostcalls.AuditMutation, Func: v.hcSet, SecretBlobs: true},
		{Name: HostCallList, Params: []string{},
			Capability: hostcalls.CapSecrets, Audit: hostcalls.AuditRead, Func: v.hcList},
		{Name: HostCallListPayload, Params: []string{},
			Capability: hostcalls.CapSecrets, Audit: hostcalls.AuditRead, Func: v.hcListPayload},
		{Name: HostCallDelete, Params: []string{"name"},
			Capability: hostcalls.CapSecrets, Audit: hostcalls.AuditMutation, Func: v.hcDelete},
		{Name: HostCallReceipt, Params: []string{"operationId"},
			Capability: hostcalls.CapSecrets, Audit: hostcalls.AuditRead, Func: v.hcReceipt},
	}
}

// hcSet validates everything it can before reading the value blob or
// touching the vault: name, operationId and the reserved-name rule.
func (v *Vault) hcSet(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	var a SetArgs
	if perr := protocol.DecodeParams(args, &a); perr != nil {
		return nil, perr
	}
	if _, perr := checkSetParams(a.Name, a.OperationID); perr != nil {
		return nil, perr
	}
	if a.ValueBlob == nil {
		return nil, protocol.InvalidParams("value", "value is required")
	}
	value, ok := call.Blob(*a.ValueBlob)
	if !ok {
		return nil, protocol.InvalidParams("value", "value is required")
	}
	if perr := ctx.Err(); perr != nil {
		return nil, protocol.Errorf(protocol.CodeTimeout, "request deadline passed before the vault write")
	}
	res, perr := v.Set(SetRequest{NodeID: call.Invocation().NodeID, Name: a.Name, Value: value, OperationID: a.OperationID})
	if perr != nil {
		return nil, perr
	}
	return marshal(res)
}

func (v *Vault) hcList(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	var a struct{}
	if perr := protocol.DecodeParams(args, &a); perr != nil {
		return nil, perr
	}
	res, perr := v.List()
	if perr != nil {
		return nil, perr
	}
	return marshal(res)
}

func (v *Vault) hcListPayload(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	b, err := v.hcList(ctx, call, args)
	if err != nil {
		return nil, err
	}
	return marshal(PayloadCall{PayloadBlob: call.PutBlob(b)})
}

func (v *Vault) hcDelete(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	var a DeleteArgs
	if perr := protocol.DecodeParams(args, &a); perr != nil {
		return nil, perr
	}
	name, perr := v.Delete(a.Name)
	if perr != nil {
		return nil, perr
	}
	return marshal(protocol.SecretsDeleteResult{Name: name, Deleted: true})
}

func (v *Vault) hcReceipt(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	var a ReceiptArgs
	if perr := protocol.DecodeParams(args, &a); perr != nil {
		return nil, perr
	}
	res, perr := v.Receipt(call.Invocation().NodeID, a.OperationID)
	if perr != nil {
		return nil, perr
	}
	return marshal(res)
}

func marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "internal error")
	}
	return b, nil
}
