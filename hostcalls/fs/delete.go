package fs

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"lemon/protocol"
)

// ident is what a preview binds for each candidate: identity (dev, ino),
// type and permissions, owner, size and the ns modification time. Capture
// by rename changes only ctime, which is therefore not part of it.
type ident struct {
	dev, ino uint64
	mode     uint32
	uid, gid uint32
	size     int64
	mtimeNs  int64
}

func identOf(st *unix.Stat_t) ident {
	return ident{dev: st.Dev, ino: st.Ino, mode: st.Mode, uid: st.Uid, gid: st.Gid, size: st.Size,
		mtimeNs: st.Mtim.Sec*1e9 + st.Mtim.Nsec}
}

// candidateOverhead is the storage charged per bound entry on top of its
// relative path bytes (the ident plus map bookkeeping).
const candidateOverhead = 64

// preview is one outstanding delete preview.
type preview struct {
	key       [32]byte // sha256 of the token; the token itself is not kept
	path      string   // the caller's original path string
	canon     string
	target    ident
	cands     map[string]ident // relative path below the target -> ident
	entries   int              // candidates including the target
	bytes     int64
	expires   time.Time
	seq       uint64
	recursive bool
}

// previewStore holds previews in memory only: a restart loses every token.
// It keeps at most lim.previews previews, lim.totalEntries bound entries
// and lim.totalBytes of candidate storage, evicting the oldest first.
type previewStore struct {
	mu      sync.Mutex
	m       map[[32]byte]*preview
	entries int
	bytes   int64
	seq     uint64
}

func (s *previewStore) init() { s.m = map[[32]byte]*preview{} }

// clear invalidates every token (deadline, interruption, Close).
func (s *previewStore) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m = map[[32]byte]*preview{}
	s.entries, s.bytes = 0, 0
}

func (s *previewStore) removeLocked(p *preview) {
	delete(s.m, p.key)
	s.entries -= p.entries
	s.bytes -= p.bytes
}

// add stores p, first dropping expired previews and then the oldest until
// the service-wide limits hold.
func (s *previewStore) add(p *preview, lim *limits, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.m {
		if !now.Before(q.expires) {
			s.removeLocked(q)
		}
	}
	for len(s.m) > 0 && (len(s.m)+1 > lim.previews || s.entries+p.entries > lim.totalEntries || s.bytes+p.bytes > lim.totalBytes) {
		var oldest *preview
		for _, q := range s.m {
			if oldest == nil || q.seq < oldest.seq {
				oldest = q
			}
		}
		s.removeLocked(oldest)
	}
	s.seq++
	p.seq = s.seq
	s.m[p.key] = p
	s.entries += p.entries
	s.bytes += p.bytes
}

// take removes and returns the unexpired preview of token (one use).
func (s *previewStore) take(token string, now time.Time) *preview {
	key := sha256.Sum256([]byte(token))
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.m[key]
	if p == nil {
		return nil
	}
	s.removeLocked(p)
	if !now.Before(p.expires) {
		return nil
	}
	return p
}

func (s *previewStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

func errStale() *protocol.Error         { return protocol.FSError(protocol.DomainStalePreview) }
func errTooLarge() *protocol.Error      { return protocol.FSError(protocol.DomainPreviewTooLarge) }
func staleAfterChange() *protocol.Error { return errStale().WithRetry(false, true) }

// collector records the entries below a directory within one preview's
// limits; any excess is preview_too_large, never a pruned set.
type collector struct {
	f        *FS
	m        map[string]ident
	entries  int // including the target
	bytes    int64
	children []childRec // immediate children, for childCount and the digest
}

type childRec struct {
	name string
	id   ident
}

// collect walks the open directory dfd (relative path rel below the
// target, depth its level) recording every entry, hidden ones included.
// Symlinks are recorded, never followed; directories are opened with
// O_NOFOLLOW one at a time. A directory that is an allowed root makes the
// whole preview path_not_allowed.
func (c *collector) collect(dfd int, rel string, depth int) error {
	var names []string
	if err := readDirNames(dfd, func(n string) { names = append(names, n) }); err != nil {
		return mapErrno(err)
	}
	sort.Strings(names)
	lim := &c.f.lim
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if err == unix.ENOENT {
				continue // vanished: not a candidate
			}
			return mapErrno(err)
		}
		child := name
		if rel != "" {
			child = rel + "/" + name
		}
		if depth+1 > lim.previewDepth {
			return errTooLarge()
		}
		c.entries++
		c.bytes += int64(len(child)) + candidateOverhead
		if c.entries > lim.previewEntries || c.bytes > lim.previewBytes {
			return errTooLarge()
		}
		id := identOf(&st)
		c.m[child] = id
		if depth == 0 {
			c.children = append(c.children, childRec{name, id})
		}
		if isDir(&st) {
			if c.f.isRootIdentity(&st) {
				return errNotAllowed()
			}
			cfd, err := c.f.openAt(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				return mapErrno(err)
			}
			err = c.collect(cfd, child, depth+1)
			c.f.closeFD(cfd)
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *collector) digest() string {
	h := sha256.New()
	var b [8]byte
	for _, ch := range c.children {
		h.Write([]byte(ch.name))
		h.Write([]byte{0})
		for _, v := range []uint64{ch.id.dev, ch.id.ino, uint64(ch.id.mode), uint64(ch.id.size), uint64(ch.id.mtimeNs)} {
			binary.BigEndian.PutUint64(b[:], v)
			h.Write(b[:])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// gather binds the target and, for a directory, every entry below it.
// nonRecursiveEmpty demands an empty directory (the default preview).
func (f *FS) gather(t *target, dirName string, recursive bool) (*collector, error) {
	c := &collector{f: f, m: map[string]ident{}, entries: 1, bytes: int64(len(t.path())) + candidateOverhead}
	if c.bytes > f.lim.previewBytes {
		return nil, errTooLarge()
	}
	if !isDir(&t.st) {
		return c, nil
	}
	dfd, err := f.openAt(t.dir, dirName, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, mapErrno(err)
	}
	defer f.closeFD(dfd)
	if !recursive {
		empty := true
		if err := readDirNames(dfd, func(string) { empty = false }); err != nil {
			return nil, mapErrno(err)
		}
		if !empty {
			return nil, protocol.FSError(protocol.DomainDirectoryNotEmpty)
		}
		return c, nil
	}
	if err := c.collect(dfd, "", 0); err != nil {
		return nil, err
	}
	return c, nil
}

// Preview implements fs.delete_preview (spec node.fs.delete.preview): it
// binds the canonical target and every candidate below it (recursive
// only; otherwise the target must be a file or an empty directory) to a
// fresh one-use token valid for five minutes. Limits per preview: 10,000
// entries, 64 levels, 8 MiB of candidate storage (preview_too_large).
// Allowed roots and their ancestors are path_not_allowed.
func (f *FS) Preview(p string, recursive bool) (*protocol.FSDeletePreviewResult, error) {
	t, err := f.resolve(p, walkOpts{followFinal: true})
	if err != nil {
		return nil, err
	}
	defer f.closeTarget(t)
	if !t.exists {
		return nil, errNotFound()
	}
	if t.isRoot || f.isRootIdentity(&t.st) || f.coversRoot(t.canon) {
		return nil, errNotAllowed()
	}
	c, err := f.gather(t, t.name, recursive)
	if err != nil {
		return nil, err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, protocol.FSError(protocol.DomainFilesystemError)
	}
	token := base64.RawURLEncoding.EncodeToString(raw[:])
	now := f.now()
	pv := &preview{
		key: sha256.Sum256([]byte(token)), path: p, canon: t.path(), target: identOf(&t.st),
		cands: c.m, entries: c.entries, bytes: c.bytes,
		expires: now.Add(f.lim.previewTTL), recursive: recursive,
	}
	f.previews.add(pv, &f.lim, now)
	return &protocol.FSDeletePreviewResult{
		Path:              t.path(),
		Stat:              *statOf(t.dir, t.name, &t.st, t.path()),
		ChildCount:        len(c.children),
		ChildrenDigest:    c.digest(),
		CandidateCount:    c.entries,
		ConfirmationToken: token,
		ExpiresAtMs:       pv.expires.UnixMilli(),
	}, nil
}

// Delete implements fs.delete (spec node.fs.delete). The token is consumed
// whatever happens. path must be the previewed path string and confirm must
// equal it exactly (confirmation_mismatch otherwise). The target is
// re-resolved, captured under a .lemon-delete-* name in its directory, and
// only then compared with the preview: the target and the full candidate
// set must be unchanged, else it is renamed back and the result is
// stale_preview. Deletion unlinks symlinks without following them. If the
// tree changes during deletion the result is stale_preview with
// mutationMayHaveApplied:true and the partly deleted entry is renamed back
// if its name is still free (else it stays under its temporary name).
func (f *FS) Delete(p, confirm, token string) (*protocol.FSDeleteResult, error) {
	comps, err := f.lexical(p)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	pv := f.previews.take(token, f.now())
	if pv == nil || pv.path != p {
		return nil, errStale()
	}
	if confirm != pv.path {
		return nil, protocol.FSError(protocol.DomainConfirmationMismatch)
	}
	t, err := f.walk(comps, walkOpts{followFinal: true})
	if err != nil {
		if protocol.AsError(err).DomainCode() == protocol.DomainNotFound {
			return nil, errStale()
		}
		return nil, err
	}
	defer f.closeTarget(t)
	if !t.exists || t.path() != pv.canon || identOf(&t.st) != pv.target {
		return nil, errStale()
	}
	if t.isRoot || f.isRootIdentity(&t.st) {
		return nil, errNotAllowed()
	}
	tmp := captureName(".lemon-delete-")
	if err := unix.Renameat2(t.dir, t.name, t.dir, tmp, unix.RENAME_NOREPLACE); err != nil {
		if isRenameUnsupported(err) {
			return nil, protocol.FSError(protocol.DomainAtomicMoveUnavailable)
		}
		if err == unix.ENOENT {
			return nil, errStale()
		}
		return nil, mapErrno(err)
	}
	rollback := func() { unix.Renameat2(t.dir, tmp, t.dir, t.name, unix.RENAME_NOREPLACE) }
	var st unix.Stat_t
	if err := unix.Fstatat(t.dir, tmp, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || identOf(&st) != pv.target {
		rollback()
		return nil, errStale()
	}
	if !isDir(&st) {
		if err := unix.Unlinkat(t.dir, tmp, 0); err != nil {
			rollback()
			return nil, mapErrno(err)
		}
		return &protocol.FSDeleteResult{Path: pv.canon, Deleted: true}, nil
	}
	// Verify the whole captured tree before removing anything.
	c, err := f.gather(&target{dir: t.dir, st: st, canon: t.canon}, tmp, pv.recursive)
	if err != nil || !sameCandidates(c.m, pv.cands) {
		rollback()
		if err != nil && protocol.AsError(err).DomainCode() == protocol.DomainFilesystemBusy {
			return nil, err
		}
		return nil, errStale()
	}
	dfd, err := f.openAt(t.dir, tmp, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		rollback()
		return nil, mapErrno(err)
	}
	err = f.removeTree(dfd, "", pv.cands)
	f.closeFD(dfd)
	if err == nil {
		err = unix.Unlinkat(t.dir, tmp, unix.AT_REMOVEDIR)
	}
	if err != nil {
		rollback()
		return nil, staleAfterChange()
	}
	return &protocol.FSDeleteResult{Path: pv.canon, Deleted: true}, nil
}

func sameCandidates(a, b map[string]ident) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// removeTree deletes every entry below the open directory dfd, each only
// if it is still the bound candidate. Symlinks are unlinked, not followed.
func (f *FS) removeTree(dfd int, rel string, cands map[string]ident) error {
	var names []string
	if err := readDirNames(dfd, func(n string) { names = append(names, n) }); err != nil {
		return err
	}
	for _, name := range names {
		child := name
		if rel != "" {
			child = rel + "/" + name
		}
		want, ok := cands[child]
		var st unix.Stat_t
		if !ok {
			return errStale()
		}
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || identOf(&st) != want {
			return errStale()
		}
		if isDir(&st) {
			cfd, err := f.openAt(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				return err
			}
			var cst unix.Stat_t
			if err := unix.Fstat(cfd, &cst); err != nil || cst.Dev != want.dev || cst.Ino != want.ino {
				f.closeFD(cfd)
				return errStale()
			}
			err = f.removeTree(cfd, child, cands)
			f.closeFD(cfd)
			if err != nil {
				return err
			}
			if err := unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR); err != nil {
				return err
			}
			continue
		}
		if err := unix.Unlinkat(dfd, name, 0); err != nil {
			return err
		}
	}
	return nil
}
