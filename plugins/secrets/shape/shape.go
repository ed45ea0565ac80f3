// Package shape writes the secrets module's node.secrets.set payload
// (spec "Write-only encrypted secrets") by hand: the bytes json.Marshal
// gives for protocol.SecretsSetResult, without the SDK codec's per-field
// dispatch and allocations, which cost about 1.2 µs per set in a guest
// (docs/BENCHMARKS.md, "Module ABI (issue 11): secrets"). Standard library
// and lemon packages only: it compiles for wasip1 and is tested natively.
package shape

import (
	"lemon/host/abi/wire"
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

// SetParams is the fast path of node.secrets.set's params: it reads
// params of the plain shape a client sends — one JSON object of string
// members nodeId, name and operationId (each at most once, in any order,
// no white space), whose values hold only printable ASCII other than \
// and " — and reports ok. Anything else (white space, escapes, non-ASCII,
// another member such as value, a repeated member, a null) is not ok:
// the caller then decodes strictly with the SDK (req.Decode), which
// answers it exactly as protocol.DecodeParams does. For input it accepts
// it gives what that decode gives.
func SetParams(b []byte) (nodeID, name string, operationID *string, ok bool) {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return "", "", nil, false
	}
	i := 1
	var seen [3]bool
	if b[i] == '}' {
		return "", "", nil, i+1 == len(b)
	}
	for {
		key, n, kok := plainString(b, i)
		if !kok || n >= len(b) || b[n] != ':' {
			return "", "", nil, false
		}
		val, m, vok := plainString(b, n+1)
		if !vok || m >= len(b) {
			return "", "", nil, false
		}
		switch key {
		case "nodeId":
			if seen[0] {
				return "", "", nil, false
			}
			seen[0], nodeID = true, val
		case "name":
			if seen[1] {
				return "", "", nil, false
			}
			seen[1], name = true, val
		case "operationId":
			if seen[2] {
				return "", "", nil, false
			}
			seen[2], operationID = true, &val
		default:
			return "", "", nil, false
		}
		switch b[m] {
		case ',':
			i = m + 1
		case '}':
			return nodeID, name, operationID, m+1 == len(b)
		default:
			return "", "", nil, false
		}
	}
}

// plainString reads a JSON string at b[i] holding only printable ASCII
// other than \ (no escapes needed) and returns it and the index after it.
func plainString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(b); j++ {
		c := b[j]
		if c == '"' {
			return string(b[i+1 : j]), j + 1, true
		}
		if c < 0x20 || c >= 0x7f || c == '\\' {
			return "", 0, false
		}
	}
	return "", 0, false
}
