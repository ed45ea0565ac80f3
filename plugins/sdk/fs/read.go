package fs

import (
	"encoding/binary"
	"strconv"
	"unicode/utf8"

	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
)

// The read primitives (docs/FS.md, "Primitives"): Open resolves a path
// once into a handle held host-side until the invocation ends; ReadDir,
// StatAt and PRead act on the handle. Results are raw figures; shaping a
// spec payload from them is the module's job.

// Open resolves path under the node's allowed roots (fs.open) and returns
// a handle, the canonical path and the raw stat of what the handle holds.
// noFollow stats a final symlink itself (Link holds its target). One
// invocation holds at most contract.FSMaxHandles handles; Close frees one.
func Open(path string, noFollow bool) (contract.FSOpenResult, error) {
	return sdk.Invoke(fsOpen, contract.FSOpen, contract.FSOpenArgs{Path: path, NoFollow: noFollow})
}

// Stat resolves path as Open does and returns the canonical path and the
// raw stat of what it names, without opening it or taking a handle
// (fs.stat): the cheaper call when only the metadata is needed. noFollow
// stats a final symlink itself (Link holds its target).
func Stat(path string, noFollow bool) (contract.FSStatResult, error) {
	return sdk.Invoke(fsStat, contract.FSStat, contract.FSStatArgs{Path: path, NoFollow: noFollow})
}

// Close closes handle h before the invocation ends (fs.close).
func Close(h uint32) error {
	_, err := sdk.Invoke(fsClose, contract.FSClose, contract.FSHandleArgs{Handle: h})
	return err
}

// ReadDir returns the next entries of directory handle h (fs.readdir), at
// most maxBytes bytes of them (0: 256 KiB), in contract.ParseFSReadDir's
// format; call it again until that reports eof.
func ReadDir(h uint32, maxBytes int) ([]byte, error) {
	b := make([]byte, 0, 48)
	b = append(b, `{"handle":`...)
	b = strconv.AppendUint(b, uint64(h), 10)
	b = append(b, `,"maxBytes":`...)
	b = strconv.AppendInt(b, int64(maxBytes), 10)
	return sdk.CallBytes(fsReadDir, append(b, '}'))
}

// ReadDirSmallest reads the rest of directory handle h at once and
// returns its n smallest names (1 to 1,024) in byte order (fs.readdir with
// smallest), names starting with '.' left out when skipHidden, each
// followed by its fs.statat record when stat: parse it with
// contract.ParseFSReadDirStat (stat) or contract.ParseFSReadDir; flags bit
// 1 says names were left out.
func ReadDirSmallest(h uint32, n int, skipHidden, stat bool) ([]byte, error) {
	b := make([]byte, 0, 80)
	b = append(b, `{"handle":`...)
	b = strconv.AppendUint(b, uint64(h), 10)
	b = append(b, `,"maxBytes":0,"smallest":`...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, `,"skipHidden":`...)
	b = strconv.AppendBool(b, skipHidden)
	b = append(b, `,"stat":`...)
	b = strconv.AppendBool(b, stat)
	return sdk.CallBytes(fsReadDir, append(b, '}'))
}

// StatAt lstat's each of names (1 to 1,024 plain UTF-8 components)
// relative to directory handle h (fs.statat), in contract.ParseFSStatAt's
// format: one record per name, in order.
func StatAt(h uint32, names [][]byte) ([]byte, error) {
	n := 32
	for _, s := range names {
		n += len(s) + 3
	}
	b := make([]byte, 0, n)
	b = append(b, `{"handle":`...)
	b = strconv.AppendUint(b, uint64(h), 10)
	b = append(b, `,"names":[`...)
	for i, s := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return sdk.CallBytes(fsStatAt, append(b, "]}"...))
}

// PRead reads at most length bytes (1 to 1,048,576) at offset of
// regular-file handle h into a host-side blob (fs.pread): put the result's
// Blob in sdk.Result.Blobs. The chunk may be shorter than asked (its
// base64 must fit the request's result room).
func PRead(h uint32, offset, length int64) (contract.FSPReadResult, error) {
	return sdk.Invoke(fsPRead, contract.FSPRead, contract.FSPReadArgs{Handle: h, Offset: offset, Length: length})
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 bytes as U+FFFD (the host
// would not find such a name anyway). Runs of 8 bytes that need nothing
// are copied without a per-byte loop (each loop iteration costs a
// deadline check in a wasm guest).
func appendJSONString(b []byte, s []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		for ; i+8 <= len(s); i += 8 {
			x := binary.LittleEndian.Uint64(s[i:])
			q, bs := x^(lo8*'"'), x^(lo8*'\\')
			if ((q-lo8)&^q|(bs-lo8)&^bs|(x-lo8*0x20)&^x|x)&hi8 != 0 {
				break
			}
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c == '"' || c == '\\' || c < 0x20 {
				b = append(b, s[start:i]...)
				if c < 0x20 {
					b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
				} else {
					b = append(b, '\\', c)
				}
				start = i + 1
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			start = i + 1
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const (
	lo8 = 0x0101010101010101
	hi8 = 0x8080808080808080
)
