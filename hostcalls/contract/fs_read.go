package contract

import (
	"encoding/binary"
	"errors"
)

// The read side of the fs primitives (docs/FS.md, "Primitives"): a path is
// resolved once into a handle, a host-side descriptor held for the rest of
// the invocation, and the other calls act on the handle. Results are raw
// figures (st_mode bits, times in s + ns, byte names); the module shapes
// the spec's payloads from them (plugins/fs).

// FSOpenArgs are the args of fs.open. Path is resolved under the allowed
// roots (or the execution context's workspace) like every fs path.
type FSOpenArgs struct {
	Path string `json:"path"`
	// NoFollow stats a final symlink itself (Link then holds its target)
	// instead of following it.
	NoFollow bool `json:"noFollow" doc:"do not follow a symlink in the last component"`
}

// FSRawStat is a file's raw metadata, as the kernel gives it.
type FSRawStat struct {
	// Mode is st_mode: the file type bits (S_IFMT) and the permission bits.
	Mode uint32 `json:"mode"`
	// Size is st_size in bytes.
	Size int64 `json:"size"`
	// MtimeSec and MtimeNsec are st_mtim: seconds since the epoch and
	// nanoseconds (0 to 999,999,999) past them.
	MtimeSec  int64  `json:"mtimeSec"`
	MtimeNsec int64  `json:"mtimeNsec"`
	Ino       uint64 `json:"ino"`
	Dev       uint64 `json:"dev"`
	Nlink     uint64 `json:"nlink"`
	UID       uint32 `json:"uid"`
	GID       uint32 `json:"gid"`
	// Readable and Writable are the kernel's own access check for the
	// node's account (faccessat2 with AT_EACCESS), never a mode-bit guess.
	Readable bool `json:"readable"`
	Writable bool `json:"writable"`
}

// FSOpenResult answers fs.open: Handle (valid until the invocation ends
// or fs.close), the canonical absolute path, the raw stat of what the
// handle holds, and Link, the target of a final symlink when NoFollow was
// set ("" otherwise).
type FSOpenResult struct {
	Handle uint32    `json:"handle"`
	Path   string    `json:"path"`
	Stat   FSRawStat `json:"stat"`
	Link   string    `json:"link,omitempty"`
}

// FSStatArgs are the args of fs.stat: Path is resolved as fs.open
// resolves it.
type FSStatArgs struct {
	Path string `json:"path"`
	// NoFollow stats a final symlink itself (Link then holds its target)
	// instead of following it.
	NoFollow bool `json:"noFollow" doc:"do not follow a symlink in the last component"`
}

// FSStatResult answers fs.stat: the canonical absolute path, the raw
// lstat of what it names (after following a final symlink unless
// NoFollow) and Link, the target of a final symlink when NoFollow was set
// ("" otherwise). No descriptor is opened and no handle is given.
type FSStatResult struct {
	Path string    `json:"path"`
	Stat FSRawStat `json:"stat"`
	Link string    `json:"link,omitempty"`
}

// FSHandleArgs name one handle (fs.close).
type FSHandleArgs struct {
	Handle uint32 `json:"handle"`
}

// FSReadDirArgs are the args of fs.readdir: the next entries of directory
// handle Handle, at most MaxBytes bytes of result (512 to 1 MiB; 0 means
// 256 KiB). Each call continues where the last one stopped.
//
// With Smallest (1 to FSReadDirMaxSmallest) the call instead reads the
// rest of the directory at once and returns only its Smallest names in
// byte order (one result, flags bit 0 set; bit 1 set when names were left
// out); MaxBytes does not apply (the result is at most Smallest × 323
// bytes). SkipHidden leaves out names starting with '.'. Stat follows each
// entry with its lstat record, as fs.statat gives it (ParseFSReadDirStat).
type FSReadDirArgs struct {
	Handle     uint32 `json:"handle"`
	MaxBytes   int    `json:"maxBytes" doc:"result size bound, 512 to 1048576 bytes (0: 262144); not with smallest"`
	Smallest   int    `json:"smallest,omitempty" doc:"0, or 1 to 1024: only the smallest names in byte order, whole directory read at once"`
	SkipHidden bool   `json:"skipHidden,omitempty" doc:"leave out names starting with '.'"`
	Stat       bool   `json:"stat,omitempty" doc:"follow each entry with its fs.statat record"`
}

// FSStatAtArgs are the args of fs.statat: Names (single components, as
// fs.readdir gave them; at most 1,024) are lstat'ed relative to directory
// handle Handle.
type FSStatAtArgs struct {
	Handle uint32   `json:"handle"`
	Names  []string `json:"names" doc:"entry names (no /, not . or ..), 1 to 1024 of them"`
}

// FSPReadArgs are the args of fs.pread: at most Length bytes (1 to
// 1,048,576) from Offset (0 to 9,007,199,254,740,991) of regular-file
// handle Handle.
type FSPReadArgs struct {
	Handle uint32 `json:"handle"`
	Offset int64  `json:"offset" doc:"byte offset to read from, 0 to 9007199254740991"`
	Length int64  `json:"length" doc:"bytes to read, 1 to 1048576"`
}

// FSPReadResult answers fs.pread: Blob holds the Length bytes read (an
// invocation blob; return it as an output blob), Size is the file's size
// when read and EOF is true when Offset+Length reaches it. Length may be
// shorter than asked: the host caps it so the bytes' base64 fits the
// request's result room (docs/FS.md, "Primitives").
type FSPReadResult struct {
	Blob   uint32 `json:"blob"`
	Length int64  `json:"length"`
	Size   int64  `json:"size"`
	EOF    bool   `json:"eof"`
}

// FSReadResult is the result of fs.read (path-based pread, for families
// that read a file without holding a handle): as FSPReadResult, with the
// canonical path and the offset.
type FSReadResult struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	Size   int64  `json:"size"`
	EOF    bool   `json:"eof"`
	Blob   uint32 `json:"blob"`
}

// The read primitives of the fs family.
var (
	FSOpen    = Call[FSOpenArgs, FSOpenResult]{"fs.open"}
	FSStat    = Call[FSStatArgs, FSStatResult]{"fs.stat"}
	FSClose   = Call[FSHandleArgs, Empty]{"fs.close"}
	FSReadDir = Call[FSReadDirArgs, RawBytes]{"fs.readdir"}
	FSStatAt  = Call[FSStatAtArgs, RawBytes]{"fs.statat"}
	FSPRead   = Call[FSPReadArgs, FSPReadResult]{"fs.pread"}
)

// Bounds of the read primitives.
const (
	// FSMaxHandles is how many handles one invocation may hold at once.
	FSMaxHandles = 16
	// FSReadDirDefaultBytes and FSReadDirMaxBytes bound one fs.readdir result.
	FSReadDirDefaultBytes = 256 << 10
	FSReadDirMaxBytes     = 1 << 20
	FSReadDirMinBytes     = 512
	// FSStatAtMaxNames is the most names one fs.statat takes.
	FSStatAtMaxNames = 1024
	// FSReadDirMaxSmallest is the largest fs.readdir smallest.
	FSReadDirMaxSmallest = 1024
)

func fsReadSpecs() []Spec {
	return []Spec{
		spec(FSOpen, "Resolves path into a handle held until the invocation ends (or fs.close): the canonical path and the raw stat (st_mode, size, mtime s+ns, inode, device, access). A directory handle serves fs.readdir and fs.statat, a regular file's fs.pread."),
		spec(FSStat, "Resolves path as fs.open does and answers the canonical path and the raw stat of what it names (the walk's lstat, with the kernel's access checks), without opening it or giving a handle."),
		spec(FSClose, "Closes a handle before the invocation ends."),
		spec(FSReadDir, "The next entries of a directory handle, raw bytes (not JSON): a flags byte (bit 0: no entries follow this batch; bit 1: smallest left names out), then per entry its d_type byte, its name length (2 bytes, little-endian) and its name bytes as the directory holds them, . and .. left out, and with stat the name's fs.statat record. In directory order, or with smallest (1 to 1024) the whole rest of the directory read at once and only its smallest names returned, in byte order; skipHidden leaves out names starting with '.'."),
		spec(FSStatAt, "lstat of each name relative to a directory handle, raw bytes (not JSON), one record per name in order: 0 then the stat (contract.AppendFSStatRecord), or 1, a length byte and a domain error code."),
		spec(FSPRead, "Reads at most length bytes at offset of a regular-file handle into an invocation blob, capped so their base64 fits the request's result room."),
	}
}

// ErrMalformed is returned by the parsers below for bytes that are not a
// whole record sequence.
var ErrMalformed = errors.New("contract: malformed raw host-call result")

// FSDirEntry is one fs.readdir entry: Type is the getdents d_type (DT_REG
// 8, DT_DIR 4, DT_LNK 10, ...; 0 unknown) and Name the name's bytes.
type FSDirEntry struct {
	Type uint8
	Name []byte
}

// AppendFSDirEntry appends one fs.readdir entry (name at most 65,535
// bytes; a Linux name is at most 255).
func AppendFSDirEntry(b []byte, typ uint8, name []byte) []byte {
	b = append(b, typ)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(name)))
	return append(b, name...)
}

// ParseFSReadDir walks an fs.readdir result, calling fn for each entry
// (Name aliases b), and reports whether the directory is exhausted.
func ParseFSReadDir(b []byte, fn func(FSDirEntry)) (eof bool, err error) {
	if len(b) == 0 {
		return false, ErrMalformed
	}
	eof = b[0]&1 != 0
	for i := 1; i < len(b); {
		if len(b)-i < 3 {
			return false, ErrMalformed
		}
		n := int(binary.LittleEndian.Uint16(b[i+1:]))
		if len(b)-i-3 < n {
			return false, ErrMalformed
		}
		fn(FSDirEntry{Type: b[i], Name: b[i+3 : i+3+n]})
		i += 3 + n
	}
	return eof, nil
}

// FSStatRecordBytes is the size of an encoded FSRawStat (after its 0 byte).
const FSStatRecordBytes = 4 + 1 + 8*6 + 4*2

// AppendFSStatRecord appends st as an fs.statat success record: 0, then
// mode (4 bytes), access (1 byte: bit 0 readable, bit 1 writable), size,
// mtimeSec, mtimeNsec, ino, dev, nlink (8 bytes each), uid, gid (4 each),
// all little-endian.
func AppendFSStatRecord(b []byte, st *FSRawStat) []byte {
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint32(b, st.Mode)
	var acc byte
	if st.Readable {
		acc |= 1
	}
	if st.Writable {
		acc |= 2
	}
	b = append(b, acc)
	for _, v := range []uint64{uint64(st.Size), uint64(st.MtimeSec), uint64(st.MtimeNsec), st.Ino, st.Dev, st.Nlink} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	b = binary.LittleEndian.AppendUint32(b, st.UID)
	return binary.LittleEndian.AppendUint32(b, st.GID)
}

// AppendFSStatError appends an fs.statat error record: 1, the length of
// code (at most 255 bytes) and code, a domain error code (not_found,
// permission_denied, ...).
func AppendFSStatError(b []byte, code string) []byte {
	if len(code) > 255 {
		code = code[:255]
	}
	b = append(b, 1, byte(len(code)))
	return append(b, code...)
}

// ParseFSStatAt walks an fs.statat result, calling fn once per record in
// order with either a stat or a domain error code.
func ParseFSStatAt(b []byte, fn func(st *FSRawStat, errCode string)) error {
	var st FSRawStat
	for i := 0; i < len(b); {
		code, n, err := ParseFSStatRecord(b[i:], &st)
		if err != nil {
			return err
		}
		if b[i] == 0 {
			fn(&st, "")
		} else {
			fn(nil, code)
		}
		i += n
	}
	return nil
}

// ParseFSStatRecord decodes the fs.statat record at the start of b: a
// success fills st and returns code "", an error record returns its
// domain error code; n is the record's length in bytes.
func ParseFSStatRecord(b []byte, st *FSRawStat) (code string, n int, err error) {
	if len(b) == 0 {
		return "", 0, ErrMalformed
	}
	switch b[0] {
	case 0:
		if len(b)-1 < FSStatRecordBytes {
			return "", 0, ErrMalformed
		}
		r := b[1:]
		*st = FSRawStat{Mode: binary.LittleEndian.Uint32(r), Readable: r[4]&1 != 0, Writable: r[4]&2 != 0}
		r = r[5:]
		st.Size = int64(binary.LittleEndian.Uint64(r))
		st.MtimeSec = int64(binary.LittleEndian.Uint64(r[8:]))
		st.MtimeNsec = int64(binary.LittleEndian.Uint64(r[16:]))
		st.Ino = binary.LittleEndian.Uint64(r[24:])
		st.Dev = binary.LittleEndian.Uint64(r[32:])
		st.Nlink = binary.LittleEndian.Uint64(r[40:])
		st.UID = binary.LittleEndian.Uint32(r[48:])
		st.GID = binary.LittleEndian.Uint32(r[52:])
		return "", 1 + FSStatRecordBytes, nil
	case 1:
		if len(b) < 2 || len(b)-2 < int(b[1]) {
			return "", 0, ErrMalformed
		}
		return string(b[2 : 2+int(b[1])]), 2 + int(b[1]), nil
	}
	return "", 0, ErrMalformed
}

// ParseFSReadDirStat walks an fs.readdir result made with stat, calling fn
// for each entry (Name aliases b; st is reused between calls and nil when
// the entry has an error code instead), and reports the flags: eof, and
// more (smallest left names out).
func ParseFSReadDirStat(b []byte, fn func(e FSDirEntry, st *FSRawStat, errCode string)) (eof, more bool, err error) {
	if len(b) == 0 {
		return false, false, ErrMalformed
	}
	eof, more = b[0]&1 != 0, b[0]&2 != 0
	var st FSRawStat
	for i := 1; i < len(b); {
		if len(b)-i < 3 {
			return false, false, ErrMalformed
		}
		n := int(binary.LittleEndian.Uint16(b[i+1:]))
		if len(b)-i-3 < n {
			return false, false, ErrMalformed
		}
		e := FSDirEntry{Type: b[i], Name: b[i+3 : i+3+n]}
		code, rn, err := ParseFSStatRecord(b[i+3+n:], &st)
		if err != nil {
			return false, false, err
		}
		if b[i+3+n] == 0 {
			fn(e, &st, "")
		} else {
			fn(e, nil, code)
		}
		i += 3 + n + rn
	}
	return eof, more, nil
}
