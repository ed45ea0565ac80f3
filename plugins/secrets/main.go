//go:build wasip1

// Command secrets is the module of the secrets family: node.secrets.set,
// list, delete and receipt (spec: execution-node-methods.md, "Write-only
// encrypted secrets" and "Reconciling a secret installation").
//
// The module validates params with the shared protocol checks, calls the
// vault host calls through their typed wrapper (plugins/sdk/vault) and shapes each payload exactly as the
// spec gives it. The secret value never enters this module's memory: the
// manifest declares value as an input blob, so the host removes it from
// params before the module runs and the module hands the vault only the
// blob's id. There is no get: nothing here can read a value back. The
// list of names does not enter this module either: the host builds the
// whole payload as a blob the module returns unread (JSON costs a wasm
// guest about 1 µs a byte; 500 names are ~20 KB).
package main

import (
	"lemon/plugins/sdk"
	"lemon/plugins/sdk/vault"
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

func set(req *sdk.Request) (*sdk.Result, error) {
	p, perr := protocol.DecodeSecretsSet(req.Params)
	if perr != nil {
		return nil, perr
	}
	if p.Value != nil {
		// Only a host that ignored the manifest could pass the value in
		// params; refuse rather than handle plaintext here.
		return nil, protocol.Errorf(protocol.CodeInternal, "value did not arrive as a host-side blob")
	}
	blob, ok := req.Blobs["value"]
	if !ok {
		return nil, protocol.InvalidParams("value", "value is required")
	}
	if perr := protocol.CheckSecretValueSize(blob.Size); perr != nil {
		return nil, perr
	}
	res, err := vault.Set(p.Name, blob.ID, p.OperationID)
	if err != nil {
		return nil, err
	}
	// Re-shape from known fields only: {name, set:true}, plus the
	// reconciliation fields when the request carried an operationId.
	out := protocol.SecretsSetResult{Name: res.Name, Set: true}
	if p.OperationID != nil {
		if res.OperationID != *p.OperationID || res.Status != protocol.SecretStatusApplied ||
			res.CurrentBindingMatches == nil || !*res.CurrentBindingMatches {
			return nil, protocol.Errorf(protocol.CodeInternal, "vault returned an inconsistent result")
		}
		out.OperationID, out.Status, out.CurrentBindingMatches = res.OperationID, res.Status, res.CurrentBindingMatches
	}
	return &sdk.Result{Payload: out}, nil
}

func list(req *sdk.Request) (*sdk.Result, error) {
	if _, perr := protocol.DecodeSecretsList(req.Params); perr != nil {
		return nil, perr
	}
	// The host shapes {names, limit:500, truncated} into a blob; the names
	// never cross guest JSON (docs/SECRETS.md, "Performance").
	res, err := vault.ListPayload()
	if err != nil {
		return nil, err
	}
	if res.PayloadBlob == 0 {
		return nil, protocol.Errorf(protocol.CodeInternal, "vault returned no payload")
	}
	return &sdk.Result{PayloadBlob: res.PayloadBlob}, nil
}

func del(req *sdk.Request) (*sdk.Result, error) {
	p, perr := protocol.DecodeSecretsDelete(req.Params)
	if perr != nil {
		return nil, perr
	}
	res, err := vault.Delete(p.Name)
	if err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: protocol.SecretsDeleteResult{Name: res.Name, Deleted: true}}, nil
}

func receipt(req *sdk.Request) (*sdk.Result, error) {
	p, perr := protocol.DecodeSecretsReceipt(req.Params)
	if perr != nil {
		return nil, perr
	}
	res, err := vault.Receipt(p.OperationID)
	if err != nil {
		return nil, err
	}
	// Exactly {nodeId, operationId, status, name, currentBindingMatches};
	// not_found always has name null and currentBindingMatches false.
	out := protocol.SecretsReceiptResult{NodeID: res.NodeID, OperationID: p.OperationID, Status: res.Status}
	switch res.Status {
	case protocol.SecretStatusApplied:
		if res.Name == nil {
			return nil, protocol.Errorf(protocol.CodeInternal, "vault returned an inconsistent result")
		}
		out.Name, out.CurrentBindingMatches = res.Name, res.CurrentBindingMatches
	case protocol.SecretStatusNotFound:
	default:
		return nil, protocol.Errorf(protocol.CodeInternal, "vault returned an inconsistent result")
	}
	return &sdk.Result{Payload: out}, nil
}

func main() {}
