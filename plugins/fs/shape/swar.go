package shape

import (
	"encoding/binary"
	"math/bits"
)

// In a Go wasm guest under wazero's deadline checks every loop iteration
// costs a call out of the compiled code (about 25 ns), so the hot loops
// here look at 8 bytes per iteration (SWAR) instead of one.

const (
	lo8 = 0x0101010101010101
	hi8 = 0x8080808080808080
)

// zeroBytes flags (high bit) each byte of x that is 0; the lowest flag is
// exact.
func zeroBytes(x uint64) uint64 { return (x - lo8) & ^x & hi8 }

// special flags the bytes AppendString does not copy as is: '"', '\\',
// '<', '>', '&', control bytes and non-ASCII bytes.
func special(x uint64) uint64 {
	return zeroBytes(x^(lo8*'"')) | zeroBytes(x^(lo8*'\\')) | zeroBytes(x^(lo8*'<')) | zeroBytes(x^(lo8*'>')) |
		zeroBytes(x^(lo8*'&')) | ((x - lo8*0x20) & ^x & hi8) | (x & hi8)
}

// load8 reads s[i:i+8] little-endian.
func load8[S ~string | ~[]byte](s S, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// plainFrom returns the index of the first byte at or after i that may
// not be copied as is, scanning 8 bytes at a time; it stops early (at a
// multiple of 8 from i) when fewer than 8 bytes are left.
func plainFrom[S ~string | ~[]byte](s S, i int) int {
	for ; i+8 <= len(s); i += 8 {
		if m := special(load8(s, i)); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	if i < len(s) && len(s) >= 8 {
		// The tail as the last 8 bytes (those before i already known
		// plain): one check instead of a loop iteration per byte.
		m := special(load8(s, len(s)-8)) &^ (1<<(uint(i-(len(s)-8))*8) - 1)
		if m == 0 {
			return len(s)
		}
		return len(s) - 8 + bits.TrailingZeros64(m)>>3
	}
	return i
}

// Compare compares a and b in byte order (bytes.Compare), 8 bytes per
// iteration.
func Compare(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for ; i+8 <= n; i += 8 {
		x, y := binary.BigEndian.Uint64(a[i:]), binary.BigEndian.Uint64(b[i:])
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	if i < n && n >= 8 {
		// The rest of the common length as its last 8 bytes (the bytes
		// before i are equal), one compare instead of a loop per byte.
		x, y := binary.BigEndian.Uint64(a[n-8:]), binary.BigEndian.Uint64(b[n-8:])
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
		i = n
	}
	for ; i < n; i++ {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}
