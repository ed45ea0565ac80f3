package protocol

import (
	"encoding/binary"
	"errors"
	"strconv"
)

// Default limits (docs/PROTOCOL.md).
const (
	// DefaultMaxPayload is the largest frame, in bytes, a peer accepts by default.
	DefaultMaxPayload = 1 << 20
	// MaxJSONDepth is the deepest nesting of objects and arrays accepted.
	MaxJSONDepth = 32
	// MaxJSONItems is the most items accepted in one frame, where an item is
	// a scalar value (string, number, true, false, null) or an object key.
	// Objects and arrays themselves are not items: {"a":[1,2]} holds 3.
	MaxJSONItems = 10000
	// DefaultTimeoutMs is the broker deadline of a node method, in ms.
	DefaultTimeoutMs = 30000
	// PingIntervalMs is how often nodes ping the controller, in ms.
	PingIntervalMs = 25000
)

// RelayReserve is the room, in bytes, a budgeted result payload keeps for
// the controller's res frame that relays it to the operator: that frame's
// envelope with a request id of up to 128 bytes, JSON-escaped, can be
// longer than the node.invoke.result envelope around the same payload.
const RelayReserve = 1024

// Base64Budget returns the largest decoded byte count n such that every
// split of n bytes over fields standard-base64 strings (fields >= 1)
// encodes to at most room bytes of string content. A string of a bytes
// takes 4*ceil(a/3) characters, so the worst split of n >= fields bytes
// takes 4*floor((n+2*fields)/3), and of fewer bytes 4*n. It returns 0 when
// room holds no byte. Results that carry base64 (process output, file
// chunks) size their bytes with it, from the invocation's MaxResultBytes
// less the room their other fields need.
func Base64Budget(room, fields int) int {
	fields = max(fields, 1)
	if room < 4 {
		return 0
	}
	quanta := room / 4
	if n := 3*quanta + 2 - 2*fields; n >= fields {
		return n
	}
	return min(quanta, fields-1)
}

var (
	// ErrTooDeep: objects and arrays nest deeper than MaxJSONDepth.
	ErrTooDeep = errors.New("json nested too deeply")
	// ErrTooManyItems: the document holds more than MaxJSONItems items.
	ErrTooManyItems = errors.New("json has too many items")
	// ErrInvalidJSON: the input is not exactly one JSON value.
	ErrInvalidJSON = errors.New("json is not valid")
)

// CheckJSONLimits verifies that data is exactly one valid JSON value (RFC
// 8259, surrounding whitespace allowed, the same inputs json.Valid accepts)
// that nests objects and arrays at most MaxJSONDepth deep and holds at most
// MaxJSONItems items (scalars plus object keys; see MaxJSONItems). Numbers
// whose magnitude overflows float64 (1e400) are refused too, as
// encoding/json refuses them when decoding into an interface value.
//
// It makes one pass over data, allocates nothing and builds no value. The
// input is checked front to back and the first problem met decides the
// error: ErrTooDeep at the first opening bracket past the depth limit,
// ErrTooManyItems at the first item past the item limit, ErrInvalidJSON for
// anything else (bad syntax, truncation, empty input, a second top-level
// value). Invalid UTF-8 inside strings is accepted, as json.Valid does.
// Callers branch on ErrTooDeep and ErrTooManyItems (domain code
// json_limits_exceeded, docs/PROTOCOL.md); every other refusal is malformed JSON.
func CheckJSONLimits(data []byte) error {
	return checkLimits(data, MaxJSONDepth, MaxJSONItems)
}

// checkLimits is CheckJSONLimits with the limits as parameters, so tests
// can reach both limits with small inputs. maxDepth must be at most 64.
func checkLimits(data []byte, maxDepth, maxItems int) error {
	n := len(data)
	i := skipSpace(data, 0)
	depth := 0
	var objects uint64 // bit d-1 set: the container at depth d is an object
	items := 0

value: // a value must start at data[i]
	if i >= n {
		return ErrInvalidJSON
	}
	switch c := data[i]; c {
	case '{', '[':
		depth++
		if depth > maxDepth {
			return ErrTooDeep
		}
		i = skipSpace(data, i+1)
		if c == '{' {
			objects |= 1 << (depth - 1)
			if i < n && data[i] == '}' {
				i++
				depth--
				goto next
			}
			goto key
		}
		objects &^= 1 << (depth - 1)
		if i < n && data[i] == ']' {
			i++
			depth--
			goto next
		}
		goto value
	case '"':
		var ok bool
		if i, ok = scanString(data, i+1); !ok {
			return ErrInvalidJSON
		}
	case 't':
		if !hasLiteral(data, i, "true") {
			return ErrInvalidJSON
		}
		i += 4
	case 'f':
		if !hasLiteral(data, i, "false") {
			return ErrInvalidJSON
		}
		i += 5
	case 'n':
		if !hasLiteral(data, i, "null") {
			return ErrInvalidJSON
		}
		i += 4
	default:
		var ok bool
		if i, ok = scanNumber(data, i); !ok {
			return ErrInvalidJSON
		}
	}
	items++
	if items > maxItems {
		return ErrTooManyItems
	}
	goto next

key: // an object key must start at data[i]
	if i >= n || data[i] != '"' {
		return ErrInvalidJSON
	}
	{
		var ok bool
		if i, ok = scanString(data, i+1); !ok {
			return ErrInvalidJSON
		}
	}
	items++
	if items > maxItems {
		return ErrTooManyItems
	}
	i = skipSpace(data, i)
	if i >= n || data[i] != ':' {
		return ErrInvalidJSON
	}
	i = skipSpace(data, i+1)
	goto value

next: // a value ended just before data[i]
	i = skipSpace(data, i)
	if depth == 0 {
		if i == n {
			return nil
		}
		return ErrInvalidJSON
	}
	if i >= n {
		return ErrInvalidJSON
	}
	if objects&(1<<(depth-1)) != 0 {
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
			goto key
		case '}':
			i++
			depth--
			goto next
		}
		return ErrInvalidJSON
	}
	switch data[i] {
	case ',':
		i = skipSpace(data, i+1)
		goto value
	case ']':
		i++
		depth--
		goto next
	}
	return ErrInvalidJSON
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace (space, tab, LF, CR), or len(data).
func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// hasLiteral reports whether data[i:] starts with lit.
func hasLiteral(data []byte, i int, lit string) bool {
	return len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit
}

// SWAR constants for scanning eight string bytes at a time.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// scanString scans a string body starting just after its opening quote and
// returns the index just past the closing quote. It refuses control bytes
// below 0x20, bad escapes and a missing closing quote; other bytes,
// including invalid UTF-8, pass.
func scanString(data []byte, i int) (int, bool) {
	n := len(data)
	for {
		// Fast path: skip eight plain bytes at a time. A word is plain when
		// no byte is below 0x20, a quote or a backslash. These are the
		// exact word tests "some byte < k": (w-k*lsb) &^ w & msb, and
		// "some byte is zero" applied to w^quotes and w^backslashes, merged:
		// the three words agree on every byte's top bit because the XOR
		// constants are ASCII, so one &^w serves all three.
		for n-i >= 8 {
			w := binary.LittleEndian.Uint64(data[i:])
			q := w ^ (lsb * '"')
			b := w ^ (lsb * '\\')
			if ((w-lsb*0x20)|(q-lsb)|(b-lsb))&^w&msb != 0 {
				break
			}
			i += 8
		}
		if i >= n {
			return i, false
		}
		c := data[i]
		switch {
		case c == '"':
			return i + 1, true
		case c == '\\':
			i++
			if i >= n {
				return i, false
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if n-i < 5 || !isHex(data[i+1]) || !isHex(data[i+2]) || !isHex(data[i+3]) || !isHex(data[i+4]) {
					return i, false
				}
				i += 5
			default:
				return i, false
			}
		case c < 0x20:
			return i, false
		default:
			i++
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// scanNumber scans a number starting at data[i] and returns the index just
// past it. The number ends at the first byte that cannot continue it; what
// follows is the caller's to judge. Grammar (RFC 8259 §6):
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. A number that overflows
// float64 is refused.
func scanNumber(data []byte, i int) (int, bool) {
	n := len(data)
	start := i
	if data[i] == '-' {
		i++
		if i >= n {
			return i, false
		}
	}
	intStart := i
	switch {
	case data[i] == '0':
		i++
	case '1' <= data[i] && data[i] <= '9':
		i++
		for i < n && isDigit(data[i]) {
			i++
		}
	default:
		return i, false
	}
	intDigits := i - intStart
	if i < n && data[i] == '.' {
		i++
		if i >= n || !isDigit(data[i]) {
			return i, false
		}
		for i < n && isDigit(data[i]) {
			i++
		}
	}
	hasExp := false
	if i < n && (data[i] == 'e' || data[i] == 'E') {
		hasExp = true
		i++
		if i < n && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= n || !isDigit(data[i]) {
			return i, false
		}
		for i < n && isDigit(data[i]) {
			i++
		}
	}
	// Without an exponent, fewer than 309 integer digits keep the magnitude
	// under 1e308 < MaxFloat64, so only the rare remaining numbers are parsed.
	if hasExp || intDigits > 308 {
		if _, err := strconv.ParseFloat(string(data[start:i]), 64); err != nil {
			return i, false
		}
	}
	return i, true
}
