package fs

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"
	"sort"

	"golang.org/x/sys/unix"

	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// ident is what a tree digest binds for each entry: identity (dev, ino),
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

// Host bounds of a walk's limits, whatever a module asks: they bound the
// memory and time of one fs.walk or fs.remove.
const (
	walkMaxEntries  = 100_000
	walkMaxDepth    = 256
	walkMaxBytes    = 64 << 20
	walkMaxOverhead = 4096
)

// walkLimits are one walk's limits (contract.FSWalkArgs).
type walkLimits struct {
	entries  int
	depth    int
	bytes    int64
	overhead int64
}

func newWalkLimits(entries, depth int, bytes, overhead int64) (walkLimits, error) {
	switch {
	case entries < 1 || entries > walkMaxEntries:
		return walkLimits{}, protocol.InvalidParams("maxEntries", "maxEntries must be 1 to 100000")
	case depth < 0 || depth > walkMaxDepth:
		return walkLimits{}, protocol.InvalidParams("maxDepth", "maxDepth must be 0 to 256")
	case bytes < 1 || bytes > walkMaxBytes:
		return walkLimits{}, protocol.InvalidParams("maxBytes", "maxBytes must be 1 to 67108864")
	case overhead < 0 || overhead > walkMaxOverhead:
		return walkLimits{}, protocol.InvalidParams("entryOverhead", "entryOverhead must be 0 to 4096")
	}
	return walkLimits{entries, depth, bytes, overhead}, nil
}

// errWalkTooLarge ends a walk that passed one of its limits.
var errWalkTooLarge = errors.New("walk limit passed")

// collector walks a tree within its limits, hashing what it sees in a
// fixed order (names sorted bytewise, depth first). m, when not nil,
// keeps every entry's ident for the removal that follows.
type collector struct {
	f        *FS
	lim      walkLimits
	m        map[string]ident
	entries  int // including the target
	bytes    int64
	children int
	childH   hash.Hash
	treeH    hash.Hash
	buf      [8]byte
}

func newCollector(f *FS, lim walkLimits, keep bool) *collector {
	c := &collector{f: f, lim: lim, childH: sha256.New(), treeH: sha256.New()}
	if keep {
		c.m = map[string]ident{}
	}
	return c
}

func (c *collector) put(h hash.Hash, vs ...uint64) {
	for _, v := range vs {
		binary.BigEndian.PutUint64(c.buf[:], v)
		h.Write(c.buf[:])
	}
}

// record counts and hashes one entry (name is the target's canonical
// path for the target, else the path relative to it).
func (c *collector) record(name string, id ident) error {
	c.entries++
	c.bytes += int64(len(name)) + c.lim.overhead
	if c.entries > c.lim.entries || c.bytes > c.lim.bytes {
		return errWalkTooLarge
	}
	c.treeH.Write([]byte(name))
	c.treeH.Write([]byte{0})
	c.put(c.treeH, id.dev, id.ino, uint64(id.mode), uint64(id.uid), uint64(id.gid), uint64(id.size), uint64(id.mtimeNs))
	return nil
}

// collect walks the open directory dfd (relative path rel below the
// target, depth its level) recording every entry, hidden ones included.
// Symlinks are recorded, never followed; directories are opened with
// O_NOFOLLOW one at a time. A directory that is an allowed root makes the
// whole walk path_not_allowed.
func (c *collector) collect(dfd int, rel string, depth int) error {
	var names []string
	if err := readDirNames(dfd, func(n string) { names = append(names, n) }); err != nil {
		return mapErrno(err)
	}
	sort.Strings(names)
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if err == unix.ENOENT {
				continue // vanished: not seen
			}
			return mapErrno(err)
		}
		child := name
		if rel != "" {
			child = rel + "/" + name
		}
		if depth+1 > c.lim.depth {
			return errWalkTooLarge
		}
		id := identOf(&st)
		if err := c.record(child, id); err != nil {
			return err
		}
		if c.m != nil {
			c.m[child] = id
		}
		if depth == 0 {
			c.children++
			c.childH.Write([]byte(name))
			c.childH.Write([]byte{0})
			c.put(c.childH, id.dev, id.ino, uint64(id.mode), uint64(id.size), uint64(id.mtimeNs))
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

// gather walks the target (named dirName in dir, canonical path canon,
// lstat st): the target itself and, for a directory, with recursive every
// entry below it; without recursive only whether it is empty (empty).
func (c *collector) gather(dir int, dirName, canon string, st *unix.Stat_t, recursive bool) (empty bool, err error) {
	if err := c.record(canon, identOf(st)); err != nil {
		return false, err
	}
	if !isDir(st) {
		return false, nil
	}
	dfd, err := c.f.openAt(dir, dirName, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return false, mapErrno(err)
	}
	defer c.f.closeFD(dfd)
	if !recursive {
		empty = true
		if err := readDirNames(dfd, func(string) { empty = false }); err != nil {
			return false, mapErrno(err)
		}
		return empty, nil
	}
	if err := c.collect(dfd, "", 0); err != nil {
		return false, err
	}
	return c.entries == 1, nil
}

// Walk implements fs.walk (the tree walk of delete previews): the
// canonical target's raw stat and, within the limits, the counts and
// digests of the tree (contract.FSWalkResult). Allowed roots and their
// ancestors are path_not_allowed, and so is a tree holding one.
func (f *FS) Walk(a contract.FSWalkArgs) (*contract.FSWalkResult, error) {
	lim, err := newWalkLimits(a.MaxEntries, a.MaxDepth, a.MaxBytes, a.EntryOverhead)
	if err != nil {
		return nil, err
	}
	t, err := f.resolve(a.Path, walkOpts{followFinal: true})
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
	r := &contract.FSWalkResult{Path: t.path(), Type: typeName(t.st.Mode), Size: t.st.Size, MtimeNs: mtimeNs(&t.st),
		Mode: t.st.Mode, Readable: accessible(t.dir, t.name, unix.R_OK), Writable: accessible(t.dir, t.name, unix.W_OK),
		Dev: t.st.Dev, Ino: t.st.Ino}
	c := newCollector(f, lim, false)
	empty, err := c.gather(t.dir, t.name, t.path(), &t.st, a.Recursive)
	if err == errWalkTooLarge {
		r.TooLarge = true
		return r, nil
	}
	if err != nil {
		return nil, err
	}
	r.Empty, r.Entries, r.Bytes, r.Children = empty, c.entries, c.bytes, c.children
	r.ChildrenDigest = hex.EncodeToString(c.childH.Sum(nil))
	r.TreeDigest = hex.EncodeToString(c.treeH.Sum(nil))
	return r, nil
}

// Remove implements fs.remove. The target is resolved (its canonical
// target), must still be inode (a.Dev, a.Ino), is captured under a
// .lemon-delete-* name in its directory, and only then is the captured
// tree walked with the same limits and compared with a.TreeDigest (for a
// directory without a.Recursive: it must be empty). Any difference
// renames it back and is precondition_failed (field present or identity).
// Then every entry is removed, each only if it is still what the walk saw
// (symlinks are unlinked, never followed). If the tree changes during the
// removal the answer is precondition_failed with
// mutationMayHaveApplied:true and the partly removed entry is renamed
// back if its name is still free (else it stays under its capture name).
func (f *FS) Remove(a contract.FSRemoveArgs) (*contract.FSRemoveResult, error) {
	lim, err := newWalkLimits(a.MaxEntries, a.MaxDepth, a.MaxBytes, a.EntryOverhead)
	if err != nil {
		return nil, err
	}
	comps, err := f.lexical(a.Path)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.walk(comps, walkOpts{followFinal: true})
	if err != nil {
		if protocol.AsError(err).DomainCode() == protocol.DomainNotFound {
			return nil, errPrecondition(contract.FSFieldPresent)
		}
		return nil, err
	}
	defer f.closeTarget(t)
	if !t.exists {
		return nil, errPrecondition(contract.FSFieldPresent)
	}
	if t.st.Dev != a.Dev || t.st.Ino != a.Ino {
		return nil, errPrecondition(contract.FSFieldIdentity)
	}
	if t.isRoot || f.isRootIdentity(&t.st) || f.coversRoot(t.canon) {
		return nil, errNotAllowed()
	}
	tmp := captureName(".lemon-delete-")
	if err := unix.Renameat2(t.dir, t.name, t.dir, tmp, unix.RENAME_NOREPLACE); err != nil {
		if isRenameUnsupported(err) {
			return nil, protocol.FSError(protocol.DomainAtomicMoveUnavailable)
		}
		if err == unix.ENOENT {
			return nil, errPrecondition(contract.FSFieldPresent)
		}
		return nil, mapErrno(err)
	}
	rollback := func() { unix.Renameat2(t.dir, tmp, t.dir, t.name, unix.RENAME_NOREPLACE) }
	var st unix.Stat_t
	if err := unix.Fstatat(t.dir, tmp, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Dev != a.Dev || st.Ino != a.Ino {
		rollback()
		return nil, errPrecondition(contract.FSFieldIdentity)
	}
	// Verify the whole captured tree before removing anything.
	c := newCollector(f, lim, true)
	empty, err := c.gather(t.dir, tmp, t.path(), &st, a.Recursive)
	if err == nil && isDir(&st) && !a.Recursive && !empty {
		err = errWalkTooLarge
	}
	if err != nil || hex.EncodeToString(c.treeH.Sum(nil)) != a.TreeDigest {
		rollback()
		if err != nil && protocol.AsError(err).DomainCode() == protocol.DomainFilesystemBusy {
			return nil, err
		}
		return nil, errPrecondition(contract.FSFieldIdentity)
	}
	if !isDir(&st) {
		if err := unix.Unlinkat(t.dir, tmp, 0); err != nil {
			rollback()
			return nil, mapErrno(err)
		}
		return &contract.FSRemoveResult{Path: t.path()}, nil
	}
	dfd, err := f.openAt(t.dir, tmp, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		rollback()
		return nil, mapErrno(err)
	}
	err = f.removeTree(dfd, "", c.m)
	f.closeFD(dfd)
	if err == nil {
		err = unix.Unlinkat(t.dir, tmp, unix.AT_REMOVEDIR)
	}
	if err != nil {
		rollback()
		return nil, errPrecondition(contract.FSFieldIdentity).WithRetry(false, true)
	}
	return &contract.FSRemoveResult{Path: t.path()}, nil
}

// errChanged ends a removal whose tree changed.
var errChanged = errors.New("tree changed")

// removeTree deletes every entry below the open directory dfd, each only
// if it is still the entry the verifying walk saw. Symlinks are unlinked,
// not followed.
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
			return errChanged
		}
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || identOf(&st) != want {
			return errChanged
		}
		if isDir(&st) {
			cfd, err := f.openAt(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				return err
			}
			var cst unix.Stat_t
			if err := unix.Fstat(cfd, &cst); err != nil || cst.Dev != want.dev || cst.Ino != want.ino {
				f.closeFD(cfd)
				return errChanged
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
