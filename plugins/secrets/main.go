//go:build wasip1

// Command secrets is the module of the secrets family: node.secrets.set,
// list, delete and receipt (spec: execution-node-methods.md, "Write-only
// encrypted secrets" and "Reconciling a secret installation";
// docs/SECRETS.md).
//
// The module holds the family's logic: strict params, the name rules and
// trimming, the reserved-name rule, operation ids scoped to the
// authenticated node identity, the receipt statuses and binding, the
// receipt capacity, and every payload's shape. The host offers only the
// vault primitives (plugins/sdk/vault): seal and put a value blob with an
// optional record of this module written in the same transaction, delete,
// read a record with the raw state of its name, and the list of names.
//
// Receipts are this module's vault records: key "op/<nodeId>/<operationId>"
// (operation ids hold no "/", so the key splits unambiguously), value
// "applied", written by the put they prove in one fsync'd transaction, so
// a receipt exists exactly when its value was stored, whatever crash
// comes between (docs/RATIONALE.md, "Secret receipts are vault records").
//
// The secret value never enters this module's memory: the manifest
// declares value as an input blob, so the host removes it from params
// before the module runs and the module hands the vault only the blob's
// id. There is no get: nothing here can read a value back; vault.list
// gives names only.
package main

import (
	"encoding/json"
	"strconv"

	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
	"lemon/plugins/sdk/vault"
	"lemon/plugins/secrets/shape"
	"lemon/protocol"
)

func init() {
	sdk.Serve(manifest, map[string]sdk.Handler{
		protocol.MethodSecretsSet:     set,
		protocol.MethodSecretsList:    list,
		protocol.MethodSecretsDelete:  del,
		protocol.MethodSecretsReceipt: receipt,
	})
}

// receiptValue is the value of every receipt record: the operation was
// applied by the put that wrote the record.
const receiptValue = "applied"

// maxReceiptKey is the vault's bound on a record key (docs/HOSTCALLS.md).
const maxReceiptKey = 512

// receiptKey is the record key of operation opID of node nodeID. The node
// identity is the authenticated one the host passes with the invocation,
// never a request field; without one an operation id cannot be scoped.
func receiptKey(nodeID, opID string) (string, *protocol.Error) {
	key := "op/" + nodeID + "/" + opID
	if nodeID == "" || len(key) > maxReceiptKey {
		return "", protocol.DomainError(protocol.CodeUnavailable, protocol.DomainVaultUnavailable,
			"the node identity needed to scope operationId is unavailable").WithRetry(true, false)
	}
	return key, nil
}

// setBuf holds the last set payload; the SDK copies it into the result
// envelope before the next invocation.
var setBuf []byte

func set(req *sdk.Request) (*sdk.Result, error) {
	// The checks of protocol.DecodeSecretsSet, on the SDK's fast strict
	// decode: the name rules, operationId and the reserved-name rule, all
	// before the vault is touched or the value blob read.
	var p protocol.SecretsSetParams
	if nodeID, name, op, ok := shape.SetParams(req.Params); ok {
		p = protocol.SecretsSetParams{NodeID: nodeID, Name: name, OperationID: op}
	} else if err := req.Decode(&p); err != nil {
		return nil, err
	}
	if p.Value != nil {
		// Only a host that ignored the manifest could pass the value in
		// params; refuse rather than handle plaintext here.
		return nil, protocol.Errorf(protocol.CodeInternal, "value did not arrive as a host-side blob")
	}
	if perr := protocol.RequireNodeID(p.NodeID); perr != nil {
		return nil, perr
	}
	name, perr := protocol.CheckSecretName(p.Name)
	if perr != nil {
		return nil, perr
	}
	if p.OperationID != nil {
		if perr := protocol.CheckSecretOperationID(*p.OperationID); perr != nil {
			return nil, perr
		}
	}
	if perr := protocol.CheckReservedSecretName(name, p.OperationID); perr != nil {
		return nil, perr
	}
	blob, ok := req.Blobs["value"]
	if !ok {
		return nil, protocol.InvalidParams("value", "value is required")
	}
	if perr := protocol.CheckSecretValueSize(blob.Size); perr != nil {
		return nil, perr
	}
	var rec *contract.VaultRecord
	if p.OperationID != nil {
		key, perr := receiptKey(req.Invocation.NodeID, *p.OperationID)
		if perr != nil {
			return nil, perr
		}
		// A new operation on a name holding 128 receipts is refused
		// before anything changes; a known one is a replay (the original
		// success, nothing written) or secret_operation_conflict.
		rec = &contract.VaultRecord{Key: key, Value: receiptValue, MaxPerName: protocol.SecretReceiptsPerName}
	}
	// vault.set's result (revision, written) is not needed: a replay
	// answers the original success. Put skips decoding it.
	if err := vault.Put(name, blob.ID, rec); err != nil {
		return nil, err
	}
	// protocol.SecretsSetResult's bytes, written by hand (shape).
	op := ""
	if p.OperationID != nil {
		op = *p.OperationID
	}
	setBuf = shape.AppendSetResult(setBuf[:0], name, op)
	return &sdk.Result{Payload: json.RawMessage(setBuf)}, nil
}

func list(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.SecretsListParams
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	if perr := protocol.RequireNodeID(p.NodeID); perr != nil {
		return nil, perr
	}
	// The vault answers the first 500 names in byte order, still encoded,
	// and whether more exist; the payload {names, limit:500, truncated} is
	// shaped here around them, so 500 names are neither decoded nor
	// re-encoded in the guest (docs/SECRETS.md, "Performance"). The host
	// checks the payload as it checks every payload.
	names, more, err := vault.ListNamesJSON(protocol.SecretListLimit)
	if err != nil {
		return nil, err
	}
	// listBuf is reused: the SDK copies the payload into the result
	// envelope before the invocation returns.
	b := append(listBuf[:0], `{"names":`...)
	b = append(b, names...)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, protocol.SecretListLimit, 10)
	b = append(b, `,"truncated":`...)
	b = strconv.AppendBool(b, more)
	b = append(b, '}')
	listBuf = b
	return &sdk.Result{Payload: json.RawMessage(b)}, nil
}

// listBuf holds the last node.secrets.list payload.
var listBuf []byte

func del(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.SecretsDeleteParams
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	if perr := protocol.RequireNodeID(p.NodeID); perr != nil {
		return nil, perr
	}
	name, perr := protocol.CheckSecretName(p.Name)
	if perr != nil {
		return nil, perr
	}
	// Deleting a missing or deleted name succeeds without a write.
	if _, err := vault.Delete(name); err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: protocol.SecretsDeleteResult{Name: name, Deleted: true}}, nil
}

func receipt(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.SecretsReceiptParams
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	if perr := protocol.RequireNodeID(p.NodeID); perr != nil {
		return nil, perr
	}
	if perr := protocol.CheckSecretOperationID(p.OperationID); perr != nil {
		return nil, perr
	}
	key, perr := receiptKey(req.Invocation.NodeID, p.OperationID)
	if perr != nil {
		return nil, perr
	}
	// A vault that cannot answer is an error from this call, never
	// not_found.
	r, err := vault.Receipt(key)
	if err != nil {
		return nil, err
	}
	// Exactly {nodeId, operationId, status, name, currentBindingMatches};
	// not_found always has name null and currentBindingMatches false.
	out := protocol.SecretsReceiptResult{NodeID: req.Invocation.NodeID, OperationID: p.OperationID,
		Status: protocol.SecretStatusNotFound}
	if r.Found {
		if r.Value != receiptValue || r.Name == "" {
			return nil, protocol.Errorf(protocol.CodeInternal, "vault returned an inconsistent receipt")
		}
		name := r.Name
		out.Status, out.Name = protocol.SecretStatusApplied, &name
		// The binding holds while the revision the operation stored is
		// still the name's current, unexpired one: a later set, a delete,
		// expiry or a key rotation (which re-encrypts at a new revision)
		// ends it.
		out.CurrentBindingMatches = r.Live && r.Revision == r.CurrentRevision
	}
	return &sdk.Result{Payload: out}, nil
}

func main() {}
