package protocol

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Write-only secrets (spec: execution-node-methods.md, "Write-only encrypted
// secrets" and "Reconciling a secret installation"). The controller runs
// these checks before dispatch, the secrets module again on the node, and
// hostcalls/vault a third time at the trust boundary, all from this file.

// Methods of the secrets family.
const (
	MethodSecretsSet     = "node.secrets.set"
	MethodSecretsList    = "node.secrets.list"
	MethodSecretsDelete  = "node.secrets.delete"
	MethodSecretsReceipt = "node.secrets.receipt"
)

// Limits of the secrets family.
const (
	// SecretNameMaxBytes bounds a name, in UTF-8 bytes, as supplied (before
	// trimming; see CheckSecretName).
	SecretNameMaxBytes = 256
	// SecretValueMaxBytes bounds a value, in UTF-8 bytes (1 MiB).
	SecretValueMaxBytes = 1 << 20
	// SecretOperationIDMaxLen bounds an operationId, in ASCII characters.
	SecretOperationIDMaxLen = 128
	// SecretListLimit is the most names node.secrets.list returns.
	SecretListLimit = 500
	// SecretReceiptsPerName is the most receipts the vault keeps per name,
	// deleted names included.
	SecretReceiptsPerName = 128
	// SecretReservedPrefix starts the reserved invocation-proof names
	// lemon_bot/invocations/<runId>.
	SecretReservedPrefix = "lemon_bot/invocations/"
)

// Receipt statuses.
const (
	SecretStatusApplied  = "applied"
	SecretStatusNotFound = "not_found"
)

// Domain codes of the vault that are not spec codes. They classify
// failures of the node's own store; none carries request content.
const (
	// DomainVaultUnavailable: the vault could not be read or written (I/O
	// failure, closed vault). With mutationMayHaveApplied the caller
	// reconciles through node.secrets.receipt.
	DomainVaultUnavailable = "vault_unavailable"
	// DomainVaultCorrupt: a stored record failed authentication.
	DomainVaultCorrupt = "vault_corrupt"
	// DomainReservedSecretName: a reserved invocation-proof name without the
	// matching operationId.
	DomainReservedSecretName = "reserved_secret_name"
)

// SecretsSetParams are the params of node.secrets.set. On the controller
// Value holds the secret; on the node the host has already moved value into
// an input blob (docs/ABI.md), so Value is nil there and the module passes
// the blob id to the vault instead. OperationID is nil when absent.
type SecretsSetParams struct {
	NodeID      string  `json:"nodeId"`
	Name        string  `json:"name"`
	Value       *string `json:"value,omitempty"`
	OperationID *string `json:"operationId,omitempty"`
}

// SecretsListParams are the params of node.secrets.list.
type SecretsListParams struct {
	NodeID string `json:"nodeId"`
}

// SecretsDeleteParams are the params of node.secrets.delete.
type SecretsDeleteParams struct {
	NodeID string `json:"nodeId"`
	Name   string `json:"name"`
}

// SecretsReceiptParams are the params of node.secrets.receipt.
type SecretsReceiptParams struct {
	NodeID      string `json:"nodeId"`
	OperationID string `json:"operationId"`
}

// SecretsSetResult is the payload of node.secrets.set: {name, set:true},
// plus {operationId, status:"applied", currentBindingMatches:true} when the
// request carried an operationId. Name is the stored (trimmed) name.
type SecretsSetResult struct {
	Name                  string `json:"name"`
	Set                   bool   `json:"set"`
	OperationID           string `json:"operationId,omitempty"`
	Status                string `json:"status,omitempty"`
	CurrentBindingMatches *bool  `json:"currentBindingMatches,omitempty"`
}

// SecretsListResult is the payload of node.secrets.list: sorted names (at
// most Limit), Limit = 500, and Truncated when more names exist.
type SecretsListResult struct {
	Names     []string `json:"names"`
	Limit     int      `json:"limit"`
	Truncated bool     `json:"truncated"`
}

// SecretsDeleteResult is the payload of node.secrets.delete: {name, deleted:true}.
type SecretsDeleteResult struct {
	Name    string `json:"name"`
	Deleted bool   `json:"deleted"`
}

// SecretsReceiptResult is exactly the payload of node.secrets.receipt:
// {nodeId, operationId, status, name, currentBindingMatches}; not_found has
// name:null and currentBindingMatches:false.
type SecretsReceiptResult struct {
	NodeID                string  `json:"nodeId"`
	OperationID           string  `json:"operationId"`
	Status                string  `json:"status"`
	Name                  *string `json:"name"`
	CurrentBindingMatches bool    `json:"currentBindingMatches"`
}

// CheckSecretName validates a name as supplied and returns the stored form.
// The spec's limits (nonempty UTF-8, at most 256 bytes, no NUL) apply to
// the string the caller sent, because trimming belongs to the vault behind
// the facade; trimming only shortens, so the stored name meets them too.
// A name that is empty after trimming (only whitespace) cannot be stored
// and is refused as well. Trimming removes leading and trailing Unicode
// white space (strings.TrimSpace). Errors name the field, never the value.
func CheckSecretName(raw string) (string, *Error) {
	if raw == "" {
		return "", InvalidParams("name", "name is required")
	}
	if len(raw) > SecretNameMaxBytes {
		return "", InvalidParams("name", "name exceeds 256 bytes")
	}
	if !utf8.ValidString(raw) {
		return "", InvalidParams("name", "name is not valid UTF-8")
	}
	if strings.IndexByte(raw, 0) >= 0 {
		return "", InvalidParams("name", "name contains NUL")
	}
	name := strings.TrimSpace(raw)
	if name == "" {
		return "", InvalidParams("name", "name is empty after trimming white space")
	}
	return name, nil
}

// CheckSecretOperationID validates an operationId: 1–128 ASCII letters,
// digits, '_', ':' or '-'. It is never trimmed.
func CheckSecretOperationID(id string) *Error {
	if id == "" {
		return InvalidParams("operationId", "operationId must not be empty")
	}
	if len(id) > SecretOperationIDMaxLen {
		return InvalidParams("operationId", "operationId exceeds 128 characters")
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == ':', c == '-':
		default:
			return InvalidParams("operationId", "operationId may hold only ASCII letters, digits, '_', ':' and '-'")
		}
	}
	return nil
}

// CheckSecretValueSize validates a value's size in bytes (at most 1 MiB).
func CheckSecretValueSize(n int) *Error {
	if n > SecretValueMaxBytes {
		return InvalidParams("value", "value exceeds 1 MiB")
	}
	return nil
}

// ReservedSecretRunID reports whether a stored (trimmed) name is a reserved
// invocation proof lemon_bot/invocations/<runId>, and returns <runId>.
func ReservedSecretRunID(name string) (runID string, reserved bool) {
	if !strings.HasPrefix(name, SecretReservedPrefix) {
		return "", false
	}
	return name[len(SecretReservedPrefix):], true
}

// CheckReservedSecretName enforces the reserved-name rule on a stored
// (trimmed) name: a name under lemon_bot/invocations/ needs an operationId
// equal to its <runId>. opID is nil when the request had none. Other names
// pass. Callers run it before touching the vault.
func CheckReservedSecretName(name string, opID *string) *Error {
	runID, reserved := ReservedSecretRunID(name)
	if !reserved {
		return nil
	}
	if runID == "" || opID == nil || *opID != runID {
		return &Error{Code: CodeInvalidParams,
			Message: "a reserved invocation-proof name needs operationId equal to its run id",
			Details: &ErrorDetails{Code: DomainReservedSecretName, Field: "operationId"}}
	}
	return nil
}

// DecodeSecretsSet strictly decodes and validates node.secrets.set params:
// nodeId, name, operationId (when present), the reserved-name rule, and the
// value's size when present. It does not require value, which the node
// receives as a blob; the controller's Validate requires it.
func DecodeSecretsSet(params json.RawMessage) (SecretsSetParams, *Error) {
	var p SecretsSetParams
	if err := DecodeParams(params, &p); err != nil {
		return p, err
	}
	if err := RequireNodeID(p.NodeID); err != nil {
		return p, err
	}
	name, err := CheckSecretName(p.Name)
	if err != nil {
		return p, err
	}
	if p.OperationID != nil {
		if err := CheckSecretOperationID(*p.OperationID); err != nil {
			return p, err
		}
	}
	if err := CheckReservedSecretName(name, p.OperationID); err != nil {
		return p, err
	}
	if p.Value != nil {
		if err := CheckSecretValueSize(len(*p.Value)); err != nil {
			return p, err
		}
	}
	return p, nil
}

// DecodeSecretsList strictly decodes node.secrets.list params.
func DecodeSecretsList(params json.RawMessage) (SecretsListParams, *Error) {
	var p SecretsListParams
	if err := DecodeParams(params, &p); err != nil {
		return p, err
	}
	return p, RequireNodeID(p.NodeID)
}

// DecodeSecretsDelete strictly decodes node.secrets.delete params.
func DecodeSecretsDelete(params json.RawMessage) (SecretsDeleteParams, *Error) {
	var p SecretsDeleteParams
	if err := DecodeParams(params, &p); err != nil {
		return p, err
	}
	if err := RequireNodeID(p.NodeID); err != nil {
		return p, err
	}
	_, err := CheckSecretName(p.Name)
	return p, err
}

// DecodeSecretsReceipt strictly decodes node.secrets.receipt params.
func DecodeSecretsReceipt(params json.RawMessage) (SecretsReceiptParams, *Error) {
	var p SecretsReceiptParams
	if err := DecodeParams(params, &p); err != nil {
		return p, err
	}
	if err := RequireNodeID(p.NodeID); err != nil {
		return p, err
	}
	return p, CheckSecretOperationID(p.OperationID)
}

// validateSecretsSet is the controller-side check: everything
// DecodeSecretsSet checks, and value must be present.
func validateSecretsSet(params json.RawMessage) *Error {
	p, err := DecodeSecretsSet(params)
	if err != nil {
		return err
	}
	if p.Value == nil {
		return InvalidParams("value", "value is required")
	}
	return nil
}

// SecretsSetNeedsRecheck reports whether a node.secrets.set names a
// reserved invocation proof (after trimming), for which the controller
// re-checks the node's connection and session generation after the reply
// (MethodSpec.RecheckSession). It reads only the name.
func SecretsSetNeedsRecheck(params json.RawMessage) bool {
	var p struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	_, reserved := ReservedSecretRunID(strings.TrimSpace(p.Name))
	return reserved
}

func init() {
	RegisterMethod(MethodSpec{Name: MethodSecretsSet, Version: 1,
		Validate:       validateSecretsSet,
		RecheckSession: SecretsSetNeedsRecheck})
	RegisterMethod(MethodSpec{Name: MethodSecretsList, Version: 1,
		Validate: func(p json.RawMessage) *Error { _, err := DecodeSecretsList(p); return err }})
	RegisterMethod(MethodSpec{Name: MethodSecretsDelete, Version: 1,
		Validate: func(p json.RawMessage) *Error { _, err := DecodeSecretsDelete(p); return err }})
	RegisterMethod(MethodSpec{Name: MethodSecretsReceipt, Version: 1,
		Validate: func(p json.RawMessage) *Error { _, err := DecodeSecretsReceipt(p); return err }})
}
