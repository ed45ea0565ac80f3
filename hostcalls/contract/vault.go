package contract

import "lemon/protocol"

// Argument and result types of the vault host calls. Operation ids are
// scoped to the authenticated node of the invocation. No result carries
// plaintext, ciphertext, nonces, salts or tags.
type (
	// VaultSetArgs are the args of vault.set. ValueBlob is the id of the
	// input blob the host decoded from the request's value field: the
	// plaintext never enters module memory.
	VaultSetArgs struct {
		Name        string  `json:"name"`
		ValueBlob   *uint32 `json:"valueBlob" doc:"id of the value input blob"`
		OperationID *string `json:"operationId,omitempty" doc:"records a receipt vault.receipt can query"`
	}
	// VaultDeleteArgs are the args of vault.delete.
	VaultDeleteArgs struct {
		Name string `json:"name"`
	}
	// VaultReceiptArgs are the args of vault.receipt.
	VaultReceiptArgs struct {
		OperationID string `json:"operationId"`
	}

	// VaultSetResult is the result of vault.set.
	VaultSetResult = protocol.SecretsSetResult
	// VaultListResult is the result of vault.list.
	VaultListResult = protocol.SecretsListResult
	// VaultDeleteResult is the result of vault.delete.
	VaultDeleteResult = protocol.SecretsDeleteResult
	// VaultReceiptResult is the result of vault.receipt.
	VaultReceiptResult = protocol.SecretsReceiptResult
)

// The vault host calls, all under capability "secrets".
var (
	VaultSet         = Call[VaultSetArgs, VaultSetResult]{"vault.set"}
	VaultList        = Call[Empty, VaultListResult]{"vault.list"}
	VaultListPayload = Call[Empty, PayloadResult]{"vault.list_payload"}
	VaultDelete      = Call[VaultDeleteArgs, VaultDeleteResult]{"vault.delete"}
	VaultReceipt     = Call[VaultReceiptArgs, VaultReceiptResult]{"vault.receipt"}
)

func vaultSpecs() []Spec {
	return []Spec{
		spec(VaultSet, "Encrypts and stores the value blob under name, recording operationId's receipt when given."),
		spec(VaultList, "The secret names (at most 500). Kept for secrets modules before 1.1.0; use vault.list_payload."),
		spec(VaultListPayload, "vault.list, as a whole node.secrets.list payload in an invocation blob."),
		spec(VaultDelete, "Deletes one secret."),
		spec(VaultReceipt, "The receipt of an earlier vault.set with an operationId, for this node."),
	}
}
