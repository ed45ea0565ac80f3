//go:build !wasip1

package wire

// On the host decoded strings are copies (a host call's args must not be
// kept alive by a string taken from them).
const aliasStrings = false

func newDecoder(in []byte) *decoder { return &decoder{in: in} }

func newBinReader(in []byte) *binReader { return &binReader{in: in} }
