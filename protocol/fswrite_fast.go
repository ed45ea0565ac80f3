package protocol

import "encoding/base64"

// fsWriteFields are the keys of node.fs.write params (FSWriteParams).
var fsWriteFields = [...]string{"nodeId", "path", "dataBase64", "offset", "truncate", "mkdirs", "expectedModifiedAtMs"}

// validateFSWriteFast is ValidateFSWrite for the common shape of a write,
// deciding exactly as the slow path does without turning dataBase64 into
// a Go string: every key is one of FSWriteParams' names, spelled exactly
// without escapes and given once, and dataBase64 is a string of printable
// ASCII without escapes. The other members are decoded by DecodeParams
// as a small object of their own (a string dataBase64 can cause no
// DecodeParams error, so the first error is the same), then dataBase64 is
// checked in place. ok is false when params do not have this shape; the
// caller then takes the slow path.
func validateFSWriteFast(params []byte) (e *Error, ok bool) {
	ms, err := SplitObject(params)
	if err != nil || len(ms) > len(fsWriteFields) {
		return nil, false
	}
	var seen [len(fsWriteFields)]bool
	var data []byte
	rest := make([]Member, 0, len(ms))
	for _, m := range ms {
		k := -1
		for i, f := range fsWriteFields {
			if m.Is(f) {
				k = i
				break
			}
		}
		if k < 0 || seen[k] {
			return nil, false
		}
		seen[k] = true
		if fsWriteFields[k] == "dataBase64" {
			data = m.Value
			continue
		}
		rest = append(rest, m)
	}
	if data == nil || len(data) < 2 || data[0] != '"' || data[len(data)-1] != '"' {
		return nil, false
	}
	s := data[1 : len(data)-1]
	class := base64Class(s)
	if class&classNotJSONPlain != 0 {
		return nil, false // an escape, a control byte or non-ASCII: the slow path judges it
	}
	var p FSWriteParams
	if e := DecodeParams(AppendObject(nil, rest), &p); e != nil {
		return e, true
	}
	if base64.StdEncoding.DecodedLen(len(s)) > FSMaxWriteBytes+2 {
		return InvalidParams("dataBase64", "dataBase64 decodes to more than 1048576 bytes"), true
	}
	n, valid := strictStdBase64Len(s, class)
	if !valid {
		return InvalidParams("dataBase64", "dataBase64 is not valid standard base64"), true
	}
	if n > FSMaxWriteBytes {
		return InvalidParams("dataBase64", "dataBase64 decodes to more than 1048576 bytes"), true
	}
	return p.Check(), true
}

// Byte classes for base64Class, OR-ed over a string.
const (
	classNotAlphabet  = 1 << iota // not in the standard base64 alphabet (includes '=')
	classNotJSONPlain             // not printable ASCII, or '"' or '\\'
)

var base64Classes = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '+', c == '/':
		case c < 0x20 || c >= 0x7f || c == '"' || c == '\\':
			t[c] = classNotAlphabet | classNotJSONPlain
		default:
			t[c] = classNotAlphabet
		}
	}
	return t
}()

// base64Class returns the OR of the classes of s's bytes, except that up
// to two '=' at the end of s count as alphabet (padding).
func base64Class(s []byte) uint8 {
	n := len(s)
	var pad int
	for pad < 2 && n-pad > 0 && s[n-pad-1] == '=' {
		pad++
	}
	var acc uint8
	body := s[:n-pad]
	i := 0
	for ; i+8 <= len(body); i += 8 {
		acc |= base64Classes[body[i]] | base64Classes[body[i+1]] | base64Classes[body[i+2]] | base64Classes[body[i+3]] |
			base64Classes[body[i+4]] | base64Classes[body[i+5]] | base64Classes[body[i+6]] | base64Classes[body[i+7]]
	}
	for ; i < len(body); i++ {
		acc |= base64Classes[body[i]]
	}
	return acc
}

// base64Values maps an alphabet byte to its 6-bit value.
var base64Values = func() (t [256]uint8) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := 0; i < len(alphabet); i++ {
		t[alphabet[i]] = uint8(i)
	}
	return t
}()

// strictStdBase64Len reports whether s is what
// base64.StdEncoding.Strict() decodes without error and holds no CR or LF
// (the decoder skips those even when strict), and the decoded length.
// class is base64Class(s). The rules: a length that is a multiple of 4;
// only alphabet bytes, except one or two '=' ending the last quantum; and
// the bits a padded quantum drops are zero.
func strictStdBase64Len(s []byte, class uint8) (int, bool) {
	if class != 0 || len(s)%4 != 0 {
		return 0, false
	}
	if len(s) == 0 {
		return 0, true
	}
	pad := 0
	if s[len(s)-1] == '=' {
		pad = 1
		if s[len(s)-2] == '=' {
			pad = 2
		}
	}
	switch pad {
	case 1:
		if base64Values[s[len(s)-2]]&0x3 != 0 {
			return 0, false
		}
	case 2:
		if base64Values[s[len(s)-3]]&0xf != 0 {
			return 0, false
		}
	}
	return len(s)/4*3 - pad, true
}
