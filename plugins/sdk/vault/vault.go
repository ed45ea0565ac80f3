// Package vault is the typed guest wrapper of the vault host calls
// (docs/HOSTCALLS.md): a write-only encrypted store of the node. Values
// enter as input blobs and nothing reads them back. All need capability
// "secrets"; list the calls used in the manifest's HostCalls. Errors are
// *protocol.Error values.
package vault

import (
	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
)

// Set stores the bytes of input blob valueBlob under name (vault.set);
// operationID, when not nil, records a receipt Receipt can query.
func Set(name string, valueBlob uint32, operationID *string) (contract.VaultSetResult, error) {
	return sdk.Invoke(vaultSet, contract.VaultSet, contract.VaultSetArgs{Name: name, ValueBlob: &valueBlob, OperationID: operationID})
}

// List returns the secret names, at most 500 (vault.list).
func List() (contract.VaultListResult, error) {
	return sdk.Invoke(vaultList, contract.VaultList, contract.Empty{})
}

// ListPayload is List as a blob holding the whole node.secrets.list
// payload (vault.list_payload); return its id unread as
// sdk.Result.PayloadBlob.
func ListPayload() (contract.PayloadResult, error) {
	return sdk.Invoke(vaultListPayload, contract.VaultListPayload, contract.Empty{})
}

// Delete deletes the secret name (vault.delete); a missing name succeeds.
func Delete(name string) (contract.VaultDeleteResult, error) {
	return sdk.Invoke(vaultDelete, contract.VaultDelete, contract.VaultDeleteArgs{Name: name})
}

// Receipt returns this node's receipt of operationID (vault.receipt).
func Receipt(operationID string) (contract.VaultReceiptResult, error) {
	return sdk.Invoke(vaultReceipt, contract.VaultReceipt, contract.VaultReceiptArgs{OperationID: operationID})
}
