package shape

import (
	"slices"
	"strconv"
	"unicode/utf8"

	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// File type bits of st_mode (S_IFMT and its values; Linux).
const (
	sIFMT   = 0o170000
	sIFREG  = 0o100000
	sIFDIR  = 0o040000
	sIFLNK  = 0o120000
	sIFIFO  = 0o010000
	sIFSOCK = 0o140000
	sIFCHR  = 0o020000
	sIFBLK  = 0o060000
)

// TypeName names st_mode's file type as the spec's `type` field does.
func TypeName(mode uint32) string {
	switch mode & sIFMT {
	case sIFREG:
		return "regular"
	case sIFDIR:
		return "directory"
	case sIFLNK:
		return "symlink"
	case sIFIFO:
		return "fifo"
	case sIFSOCK:
		return "socket"
	case sIFCHR:
		return "char_device"
	case sIFBLK:
		return "block_device"
	}
	return "unknown"
}

// IsDir and IsRegular test st_mode's file type.
func IsDir(mode uint32) bool     { return mode&sIFMT == sIFDIR }
func IsRegular(mode uint32) bool { return mode&sIFMT == sIFREG }

// MtimeMs is the spec's mtimeMs: integer Unix ms, the ns truncated.
func MtimeMs(st *contract.FSRawStat) int64 { return st.MtimeSec*1000 + st.MtimeNsec/1e6 }

// AppendString appends s as encoding/json writes a Go string after each
// byte that is not part of valid UTF-8 became U+FFFD (the payload bytes
// the spec's methods have always had): HTML characters, U+2028 and
// U+2029 escaped, \b \f \n \r \t short, other control bytes \u00XX.
func AppendString(b []byte, s string) []byte { return appendStr(b, s) }

func appendStr[S ~string | ~[]byte](b []byte, s S) []byte {
	b, _ = appendStrValid(b, s)
	return b
}

// appendStrValid is appendStr, also reporting whether s was valid UTF-8
// (the validity check folded into the escape scan: no second pass).
func appendStrValid[S ~string | ~[]byte](b []byte, s S) (_ []byte, valid bool) {
	const hex = "0123456789abcdef"
	valid = true
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if i = plainFrom(s, i); i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, "\uFFFD"...)
			i++
			start = i
			valid = false
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&15])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"'), valid
}

// appendStatFields appends `"type":…,"size":…,"mtimeMs":…,"mode":…,
// "mime":…,"readable":…,"writable":…` (mime from name).
func appendStatFields[S ~string | ~[]byte](b []byte, name S, st *contract.FSRawStat) []byte {
	b = append(b, typePrefix(st.Mode)...)
	b = appendInt(b, st.Size)
	b = append(b, `,"mtimeMs":`...)
	b = appendInt(b, MtimeMs(st))
	b = append(b, `,"mode":`...)
	b = appendUint16d(b, uint64(st.Mode))
	b = append(b, `,"mime":`...)
	b = append(b, mimeQuoted(name)...)
	switch {
	case st.Readable && st.Writable:
		return append(b, `,"readable":true,"writable":true`...)
	case st.Readable:
		return append(b, `,"readable":true,"writable":false`...)
	case st.Writable:
		return append(b, `,"readable":false,"writable":true`...)
	}
	return append(b, `,"readable":false,"writable":false`...)
}

// appendEntryStat appends `,` and appendStatFields's fields of name and
// st, and the closing `}`: the list entry's tail, non-generic and with
// the access fields as one string.
func appendEntryStat(b []byte, name []byte, st *contract.FSRawStat) []byte {
	b = append(b, ',')
	b = append(b, typePrefix(st.Mode)...)
	b = appendInt(b, st.Size)
	b = append(b, `,"mtimeMs":`...)
	b = appendInt(b, MtimeMs(st))
	b = append(b, `,"mode":`...)
	b = appendUint16d(b, uint64(st.Mode))
	b = append(b, `,"mime":`...)
	b = append(b, mimeQuoted(name)...)
	acc := 0
	if st.Readable {
		acc |= 1
	}
	if st.Writable {
		acc |= 2
	}
	return append(b, accessTail[acc]...)
}

var accessTail = [4]string{`,"readable":false,"writable":false}`, `,"readable":true,"writable":false}`,
	`,"readable":false,"writable":true}`, `,"readable":true,"writable":true}`}

// typePrefix is `"type":"<TypeName>","size":` for st_mode's file type.
func typePrefix(mode uint32) string {
	switch mode & sIFMT {
	case sIFREG:
		return `"type":"regular","size":`
	case sIFDIR:
		return `"type":"directory","size":`
	case sIFLNK:
		return `"type":"symlink","size":`
	}
	return `"type":"` + TypeName(mode) + `","size":`
}

// StatPayload is the node.fs.stat payload of canonical path with raw
// stat st: {path, type, size, mtimeMs, mode, mime, readable, writable}.
func StatPayload(path string, st *contract.FSRawStat) []byte {
	b := make([]byte, 0, 160+len(path))
	path = fixUTF8(path)
	b = append(b, `{"path":`...)
	b = AppendString(b, path)
	b = append(b, ',')
	b = appendStatFields(b, path, st)
	return append(b, '}')
}

// fixUTF8 replaces each byte of s that is not part of valid UTF-8 with
// U+FFFD, as the payloads always did before taking a MIME type of a name.
func fixUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\uFFFD"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return string(b)
}

// Lister gathers a node.fs.list from fs.readdir batches: it keeps the
// FSListLimit+1 smallest visible names in byte order (hidden names, those
// starting with '.', only with ShowHidden), so a directory of any size
// costs bounded memory: names pile up in one arena and, past 4×(limit+1)
// of them, are sorted and cut back to the limit+1 smallest.
type Lister struct {
	ShowHidden bool
	arena      []byte
	spans      []span
}

type span struct{ off, n uint32 }

const keep = protocol.FSListLimit + 1

// Add considers one entry name (its bytes are copied).
func (l *Lister) Add(name []byte) {
	if len(name) == 0 || !l.ShowHidden && name[0] == '.' {
		return
	}
	if len(l.spans) >= 4*keep {
		l.compact()
	}
	l.spans = append(l.spans, span{uint32(len(l.arena)), uint32(len(name))})
	l.arena = append(l.arena, name...)
}

func (l *Lister) name(s span) []byte { return l.arena[s.off : s.off+s.n] }

// compact sorts the names and keeps the keep smallest, in a new arena.
func (l *Lister) compact() {
	slices.SortFunc(l.spans, func(a, b span) int { return Compare(l.name(a), l.name(b)) })
	if len(l.spans) <= keep {
		return
	}
	arena := make([]byte, 0, len(l.arena))
	for i, s := range l.spans[:keep] {
		l.spans[i] = span{uint32(len(arena)), s.n}
		arena = append(arena, l.name(s)...)
	}
	l.spans, l.arena = l.spans[:keep], arena
}

// Names returns the listed names in byte order (at most FSListLimit;
// they alias the Lister's memory) and whether more visible names exist.
func (l *Lister) Names() (names [][]byte, truncated bool) {
	l.compact()
	n := min(len(l.spans), protocol.FSListLimit)
	names = make([][]byte, n)
	for i := range names {
		names[i] = l.name(l.spans[i])
	}
	return names, len(l.spans) > protocol.FSListLimit
}

// ToStat returns the names that are valid UTF-8 (the others are listed as
// invalid_path and never stat'ed: they cannot be named in a later
// request, and two of them could look alike once shown with U+FFFD).
func ToStat(names [][]byte) [][]byte {
	out := make([][]byte, 0, len(names))
	for _, n := range names {
		if utf8.Valid(n) {
			out = append(out, n)
		}
	}
	return out
}

// ListPayload is the node.fs.list payload of canonical path: names as
// Names returned them; stats holds, for each name ToStat kept, in order,
// its raw stat or a domain error code (contract.ParseFSStatAt's records).
func ListPayload(path string, names [][]byte, truncated bool, stats []*contract.FSRawStat, errs []string) []byte {
	b := make([]byte, 0, 64+len(path)+len(names)*160)
	b = append(b, `{"path":`...)
	b = AppendString(b, fixUTF8(path))
	b = append(b, `,"entries":[`...)
	k := 0
	for i, name := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendStr(b, name)
		switch {
		case !utf8.Valid(name):
			b = append(b, `,"error":"`...)
			b = append(b, protocol.DomainInvalidPath...)
			b = append(b, '"')
		case k < len(stats) && stats[k] != nil:
			b = append(b, ',')
			b = appendStatFields(b, name, stats[k])
			k++
		default:
			code := protocol.DomainFilesystemError
			if k < len(errs) && errs[k] != "" {
				code = errs[k]
			}
			b = append(b, `,"error":`...)
			b = AppendString(b, code)
			k++
		}
		b = append(b, '}')
	}
	b = append(b, `],"limit":`...)
	b = strconv.AppendInt(b, protocol.FSListLimit, 10)
	b = append(b, `,"truncated":`...)
	b = strconv.AppendBool(b, truncated)
	return append(b, '}')
}

// ListPayloadFromReadDir is the node.fs.list payload of canonical path
// from one fs.readdir result made with smallest (FSListLimit), stat and
// skipHidden as showHidden asks (contract.ParseFSReadDirStat's format):
// the same bytes ListPayload makes from Lister, ToStat and fs.statat, in
// one pass without per-entry allocations. A name that is not UTF-8 is
// listed as invalid_path whatever its stat record says.
func ListPayloadFromReadDir(path string, raw []byte) ([]byte, error) {
	if len(raw) == 0 {
		return nil, contract.ErrMalformed
	}
	b := make([]byte, 0, 128+len(path)+2*len(raw))
	b = append(b, `{"path":`...)
	b = AppendString(b, fixUTF8(path))
	b = append(b, `,"entries":[`...)
	var st contract.FSRawStat
	for i := 1; i < len(raw); {
		// One entry: d_type, name length (u16 LE), name, stat record
		// (contract.ParseFSReadDirStat's format), parsed in place.
		if len(raw)-i < 4 {
			return nil, contract.ErrMalformed
		}
		n := int(raw[i+1]) | int(raw[i+2])<<8
		if len(raw)-i-3 < n+1 {
			return nil, contract.ErrMalformed
		}
		name, rec := raw[i+3:i+3+n], raw[i+3+n:]
		code, rn, err := contract.ParseFSStatRecord(rec, &st)
		if err != nil {
			return nil, err
		}
		if i > 1 {
			b = append(b, ',')
		}
		i += 3 + n + rn
		b = append(b, `{"name":`...)
		var valid bool
		b, valid = appendStrValid(b, name)
		switch {
		case !valid:
			b = append(b, `,"error":"`+protocol.DomainInvalidPath+`"}`...)
		case rec[0] == 0: // a stat record
			b = appendEntryStat(b, name, &st)
		default:
			if code == "" {
				code = protocol.DomainFilesystemError
			}
			b = append(b, `,"error":`...)
			b = AppendString(b, code)
			b = append(b, '}')
		}
	}
	b = append(b, `],"limit":`...)
	b = strconv.AppendInt(b, protocol.FSListLimit, 10)
	if raw[0]&2 != 0 {
		return append(b, `,"truncated":true}`...), nil
	}
	return append(b, `,"truncated":false}`...), nil
}
