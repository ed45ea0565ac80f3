package shape

import (
	"encoding/binary"
	"math/bits"
	"strconv"
)

// Branch-free number formatting and MIME lookup for the payload loops: in
// a wasm guest under deadline checks each loop iteration costs about
// 25 ns (swar.go), and strconv.AppendInt spends one per two digits plus
// calls, so a 13-digit mtimeMs cost ~0.9 µs; these take a few multiplies.

// eightDigits returns n (< 100,000,000) as 8 ASCII digits, most
// significant first in memory order (little-endian word), by splitting
// it into 4-, 2- and 1-digit lanes with multiply-shift divisions.
func eightDigits(n uint32) uint64 {
	x := uint64(n)
	y := x/10000 | (x%10000)<<32                  // two 4-digit lanes
	hi := (y * 5243 >> 19) & 0x0000007F0000007F   // each lane / 100
	z := hi | (y-hi*100)<<16                      // four 2-digit lanes
	t := (z * 103 >> 10) & 0x000F000F000F000F     // each lane / 10
	return (t | (z-t*10)<<8) + 0x3030303030303030 // eight digits
}

// appendInt appends v in decimal as strconv.AppendInt(b, v, 10) does.
func appendInt(b []byte, v int64) []byte {
	if v < 0 || v >= 1e16 {
		return strconv.AppendInt(b, v, 10)
	}
	return appendUint16d(b, uint64(v))
}

// appendUint16d appends v (< 1e16) without leading zeros: each 8-digit
// word is stored whole and shifted so its leading zeros fall off the end
// (no copy loop, no memmove call).
func appendUint16d(b []byte, v uint64) []byte {
	if v >= 1e8 {
		b = appendDigits(b, eightDigits(uint32(v/1e8)))
		return binary.LittleEndian.AppendUint64(b, eightDigits(uint32(v%1e8)))
	}
	return appendDigits(b, eightDigits(uint32(v)))
}

// appendDigits appends the 8 ASCII digits d less their leading zeros (at
// least one digit).
func appendDigits(b []byte, d uint64) []byte {
	lz := bits.TrailingZeros64(d-0x3030303030303030) >> 3
	if lz > 7 {
		lz = 7 // the value 0
	}
	b = binary.LittleEndian.AppendUint64(b, d>>(uint(lz)*8))
	return b[:len(b)-lz]
}

// mimeSlots is an open-addressing table of the MIME table's extensions of
// 1 to 8 ASCII bytes, keyed by the lower-cased extension packed
// little-endian in a word, holding each type already JSON-quoted. It is
// built from mimeByExt by mime.go's init, once Overrides applied.
var mimeSlots [256]struct {
	key    uint64
	quoted string
}

var octetQuoted = string(AppendString(nil, "application/octet-stream"))

func buildMimeSlots() {
	mimeSlots = [256]struct {
		key    uint64
		quoted string
	}{}
	for ext, typ := range mimeByExt {
		if len(ext) == 0 || len(ext) > 8 {
			continue
		}
		var w [8]byte
		copy(w[:], ext)
		k := binary.LittleEndian.Uint64(w[:])
		if lowerASCII(k) != k || k&hi8 != 0 {
			continue // not lower-case ASCII: only the map finds it
		}
		for i := slot(k); ; i = (i + 1) & 255 {
			if mimeSlots[i].key == 0 {
				mimeSlots[i].key, mimeSlots[i].quoted = k, string(AppendString(nil, typ))
				break
			}
		}
	}
}

func slot(k uint64) uint64 { return (k * 0x9E3779B97F4A7C15) >> 56 }

// lowerASCII lower-cases the ASCII letters of a word of ASCII bytes.
func lowerASCII(x uint64) uint64 {
	upper := (x + lo8*(0x80-'A')) &^ (x + lo8*(0x80-'Z'-1)) & hi8
	return x | upper>>2
}

// exactEq flags (high bit) exactly the bytes of x equal to c.
func exactEq(x uint64, c byte) uint64 {
	y := x ^ (lo8 * uint64(c))
	const lo7 = lo8 * 0x7f
	return ^((y&lo7 + lo7) | y | lo7) & hi8
}

// mimeQuoted is mimeOf(name), JSON-quoted.
func mimeQuoted[S ~string | ~[]byte](name S) string {
	n := len(name)
	if n < 2 {
		return octetQuoted
	}
	// The last 8 bytes (zero-padded in front for a shorter name): find the
	// last '.' or '/' among them.
	var w [8]byte
	if n >= 8 {
		copy(w[:], name[n-8:])
	} else {
		copy(w[8-n:], name)
	}
	x := binary.LittleEndian.Uint64(w[:])
	m := exactEq(x, '.') | exactEq(x, '/')
	if n < 8 {
		m &^= 1<<(uint(8-n)*8) - 1 // padding bytes are not part of name
	}
	if m == 0 {
		return string(AppendString(nil, mimeOf(name))) // extension of 8+ bytes or none in view
	}
	k := 7 - bits.LeadingZeros64(m)>>3 // highest flagged byte
	i := n - 8 + k
	if i <= 0 || name[i] == '/' || name[i-1] == '/' || i == n-1 {
		return octetQuoted
	}
	// ext is w[k+1:8], at most 7 bytes.
	key := x >> (uint(k+1) * 8)
	if key&(hi8>>(uint(k+1)*8)) != 0 {
		return string(AppendString(nil, mimeOf(name))) // non-ASCII extension
	}
	key = lowerASCII(key)
	for j := slot(key); ; j = (j + 1) & 255 {
		switch mimeSlots[j].key {
		case key:
			return mimeSlots[j].quoted
		case 0:
			return octetQuoted
		}
	}
}
