package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// Default limits (DESIGN §2).
const (
	// DefaultMaxPayload is the largest frame, in bytes, a peer accepts by default.
	DefaultMaxPayload = 1 << 20
	// MaxJSONDepth is the deepest nesting of objects and arrays accepted.
	MaxJSONDepth = 32
	// MaxJSONItems is the most values (object members plus array elements) accepted in one frame.
	MaxJSONItems = 10000
	// DefaultTimeoutMs is the broker deadline of a node method, in ms.
	DefaultTimeoutMs = 30000
	// PingIntervalMs is how often nodes ping the controller, in ms.
	PingIntervalMs = 25000
)

var (
	ErrTooDeep      = errors.New("json nested too deeply")
	ErrTooManyItems = errors.New("json has too many items")
)

// CheckJSONLimits verifies that data is valid JSON within MaxJSONDepth and
// MaxJSONItems. It streams tokens and never builds the value.
func CheckJSONLimits(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	depth, items := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if depth != 0 {
				return io.ErrUnexpectedEOF
			}
			return nil
		}
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			if depth > MaxJSONDepth {
				return ErrTooDeep
			}
		case json.Delim('}'), json.Delim(']'):
			depth--
		default:
			items++
			if items > MaxJSONItems {
				return ErrTooManyItems
			}
		}
	}
}
