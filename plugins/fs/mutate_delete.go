//go:build wasip1

package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"lemon/hostcalls/contract"
	"lemon/plugins/fs/shape"
	"lemon/plugins/sdk"
	"lemon/plugins/sdk/fs"
	"lemon/plugins/sdk/store"
	"lemon/protocol"
)

// Delete previews and their tokens (spec node.fs.delete.preview and
// node.fs.delete; docs/FS.md, "Writes, moves and deletes"). A preview
// binds the target and every entry below it through fs.walk's treeDigest
// (identity, type and permissions, owner, size and ns mtime of each) and
// returns a one-use token: 32 random bytes, of which only the SHA-256 is
// kept, valid for five minutes. The state lives in this module's volatile
// store (lost when the node restarts):
//
//   - previewIndex: one entry per retained preview, "hash,entries,bytes,
//     expiresAtMs,seq" joined by ";", swapped with store.cas so that
//     concurrent previews and deletes never lose an update and a token is
//     consumed once;
//   - "preview/<hash>": what the delete needs (path, identity, recursive,
//     treeDigest), expiring with the token.
//
// Limits per preview are fs.walk's: 10,000 entries, 64 levels, 8 MiB of
// candidate storage (each entry's path plus candidateOverhead bytes),
// preview_too_large past any. The node keeps at most 128 previews, 20,000
// entries and 16 MiB in total, dropping the oldest first.

const (
	previewIndex      = "previews"
	previewKeyPrefix  = "preview/"
	candidateOverhead = 64
	// casAttempts bounds the compare-and-swap retries on the index; past
	// them the request is filesystem_busy (retry-safe, nothing done).
	casAttempts = 32
)

// previewRec is the record of one preview ("preview/<hash>").
type previewRec struct {
	Path       string `json:"path"`
	Dev        uint64 `json:"dev"`
	Ino        uint64 `json:"ino"`
	Recursive  bool   `json:"recursive"`
	TreeDigest string `json:"treeDigest"`
}

// indexEntry is one retained preview in the index.
type indexEntry struct {
	hash    string
	entries int
	bytes   int64
	expires int64 // Unix ms
	seq     int64
}

// parseIndex reads the index value: a JSON string of hex digits, digits,
// ',' and ';' only, so it needs no JSON decoder (a reflective one costs a
// wasm guest about 1 µs a byte).
func parseIndex(v json.RawMessage) []indexEntry {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return nil
	}
	s := string(v[1 : len(v)-1])
	if s == "" {
		return nil
	}
	var out []indexEntry
	for _, rec := range strings.Split(s, ";") {
		f := strings.Split(rec, ",")
		if len(f) != 5 {
			continue
		}
		e := indexEntry{hash: f[0]}
		e.entries, _ = strconv.Atoi(f[1])
		e.bytes, _ = strconv.ParseInt(f[2], 10, 64)
		e.expires, _ = strconv.ParseInt(f[3], 10, 64)
		e.seq, _ = strconv.ParseInt(f[4], 10, 64)
		out = append(out, e)
	}
	return out
}

// formatIndex writes the index value (see parseIndex).
func formatIndex(es []indexEntry) json.RawMessage {
	b := make([]byte, 0, 2+len(es)*110)
	b = append(b, '"')
	for i, e := range es {
		if i > 0 {
			b = append(b, ';')
		}
		b = append(b, e.hash...)
		for _, n := range []int64{int64(e.entries), e.bytes, e.expires, e.seq} {
			b = append(b, ',')
			b = strconv.AppendInt(b, n, 10)
		}
	}
	return append(b, '"')
}

func errBusy() *protocol.Error { return protocol.FSError(protocol.DomainFilesystemBusy) }

// updateIndex applies fn to the index (expired entries already dropped)
// and swaps the result in; fn returns the new index and the hashes whose
// records to delete. It retries on a concurrent change.
func updateIndex(now int64, fn func([]indexEntry) ([]indexEntry, []string)) error {
	for i := 0; i < casAttempts; i++ {
		cur, err := store.Volatile.Get(previewIndex)
		if err != nil {
			return err
		}
		var live []indexEntry
		var drop []string
		for _, e := range parseIndex(cur.Value) {
			if now < e.expires {
				live = append(live, e)
			} else {
				drop = append(drop, e.hash)
			}
		}
		next, gone := fn(live)
		r, err := store.Volatile.CAS(previewIndex, cur.Revision, formatIndex(next))
		if err != nil {
			return err
		}
		if r.Swapped {
			for _, h := range append(drop, gone...) {
				store.Volatile.Delete(previewKeyPrefix + h)
			}
			return nil
		}
	}
	return errBusy()
}

// invalidateOnTimeout forgets every preview when err says the request's
// outcome is unknown (its work may still run: docs/FS.md). It returns err.
func invalidateOnTimeout(err error) error {
	if protocol.AsError(err).DomainCode() == protocol.DomainFilesystemOutcomeUnknown {
		store.Volatile.Delete(previewIndex)
	}
	return err
}

// walkArgs are fs.walk's and fs.remove's limits: one preview's.
func walkArgs(path string, recursive bool) contract.FSWalkArgs {
	return contract.FSWalkArgs{Path: path, Recursive: recursive, MaxEntries: protocol.FSPreviewMaxEntries,
		MaxDepth: protocol.FSPreviewMaxDepth, MaxBytes: protocol.FSPreviewMaxBytes, EntryOverhead: candidateOverhead}
}

func tokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// deletePreview implements node.fs.delete.preview: without recursive the
// target must be a file, a symlink or an empty directory
// (directory_not_empty); allowed roots and their ancestors are
// path_not_allowed (the host's walk refuses them).
func deletePreview(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.FSDeletePreviewParams
	if err := decodeMut(req, &p, func() *protocol.Error { return nodePath(p.NodeID, p.Path)() }); err != nil {
		return nil, err
	}
	w, err := fs.Walk(walkArgs(p.Path, p.Recursive))
	if err != nil {
		return nil, invalidateOnTimeout(err)
	}
	if w.TooLarge {
		return nil, protocol.FSError(protocol.DomainPreviewTooLarge)
	}
	if w.Type == "directory" && !p.Recursive && !w.Empty {
		return nil, protocol.FSError(protocol.DomainDirectoryNotEmpty)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, protocol.FSError(protocol.DomainFilesystemError)
	}
	token := base64.RawURLEncoding.EncodeToString(raw[:])
	hash := tokenHash(token)
	now := time.Now()
	expires := now.Add(protocol.FSPreviewTTLMs * time.Millisecond).UnixMilli()
	rec, _ := json.Marshal(previewRec{Path: p.Path, Dev: w.Dev, Ino: w.Ino, Recursive: p.Recursive, TreeDigest: w.TreeDigest})
	if _, err := store.Volatile.Put(previewKeyPrefix+hash, rec, store.ExpiresAt(expires)); err != nil {
		return nil, err
	}
	add := indexEntry{hash: hash, entries: w.Entries, bytes: w.Bytes, expires: expires, seq: now.UnixNano()}
	err = updateIndex(now.UnixMilli(), func(live []indexEntry) ([]indexEntry, []string) {
		var gone []string
		for len(live) > 0 && !fits(live, add) {
			oldest := 0
			for i, e := range live {
				if e.seq < live[oldest].seq {
					oldest = i
				}
			}
			gone = append(gone, live[oldest].hash)
			live = append(live[:oldest], live[oldest+1:]...)
		}
		return append(live, add), gone
	})
	if err != nil {
		store.Volatile.Delete(previewKeyPrefix + hash)
		return nil, err
	}
	return &sdk.Result{Payload: protocol.FSDeletePreviewResult{
		Path: w.Path,
		Stat: protocol.FSStat{Path: w.Path, Type: w.Type, Size: w.Size, MtimeMs: msOf(w.MtimeNs), Mode: w.Mode,
			Mime: shape.MIME(w.Path), Readable: w.Readable, Writable: w.Writable},
		ChildCount:        w.Children,
		ChildrenDigest:    w.ChildrenDigest,
		CandidateCount:    w.Entries,
		ConfirmationToken: token,
		ExpiresAtMs:       expires,
	}}, nil
}

// fits reports whether add fits beside live within the node-wide limits.
func fits(live []indexEntry, add indexEntry) bool {
	entries, bytes := add.entries, add.bytes
	for _, e := range live {
		entries += e.entries
		bytes += e.bytes
	}
	return len(live)+1 <= protocol.FSPreviewsMax && entries <= protocol.FSPreviewsMaxEntries && bytes <= protocol.FSPreviewsMaxBytes
}

// deleteEntry implements node.fs.delete. The token is consumed whatever
// happens. path must be the previewed path string and confirm must equal
// it exactly (confirmation_mismatch). The host removes the target only if
// it, and every entry below it, is still what the preview saw (else
// stale_preview, with mutationMayHaveApplied when it changed during the
// removal).
func deleteEntry(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.FSDeleteParams
	if err := decodeMut(req, &p, p.Check); err != nil {
		return nil, err
	}
	// The path's own faults are answered before the token is touched, as
	// the node resolves paths (docs/FS.md, "Roots and paths").
	if err := lexicalCheck(p.Path); err != nil {
		return nil, err
	}
	hash := tokenHash(p.ConfirmationToken)
	now := time.Now().UnixMilli()
	found := false
	err := updateIndex(now, func(live []indexEntry) ([]indexEntry, []string) {
		found = false
		for i, e := range live {
			if e.hash == hash {
				found = true
				return append(live[:i:i], live[i+1:]...), nil
			}
		}
		return live, nil
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, protocol.FSError(protocol.DomainStalePreview)
	}
	got, err := store.Volatile.Get(previewKeyPrefix + hash)
	store.Volatile.Delete(previewKeyPrefix + hash)
	if err != nil {
		return nil, err
	}
	var rec previewRec
	if !got.Found || json.Unmarshal(got.Value, &rec) != nil || rec.Path != p.Path {
		return nil, protocol.FSError(protocol.DomainStalePreview)
	}
	if p.Confirm != rec.Path {
		return nil, protocol.FSError(protocol.DomainConfirmationMismatch)
	}
	w := walkArgs(p.Path, rec.Recursive)
	r, err := fs.Remove(contract.FSRemoveArgs{Path: p.Path, Dev: rec.Dev, Ino: rec.Ino, Recursive: rec.Recursive,
		TreeDigest: rec.TreeDigest, MaxEntries: w.MaxEntries, MaxDepth: w.MaxDepth, MaxBytes: w.MaxBytes, EntryOverhead: w.EntryOverhead})
	if err != nil {
		if _, ok := precondition(err); ok {
			return nil, specError(err, protocol.DomainStalePreview)
		}
		return nil, invalidateOnTimeout(err)
	}
	return &sdk.Result{Payload: protocol.FSDeleteResult{Path: r.Path, Deleted: true}}, nil
}

// lexicalCheck refuses what the node refuses of any path before resolving
// it: a `..` component (path_not_allowed, even when the result would stay
// inside a root) and a component over 255 bytes (name_too_long).
func lexicalCheck(p string) error {
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return protocol.FSError(protocol.DomainPathNotAllowed)
		}
		if len(c) > protocol.FSMaxNameBytes {
			return protocol.FSError(protocol.DomainNameTooLong)
		}
	}
	return nil
}
