package wire

import (
	"math/bits"
	"unsafe"
)

// Scanning a byte at a time costs a loop iteration per byte, and in a Go
// wasm guest under wazero's deadline checks every loop iteration calls
// out of the compiled code (about 25 ns). These helpers look at 8 bytes
// per iteration instead (SWAR), so plain runs of a string cost an eighth.

const (
	lo8 = 0x0101010101010101
	hi8 = 0x8080808080808080
)

func load64(p unsafe.Pointer) uint64 { return *(*uint64)(p) } // little-endian on every port built for

// zeroBytes flags (high bit) each byte of x that is 0; the lowest flag is
// exact (borrows only disturb bytes above a zero byte).
func zeroBytes(x uint64) uint64 { return (x - lo8) & ^x & hi8 }

// decodeSpecial flags bytes a JSON string decoder must look at: '"', '\\',
// control bytes and non-ASCII bytes.
func decodeSpecial(x uint64) uint64 {
	return zeroBytes(x^(lo8*'"')) | zeroBytes(x^(lo8*'\\')) | ((x - lo8*0x20) & ^x & hi8) | (x & hi8)
}

// encodeSpecial flags bytes encoding/json's HTML-escaping string encoder
// does not copy as is: those of decodeSpecial and '<', '>', '&'.
func encodeSpecial(x uint64) uint64 {
	return decodeSpecial(x) | zeroBytes(x^(lo8*'<')) | zeroBytes(x^(lo8*'>')) | zeroBytes(x^(lo8*'&'))
}

// plainPrefix returns the index of the first byte of b[i:] that
// decodeSpecial flags, or len(b).
func plainPrefix(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		x := *(*uint64)(unsafe.Pointer(&b[i]))
		q, bs := x^(lo8*'"'), x^(lo8*'\\')
		if m := ((q-lo8)&^q | (bs-lo8)&^bs | (x-lo8*0x20)&^x | x) & hi8; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	if i < len(b) && len(b) >= 8 {
		// The tail as the last 8 bytes (overlapping ones already known
		// plain): one check instead of an iteration per byte.
		x := *(*uint64)(unsafe.Pointer(&b[len(b)-8]))
		q, bs := x^(lo8*'"'), x^(lo8*'\\')
		m := ((q-lo8)&^q | (bs-lo8)&^bs | (x-lo8*0x20)&^x | x) & hi8
		m &^= 1<<(uint(i-(len(b)-8))*8) - 1 // bytes before i are not asked about
		if m != 0 {
			return len(b) - 8 + bits.TrailingZeros64(m)>>3
		}
		return len(b)
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
			return i
		}
	}
	return i
}

// safePrefix returns the index of the first byte of s[i:] that
// encodeSpecial flags, or len(s).
func safePrefix(s string, i int) int {
	if len(s) == 0 {
		return 0
	}
	p := unsafe.Pointer(unsafe.StringData(s))
	for ; i+8 <= len(s); i += 8 {
		// encodeSpecial, written out: the call would cost more than the
		// arithmetic in a guest.
		x := *(*uint64)(unsafe.Add(p, i))
		q, bs, lt, gt, am := x^(lo8*'"'), x^(lo8*'\\'), x^(lo8*'<'), x^(lo8*'>'), x^(lo8*'&')
		m := ((q-lo8)&^q | (bs-lo8)&^bs | (lt-lo8)&^lt | (gt-lo8)&^gt | (am-lo8)&^am | (x-lo8*0x20)&^x | x) & hi8
		if m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	if i < len(s) && len(s) >= 8 {
		x := *(*uint64)(unsafe.Add(p, len(s)-8))
		q, bs, lt, gt, am := x^(lo8*'"'), x^(lo8*'\\'), x^(lo8*'<'), x^(lo8*'>'), x^(lo8*'&')
		m := ((q-lo8)&^q | (bs-lo8)&^bs | (lt-lo8)&^lt | (gt-lo8)&^gt | (am-lo8)&^am | (x-lo8*0x20)&^x | x) & hi8
		m &^= 1<<(uint(i-(len(s)-8))*8) - 1 // bytes before i are not asked about
		if m != 0 {
			return len(s) - 8 + bits.TrailingZeros64(m)>>3
		}
		return len(s)
	}
	for ; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || !htmlSafe[c] {
			return i
		}
	}
	return i
}

// appendUint is strconv.AppendUint(b, u, 10) with one loop iteration per
// digit and no call.
func appendUint(b []byte, u uint64) []byte {
	if u < 10 {
		return append(b, byte('0'+u))
	}
	var d [20]byte
	i := len(d)
	for u >= 100 {
		q := u / 100
		r := (u - q*100) * 2
		i -= 2
		d[i], d[i+1] = digitPairs[r], digitPairs[r+1]
		u = q
	}
	if u >= 10 {
		i -= 2
		d[i], d[i+1] = digitPairs[u*2], digitPairs[u*2+1]
	} else {
		i--
		d[i] = byte('0' + u)
	}
	return append(b, d[i:]...)
}

// appendInt is strconv.AppendInt(b, n, 10).
func appendInt(b []byte, n int64) []byte {
	if n < 0 {
		return appendUint(append(b, '-'), uint64(-n)) // -MinInt64 wraps to its own magnitude
	}
	return appendUint(b, uint64(n))
}

// digitPairs holds "00" to "99": two digits per loop iteration.
const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879" +
	"8081828384858687888990919293949596979899"
