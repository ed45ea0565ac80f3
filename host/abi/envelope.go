package abi

import (
	"encoding/binary"
	"errors"
	"unsafe"

	"lemon/host/abi/wire"
	"lemon/protocol"
)

// The invocation and result envelopes are a compact binary layout
// (docs/ABI.md, "Invocation" and "Result"): little-endian u32 and u64,
// str = u32 length + bytes. Params, payloads, suspend state and error
// objects inside them stay JSON bytes, copied without being parsed.

// Result kinds, the first byte of a result envelope.
const (
	KindOK      = 0
	KindError   = 1
	KindSuspend = 2
)

// ErrMalformed is returned for an envelope that is truncated, has bytes
// left over, or holds an unknown kind.
var ErrMalformed = errors.New("abi: malformed envelope")

func appendU32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }

func appendStr[S ~string | ~[]byte](b []byte, s S) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}

// InputSize is the length in bytes of in's invocation envelope, so a
// caller can allocate it once (AppendInput).
func InputSize(in *Input) int {
	n := 4 + len(in.Method) + 4 + len(in.Params) + 4
	for f := range in.Blobs {
		n += 4 + len(f) + 4 + 8
	}
	n += 4 + len(in.Invocation.InvokeID) + 4 + len(in.Invocation.NodeID) + 8 + 4 + len(in.Invocation.ExecutionContext) + 1
	if in.Resume != nil {
		n += 4 + 4 + len(in.Resume.State)
	}
	return n
}

// AppendInput appends the invocation envelope of in:
//
//	str method, str params,
//	u32 n, n × (str field, u32 id, u64 size)   input blobs, sorted by field
//	str invokeId, str nodeId, u64 sessionGeneration, str executionContext
//	u8 resume (0 or 1), then when 1: u32 handle, str state
func AppendInput(b []byte, in *Input) []byte {
	b = appendStr(b, in.Method)
	b = appendStr(b, in.Params)
	b = appendU32(b, uint32(len(in.Blobs)))
	if len(in.Blobs) > 0 {
		fields := make([]string, 0, len(in.Blobs))
		for f := range in.Blobs {
			fields = append(fields, f)
		}
		for i := 1; i < len(fields); i++ {
			for j := i; j > 0 && fields[j] < fields[j-1]; j-- {
				fields[j], fields[j-1] = fields[j-1], fields[j]
			}
		}
		for _, f := range fields {
			bl := in.Blobs[f]
			b = appendStr(b, f)
			b = appendU32(b, bl.ID)
			b = binary.LittleEndian.AppendUint64(b, uint64(bl.Size))
		}
	}
	b = appendStr(b, in.Invocation.InvokeID)
	b = appendStr(b, in.Invocation.NodeID)
	b = binary.LittleEndian.AppendUint64(b, in.Invocation.SessionGeneration)
	b = appendStr(b, in.Invocation.ExecutionContext)
	if in.Resume == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = appendU32(b, in.Resume.Handle)
	return appendStr(b, in.Resume.State)
}

// reader reads an envelope; any overrun sets bad.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) u8() byte {
	if len(r.b) < 1 {
		r.bad = true
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u32() uint32 {
	if len(r.b) < 4 {
		r.bad = true
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) u64() uint64 {
	if len(r.b) < 8 {
		r.bad = true
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// bytes returns the next str, aliasing the envelope; nil when empty.
func (r *reader) bytes() []byte {
	n := r.u32()
	if r.bad || uint64(n) > uint64(len(r.b)) {
		r.bad = true
		return nil
	}
	if n == 0 {
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// str returns the next str as a string sharing the envelope's bytes.
func (r *reader) str() string {
	b := r.bytes()
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// DecodeInput decodes an invocation envelope into in. Everything in it
// (strings included) aliases b, which must not change afterwards: the SDK
// gets a fresh buffer per invocation, and an allocation costs about 1 µs
// in a guest.
func DecodeInput(b []byte, in *Input) error {
	r := reader{b: b}
	in.Method = r.str()
	in.Params = r.bytes()
	n := r.u32()
	if uint64(n) > uint64(len(r.b))/16 {
		return ErrMalformed
	}
	if n > 0 {
		// A map the caller left in in is emptied and reused (the guest
		// SDK's Request: a map costs about 1.3 µs in a guest).
		if in.Blobs == nil {
			in.Blobs = make(map[string]Blob, n)
		} else {
			clear(in.Blobs)
		}
		for i := uint32(0); i < n && !r.bad; i++ {
			f := r.str()
			in.Blobs[f] = Blob{ID: r.u32(), Size: int(r.u64())}
		}
	} else if len(in.Blobs) > 0 {
		clear(in.Blobs) // no entry of an earlier invocation survives
	}
	in.Invocation.InvokeID = r.str()
	in.Invocation.NodeID = r.str()
	in.Invocation.SessionGeneration = r.u64()
	in.Invocation.ExecutionContext = r.bytes()
	switch r.u8() {
	case 0:
		in.Resume = nil
	case 1:
		in.Resume = &Resume{Handle: r.u32(), State: r.bytes()}
	default:
		return ErrMalformed
	}
	if r.bad || len(r.b) != 0 {
		return ErrMalformed
	}
	return nil
}

// AppendOK starts a success result envelope: u8 KindOK, u32 payloadBlob,
// then the payload str, whose bytes the caller appends next and closes
// with EndPayload. at is where the payload length goes.
//
//	u8 0, u32 payloadBlob, str payload (JSON, or empty),
//	u32 n, n × (str field, u32 blob)   output blobs
func AppendOK(b []byte, payloadBlob uint32) (out []byte, at int) {
	b = append(b, KindOK)
	b = appendU32(b, payloadBlob)
	at = len(b)
	return appendU32(b, 0), at
}

// EndPayload sets the payload length of a result begun with AppendOK and
// appends the output blobs.
func EndPayload(b []byte, at int, blobs map[string]uint32) []byte {
	binary.LittleEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	b = appendU32(b, uint32(len(blobs)))
	if len(blobs) == 0 {
		return b // ranging over even a nil map calls the runtime
	}
	for f, id := range blobs {
		b = appendStr(b, f)
		b = appendU32(b, id)
	}
	return b
}

// AppendError appends a failure result envelope: u8 KindError, str error
// (the protocol error object as JSON).
func AppendError(b []byte, e *protocol.Error) []byte {
	b = append(b, KindError)
	at := len(b)
	b = appendU32(b, 0)
	b, _ = wire.Append(b, e) // a protocol.Error always encodes
	binary.LittleEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// AppendSuspend appends a suspension: u8 KindSuspend, u32 handle, str
// state (JSON, or empty).
func AppendSuspend(b []byte, handle uint32, state []byte) []byte {
	b = append(b, KindSuspend)
	b = appendU32(b, handle)
	return appendStr(b, state)
}

// DecodeOutput decodes a result envelope. Payload and suspend state alias
// b; the payload is not checked here (the host compacts and checks it).
func DecodeOutput(b []byte) (*Output, error) {
	r := reader{b: b}
	out := &Output{}
	switch r.u8() {
	case KindOK:
		out.OK = true
		out.PayloadBlob = r.u32()
		out.Payload = r.bytes()
		n := r.u32()
		if uint64(n) > uint64(len(r.b))/8 {
			return nil, ErrMalformed
		}
		if n > 0 {
			out.Blobs = make(map[string]uint32, n)
			for i := uint32(0); i < n && !r.bad; i++ {
				f := string(r.bytes())
				if _, dup := out.Blobs[f]; dup {
					return nil, ErrMalformed
				}
				out.Blobs[f] = r.u32()
			}
		}
	case KindError:
		raw := r.bytes()
		if r.bad {
			return nil, ErrMalformed
		}
		var e protocol.Error
		if err := wire.Unmarshal(raw, &e); err != nil {
			return nil, ErrMalformed
		}
		out.Error = &e
	case KindSuspend:
		out.Suspend = &Suspend{Handle: r.u32(), State: r.bytes()}
	default:
		return nil, ErrMalformed
	}
	if r.bad || len(r.b) != 0 {
		return nil, ErrMalformed
	}
	return out, nil
}
