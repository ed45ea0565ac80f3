package fs

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"lemon/protocol"
)

// The payload-building variant of delete preview: the host builds the
// node.fs.delete.preview payload and hands it to the module as a blob it
// returns unread (sdk.Result.PayloadBlob, docs/ABI.md). (node.fs.stat and
// node.fs.list are shaped by the module from the read primitives,
// prim_read.go.)
//
// The bytes equal what the module produced when it decoded the plain
// fs.delete_preview result, added the MIME type and re-encoded it: Go's
// encoder writes each invalid UTF-8 byte as \ufffd and the module's
// re-encoding then wrote U+FFFD itself, so fixUTF8 does that replacement
// before encoding.

// PreviewPayload runs Preview and returns the node.fs.delete.preview
// payload JSON: {path, stat:{... mime ...}, childCount, childrenDigest,
// candidateCount, confirmationToken, expiresAtMs}.
func (f *FS) PreviewPayload(p string, recursive bool) ([]byte, error) {
	r, err := f.Preview(p, recursive)
	if err != nil {
		return nil, err
	}
	return previewPayload(r)
}

// previewPayload shapes and encodes a Preview result (it modifies r).
func previewPayload(r *protocol.FSDeletePreviewResult) ([]byte, error) {
	r.Path = fixUTF8(r.Path)
	r.ChildrenDigest = fixUTF8(r.ChildrenDigest)
	r.ConfirmationToken = fixUTF8(r.ConfirmationToken)
	withMime(&r.Stat)
	return marshalPayload(r)
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
