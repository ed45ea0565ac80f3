package fs

import (
	"crypto/rand"
	"encoding/base64"
	"sync"
	"time"

	"lemon/hostcalls/contract"
	"lemon/plugins/fs/shape"
	"lemon/protocol"
)

// Test adapters: the fs module's decisions (plugins/fs/mutate*.go) over
// the mutation primitives, in the shapes the tests of this package were
// written against (node.fs.write, move, delete.preview and delete), so
// the confinement, race and failure tests keep exercising the primitives
// unchanged. They mirror the module and carry no token limits or expiry:
// those are the module's, tested through the real host in plugins/fs.

func revisionRange(ms int64) (lo, hi int64) { return ms * 1e6, ms*1e6 + 999_999 }

func msOfNs(ns int64) int64 {
	ms := ns / 1e6
	if ns%1e6 < 0 {
		ms--
	}
	return ms
}

func asSpec(err error, domain string) error {
	pe := protocol.AsError(err)
	if pe.DomainCode() != contract.FSPreconditionFailed {
		return err
	}
	e := protocol.FSError(domain)
	if d := pe.Details; d.MutationMayHaveApplied != nil {
		e.WithRetry(d.RetrySafe != nil && *d.RetrySafe, *d.MutationMayHaveApplied)
	}
	return e
}

// Write is node.fs.write's decision over WriteAt.
func (f *FS) Write(a protocol.FSWriteCall, data []byte) (*protocol.FSWriteResult, error) {
	if len(data) > protocol.FSMaxWriteBytes {
		return nil, protocol.InvalidParams("dataBase64", "dataBase64 decodes to more than 1048576 bytes")
	}
	exp := a.ExpectedModifiedAtMs
	if exp != nil && (*exp < 0 || *exp > protocol.FSMaxOffset) {
		return nil, protocol.InvalidParams("expectedModifiedAtMs", "expectedModifiedAtMs must be an integer from 0 to 9007199254740991")
	}
	args := contract.FSWriteAtArgs{Path: a.Path, Offset: a.Offset, Truncate: a.Truncate, Mkdirs: a.Mkdirs}
	if exp == nil || *exp == 0 {
		args.Expect.Absent = true
	} else {
		lo, hi := revisionRange(*exp)
		args.Expect.MtimeNsMin, args.Expect.MtimeNsMax, args.MtimeNsAfter = &lo, &hi, hi+1
	}
	r, err := f.WriteAt(args, data)
	if err != nil {
		return nil, asSpec(err, protocol.DomainRevisionConflict)
	}
	return &protocol.FSWriteResult{Path: r.Path, Offset: a.Offset, BytesWritten: r.BytesWritten, Size: r.Size, MtimeMs: msOfNs(r.MtimeNs)}, nil
}

// Move is node.fs.move's decision over Rename.
func (f *FS) Move(p, dest string, expected int64, overwrite bool) (*protocol.FSMoveResult, error) {
	if expected < 0 || expected > protocol.FSMaxOffset {
		return nil, protocol.InvalidParams("expectedModifiedAtMs", "expectedModifiedAtMs must be an integer from 0 to 9007199254740991")
	}
	lo, hi := revisionRange(expected)
	r, err := f.Rename(contract.FSRenameArgs{Path: p, Destination: dest, NoReplace: !overwrite,
		Expect: contract.FSExpect{MtimeNsMin: &lo, MtimeNsMax: &hi}})
	if err != nil {
		if pe := protocol.AsError(err); pe.DomainCode() == contract.FSPreconditionFailed && pe.Details.Field == contract.FSFieldDestination {
			return nil, asSpec(err, protocol.DomainAlreadyExists)
		}
		return nil, asSpec(err, protocol.DomainRevisionConflict)
	}
	if r.Same {
		if !overwrite {
			return nil, protocol.FSError(protocol.DomainAlreadyExists)
		}
		if msOfNs(r.MtimeNs) != expected {
			return nil, protocol.FSError(protocol.DomainRevisionConflict)
		}
	}
	return &protocol.FSMoveResult{Path: r.Path, Destination: r.Destination, Moved: true}, nil
}

// testPreview is what the adapter keeps of a preview (the module keeps
// the same in its volatile store).
type testPreview struct {
	f          *FS
	path       string
	dev, ino   uint64
	recursive  bool
	treeDigest string
}

var (
	testPreviewsMu sync.Mutex
	testPreviews   = map[string]testPreview{}
	// testWalkLimits are the walk limits the adapter passes (the
	// module's, protocol.FSPreview*); tests shrink them.
	testWalkLimits = contract.FSWalkArgs{MaxEntries: protocol.FSPreviewMaxEntries, MaxDepth: protocol.FSPreviewMaxDepth,
		MaxBytes: protocol.FSPreviewMaxBytes, EntryOverhead: 64}
)

// Preview is node.fs.delete.preview's decision over Walk.
func (f *FS) Preview(p string, recursive bool) (*protocol.FSDeletePreviewResult, error) {
	a := testWalkLimits
	a.Path, a.Recursive = p, recursive
	w, err := f.Walk(a)
	if err != nil {
		return nil, err
	}
	if w.TooLarge {
		return nil, protocol.FSError(protocol.DomainPreviewTooLarge)
	}
	if w.Type == "directory" && !recursive && !w.Empty {
		return nil, protocol.FSError(protocol.DomainDirectoryNotEmpty)
	}
	var raw [32]byte
	rand.Read(raw[:])
	token := base64.RawURLEncoding.EncodeToString(raw[:])
	testPreviewsMu.Lock()
	testPreviews[token] = testPreview{f: f, path: p, dev: w.Dev, ino: w.Ino, recursive: recursive, treeDigest: w.TreeDigest}
	testPreviewsMu.Unlock()
	return &protocol.FSDeletePreviewResult{Path: w.Path,
		Stat: protocol.FSStat{Path: w.Path, Type: w.Type, Size: w.Size, MtimeMs: msOfNs(w.MtimeNs), Mode: w.Mode,
			Mime: shape.MIME(w.Path), Readable: w.Readable, Writable: w.Writable},
		ChildCount: w.Children, ChildrenDigest: w.ChildrenDigest, CandidateCount: w.Entries, ConfirmationToken: token,
		ExpiresAtMs: time.Now().Add(protocol.FSPreviewTTLMs * time.Millisecond).UnixMilli()}, nil
}

// Delete is node.fs.delete's decision over Remove (one-use tokens).
func (f *FS) Delete(p, confirm, token string) (*protocol.FSDeleteResult, error) {
	testPreviewsMu.Lock()
	pv, ok := testPreviews[token]
	delete(testPreviews, token)
	testPreviewsMu.Unlock()
	if !ok || pv.f.core != f.core || pv.path != p {
		return nil, protocol.FSError(protocol.DomainStalePreview)
	}
	if confirm != pv.path {
		return nil, protocol.FSError(protocol.DomainConfirmationMismatch)
	}
	l := testWalkLimits
	r, err := f.Remove(contract.FSRemoveArgs{Path: p, Dev: pv.dev, Ino: pv.ino, Recursive: pv.recursive, TreeDigest: pv.treeDigest,
		MaxEntries: l.MaxEntries, MaxDepth: l.MaxDepth, MaxBytes: l.MaxBytes, EntryOverhead: l.EntryOverhead})
	if err != nil {
		return nil, asSpec(err, protocol.DomainStalePreview)
	}
	return &protocol.FSDeleteResult{Path: r.Path, Deleted: true}, nil
}
