// Package shape writes the secrets module's node.secrets.set payload
// (spec "Write-only encrypted secrets") by hand: the bytes json.Marshal
// gives for protocol.SecretsSetResult, without the SDK codec's per-field
// dispatch and allocations, which cost about 1.2 µs per set in a guest
// (docs/BENCHMARKS.md, "Module ABI (issue 11): secrets"). Standard library
// and lemon packages only: it compiles for wasip1 and is tested natively.
package shape

import (
	"lemon/host/abi/wire"
	"lemon/plugins/sdk"
	"lemon/protocol"
)

// AppendSetResult appends the payload of a successful set of name: with
// an operationID (non-empty) it carries operationId, status "applied" and
// currentBindingMatches true, as protocol.SecretsSetResult marshals.
func AppendSetResult(b []byte, name, operationID string) []byte {
	b = append(b, `{"name":`...)
	b = wire.AppendString(b, name)
	b = append(b, `,"set":true`...)
	if operationID != "" {
		b = append(b, `,"operationId":`...)
		b = wire.AppendString(b, operationID)
		b = append(b, `,"status":"`+protocol.SecretStatusApplied+`","currentBindingMatches":true`...)
	}
	return append(b, '}')
}

// SetParams reads node.secrets.set's params of the plain shape
// (sdk.PlainStrings: string members nodeId, name and operationId, no
// escapes or white space); ok false means decode strictly instead.
func SetParams(b []byte) (nodeID, name string, operationID *string, ok bool) {
	var vals [3]string
	present, ok := sdk.PlainStrings(b, setKeys[:], vals[:])
	if !ok {
		return "", "", nil, false
	}
	if present&4 != 0 {
		operationID = &vals[2]
	}
	return vals[0], vals[1], operationID, true
}

var setKeys = [3]string{"nodeId", "name", "operationId"}
