package fs

import (
	"crypto/rand"
	"encoding/hex"

	"golang.org/x/sys/unix"

	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// captureName returns a fresh temporary name with prefix (".lemon-move-"
// or ".lemon-delete-") and 16 random hex digits.
func captureName(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// isRenameUnsupported reports whether renameat2 refused its flags: the
// kernel or filesystem has no atomic no-replace rename.
func isRenameUnsupported(err error) bool {
	return err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP
}

// coversRoot reports whether an allowed root lies strictly below comps,
// so moving or deleting comps would move or delete that root.
func (f *FS) coversRoot(comps []string) bool {
	for _, r := range f.roots {
		if len(r.comps) > len(comps) && hasPrefixComps(r.comps, comps) {
			return true
		}
	}
	return false
}

// Rename implements fs.rename. The source (its canonical target) is first
// captured under a .lemon-move-* name in its own directory with
// renameat2(RENAME_NOREPLACE); only then are its identity (the one the
// walk saw) and a.Expect compared, so nothing can swap it between the
// compare and the rename. The captured entry is renamed to the
// destination with RENAME_NOREPLACE when a.NoReplace, else with a plain
// rename. Any failure renames it back (without replacing anything that
// took its name meanwhile). Source and destination naming one entry is
// Same, with nothing renamed and nothing compared. Errors: not_found,
// precondition_failed (field identity, mtime or destination),
// atomic_move_unavailable, cross_device, path_not_allowed (a root, or an
// ancestor of one), INVALID_PARAMS destination inside the source.
func (f *FS) Rename(a contract.FSRenameArgs) (*contract.FSRenameResult, error) {
	sc, err := f.lexical(a.Path)
	if err != nil {
		return nil, err
	}
	dc, err := f.lexical(a.Destination)
	if err != nil {
		if pe := protocol.AsError(err); pe.Details != nil && pe.Details.Field == "path" {
			pe.Details.Field = "destination"
		}
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	src, err := f.walk(sc, walkOpts{followFinal: true})
	if err != nil {
		return nil, err
	}
	defer f.closeTarget(src)
	if !src.exists {
		return nil, errNotFound()
	}
	if src.isRoot || f.isRootIdentity(&src.st) || f.coversRoot(src.canon) {
		return nil, errNotAllowed()
	}
	dst, err := f.walk(dc, walkOpts{followFinal: true})
	if err != nil {
		return nil, err
	}
	defer f.closeTarget(dst)
	if dst.isRoot || dst.exists && f.isRootIdentity(&dst.st) || f.coversRoot(dst.canon) {
		return nil, errNotAllowed()
	}
	if equalComps(dst.canon, src.canon) {
		return &contract.FSRenameResult{Path: src.path(), Destination: dst.path(), Same: true, MtimeNs: mtimeNs(&src.st)}, nil
	}
	if hasPrefixComps(dst.canon, src.canon) {
		return nil, protocol.InvalidParams("destination", "destination is inside the source")
	}

	tmp := captureName(".lemon-move-")
	if err := unix.Renameat2(src.dir, src.name, src.dir, tmp, unix.RENAME_NOREPLACE); err != nil {
		if isRenameUnsupported(err) {
			return nil, protocol.FSError(protocol.DomainAtomicMoveUnavailable)
		}
		return nil, mapErrno(err)
	}
	rollback := func() { unix.Renameat2(src.dir, tmp, src.dir, src.name, unix.RENAME_NOREPLACE) }
	var st unix.Stat_t
	if err := unix.Fstatat(src.dir, tmp, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil ||
		st.Dev != src.st.Dev || st.Ino != src.st.Ino {
		rollback()
		return nil, errPrecondition(contract.FSFieldIdentity)
	}
	if err := checkExpect(a.Expect, &st); err != nil {
		rollback()
		return nil, err
	}
	var flags uint
	if a.NoReplace {
		flags = unix.RENAME_NOREPLACE
	}
	if err := unix.Renameat2(src.dir, tmp, dst.dir, dst.name, flags); err != nil {
		rollback()
		switch {
		case flags != 0 && isRenameUnsupported(err):
			return nil, protocol.FSError(protocol.DomainAtomicMoveUnavailable)
		case err == unix.EEXIST, err == unix.ENOTEMPTY, err == unix.EISDIR, err == unix.ENOTDIR && dst.exists:
			return nil, errPrecondition(contract.FSFieldDestination)
		}
		return nil, mapErrno(err)
	}
	// rename(2) between two hard links of one inode succeeds and does
	// nothing, which would leave the source under its capture name. The
	// destination already is that inode, so the move is completed by
	// removing the captured name.
	if err := unix.Fstatat(src.dir, tmp, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil &&
		st.Dev == src.st.Dev && st.Ino == src.st.Ino {
		if err := unix.Unlinkat(src.dir, tmp, 0); err != nil {
			rollback()
			return nil, mapErrno(err)
		}
	}
	return &contract.FSRenameResult{Path: src.path(), Destination: dst.path(), MtimeNs: mtimeNs(&src.st)}, nil
}
