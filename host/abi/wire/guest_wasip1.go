//go:build wasip1

package wire

// In a wasip1 guest (one thread; a decode never yields) one decoder is
// reused, and decoded strings share the input's bytes: a heap allocation
// costs about 1 µs there. The SDK never reuses or changes a buffer it
// decodes from (each invocation and host-call result gets its own).
const aliasStrings = true

var guestDecoder decoder

func newDecoder(in []byte) *decoder {
	guestDecoder = decoder{in: in}
	return &guestDecoder
}

var guestBinReader binReader

func newBinReader(in []byte) *binReader {
	guestBinReader = binReader{in: in}
	return &guestBinReader
}
