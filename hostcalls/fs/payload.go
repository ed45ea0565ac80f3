package fs

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"lemon/protocol"
)

// Payload-building variants of list and stat. A guest
// module pays about 1 µs per byte of JSON it decodes or encodes: a listing
// of 500 entries is ~100 KB, and even a stat's ~250 bytes were a quarter
// of node.fs.stat's time through the module. So these calls build the
// final spec payload on the host (MIME types included, from the same
// protocol.MIMEFromName table the module uses for read) and hand it to
// the module as a blob it returns unread (sdk.Result.PayloadBlob,
// docs/ABI.md).
//
// The bytes equal what the module produced when it decoded the plain
// fs.list, or fs.stat result, added MIME types and
// re-encoded it: Go's encoder writes each invalid UTF-8 byte as \ufffd and
// the module's re-encoding then wrote U+FFFD itself, so fixUTF8 does that
// replacement before encoding (TestPayloadMatchesModuleShaping holds the
// two equal).

// ListPayload runs List and returns the node.fs.list payload JSON:
// {path, entries:[{name, type, size, mtimeMs, mode, mime, readable,
// writable} | {name, error}], limit:500, truncated}. Entries carry no
// path: the spec's entry is the name plus the stat fields, and a path per
// entry would let a deep directory's listing outgrow the payload cap.
func (f *FS) ListPayload(p string, showHidden bool) ([]byte, error) {
	r, err := f.List(p, showHidden)
	if err != nil {
		return nil, err
	}
	return listPayload(r)
}

// listPayload shapes and encodes a List result (it modifies r).
func listPayload(r *protocol.FSListResult) ([]byte, error) {
	r.Path = fixUTF8(r.Path)
	if r.Entries == nil {
		r.Entries = []protocol.FSListEntry{}
	}
	for i := range r.Entries {
		e := &r.Entries[i]
		e.Name = fixUTF8(e.Name)
		e.Error = fixUTF8(e.Error)
		if e.FSEntryStat != nil {
			e.Type = fixUTF8(e.Type)
			e.Mime = protocol.MIMEFromName(e.Name)
		}
	}
	return marshalPayload(r)
}

// StatPayload runs Stat and returns the node.fs.stat payload JSON:
// {path, type, size, mtimeMs, mode, mime, readable, writable}.
func (f *FS) StatPayload(p string) ([]byte, error) {
	st, err := f.Stat(p)
	if err != nil {
		return nil, err
	}
	return statPayload(st)
}

// statPayload shapes and encodes a Stat result (it modifies st).
func statPayload(st *protocol.FSStat) ([]byte, error) {
	withMime(st)
	return marshalPayload(st)
}

// withMime sanitizes a stat's path and sets its name-derived MIME type.
func withMime(st *protocol.FSStat) {
	if st == nil {
		return
	}
	st.Path = fixUTF8(st.Path)
	st.Type = fixUTF8(st.Type)
	st.Mime = protocol.MIMEFromName(st.Path)
}

func marshalPayload(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, protocol.FSError(protocol.DomainFilesystemError)
	}
	return b, nil
}

// fixUTF8 replaces each byte of s that is not part of valid UTF-8 with
// U+FFFD (one per byte, as encoding/json does), and returns s itself when
// it is valid.
func fixUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
