package fs

import (
	"strconv"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// The fs mutation primitives (docs/FS.md, "Writes, moves and deletes"):
// write at an offset under a compare-and-swap, mkdir with parents, rename
// without replace, remove bound to an inode and a tree digest, and the
// tree walk of delete previews. The host compares what the module asks
// for, atomically with the effect; which values to expect, and what a
// refused expectation means to the caller, is the module's (plugins/fs).

// errPrecondition is the CONFLICT of a refused expectation; field names
// it (contract.FSField*). Nothing was done unless the caller adds
// mutationMayHaveApplied.
func errPrecondition(field string) *protocol.Error {
	e := protocol.DomainError(protocol.CodeConflict, contract.FSPreconditionFailed,
		"the entry is not what the request expected; nothing was changed")
	e.Details.Field = field
	return e
}

// expects reports whether e requires anything of an existing entry.
func expects(e contract.FSExpect) bool {
	return e.MtimeNsMin != nil || e.MtimeNsMax != nil || e.Dev != 0 || e.Ino != 0
}

// checkExpect compares an existing entry's lstat with e (Absent aside).
func checkExpect(e contract.FSExpect, st *unix.Stat_t) error {
	if (e.Dev != 0 || e.Ino != 0) && (st.Dev != e.Dev || st.Ino != e.Ino) {
		return errPrecondition(contract.FSFieldIdentity)
	}
	ns := mtimeNs(st)
	if e.MtimeNsMin != nil && ns < *e.MtimeNsMin || e.MtimeNsMax != nil && ns > *e.MtimeNsMax {
		return errPrecondition(contract.FSFieldMtime)
	}
	return nil
}

// mtimeNs is the stat modification time in ns since the epoch.
func mtimeNs(st *unix.Stat_t) int64 { return st.Mtim.Sec*1e9 + st.Mtim.Nsec }

// futimens sets only the modification time of fd (atime untouched).
func futimens(fd int, mtime unix.Timespec) error {
	ts := [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, mtime}
	// utimensat(fd, NULL, ts, 0) is futimens: it acts on the descriptor.
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// WriteAt implements fs.write_at: data (at most 1 MiB, checked before any
// parent directory is created) written at offset of a regular file if
// the file is what a.Expect says:
//   - Expect.Absent: nothing has the name; the file is created O_EXCL;
//   - an mtime range or an identity: the existing file matches it,
//     compared after the write locks are taken;
//   - nothing: an existing regular file is written as it is, a missing
//     one is created O_EXCL.
//
// A refused expectation is precondition_failed and writes nothing; with
// an expectation of an existing file, Mkdirs is not applied (a missing
// parent means a missing file: precondition_failed, field present, and no
// directory is left behind). Writes to one file are serialized whether
// they name it by its canonical path, a symlink alias or another hard
// link (the inode's lock is held too). MtimeNsAfter is the least mtime
// the file has afterwards.
//
// Before any byte changes, the blocks the write needs are reserved
// (reserveRange), so ENOSPC or EDQUOT there leaves the file's bytes, size
// and mtime as they were and is a plain filesystem_error. A failure after
// that point is filesystem_error with retrySafe:false and
// mutationMayHaveApplied:true unless it could be undone exactly
// (docs/FS.md, "What a failed write leaves"). Nothing is fsync'd.
func (f *FS) WriteAt(a contract.FSWriteAtArgs, data []byte) (*contract.FSWriteAtResult, error) {
	if len(data) > protocol.FSMaxWriteBytes {
		return nil, protocol.InvalidParams("blob", "the blob holds more than 1048576 bytes")
	}
	if a.Offset < 0 || a.Offset > protocol.FSMaxOffset {
		return nil, protocol.InvalidParams("offset", "offset must be an integer from 0 to 9007199254740991")
	}
	exp := a.Expect
	existing := expects(exp)
	if existing && exp.Absent {
		return nil, protocol.InvalidParams("expect", "expect.absent excludes an mtime or an identity")
	}
	comps, err := f.lexical(a.Path)
	if err != nil {
		return nil, err
	}
	t, err := f.walk(comps, walkOpts{followFinal: true, mkdirs: a.Mkdirs && !existing})
	if err != nil {
		if existing && protocol.AsError(err).DomainCode() == protocol.DomainNotFound {
			return nil, errPrecondition(contract.FSFieldPresent)
		}
		return nil, err
	}
	defer f.closeTarget(t)
	if t.isRoot || t.exists && !isReg(&t.st) {
		return nil, errNotRegular()
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	defer f.locks.lock(t.path())()
	// Hard links of one file share no path: a write to an existing file
	// also holds the inode's lock, so a write through another link cannot
	// interleave with it.
	create := exp.Absent || !existing && !t.exists
	var lockedDev, lockedIno uint64
	if !create {
		if !t.exists {
			return nil, errPrecondition(contract.FSFieldPresent)
		}
		lockedDev, lockedIno = t.st.Dev, t.st.Ino
		defer f.locks.lock(inodeKey(lockedDev, lockedIno))()
	}

	var fd int
	var before *unix.Stat_t
	if create {
		fd, err = f.openAt(t.dir, t.name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NONBLOCK, 0o666)
		if err == unix.EEXIST {
			return nil, errPrecondition(contract.FSFieldAbsent)
		}
		if err != nil {
			return nil, mapErrno(err)
		}
	} else {
		// Re-stat under the lock: the walk's lstat may predate a write
		// that just finished.
		if err := unix.Fstatat(t.dir, t.name, &t.st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if err == unix.ENOENT {
				return nil, errPrecondition(contract.FSFieldPresent)
			}
			return nil, mapErrno(err)
		}
		fd, before, err = f.openRegular(t, unix.O_WRONLY)
		if err != nil {
			if pe := protocol.AsError(err); pe.DomainCode() == protocol.DomainNotFound {
				return nil, errPrecondition(contract.FSFieldPresent)
			}
			return nil, err
		}
		// A different file (replaced since the walk) is not the one whose
		// lock is held; its revision was not the one observed either.
		if before.Dev != lockedDev || before.Ino != lockedIno {
			f.closeFD(fd)
			return nil, errPrecondition(contract.FSFieldIdentity)
		}
		if err := checkExpect(exp, before); err != nil {
			f.closeFD(fd)
			return nil, err
		}
	}
	defer f.closeFD(fd)
	// A file this write created is removed again if the write then fails
	// (e.g. EFBIG at an offset the filesystem cannot reach), so an error
	// leaves no trace and a retry expecting absence still works.
	undoCreate := func() bool {
		var fst, lst unix.Stat_t
		if unix.Fstat(fd, &fst) != nil || unix.Fstatat(t.dir, t.name, &lst, unix.AT_SYMLINK_NOFOLLOW) != nil ||
			fst.Dev != lst.Dev || fst.Ino != lst.Ino {
			return false
		}
		return unix.Unlinkat(t.dir, t.name, 0) == nil
	}
	// failed answers an error. Before the first byte could change (touched
	// false) the file is as it was, except that a failed pwrite may have
	// advanced its mtime, which is set back. After that, or if the undo
	// fails, the answer says the write may have applied: retrySafe false,
	// mutationMayHaveApplied true (docs/FS.md "What a failed write leaves").
	failed := func(err error, touched bool) error {
		perr := protocol.AsError(mapErrno(err))
		if before == nil {
			if undoCreate() {
				return perr
			}
			return perr.WithRetry(false, true)
		}
		if !touched && futimens(fd, before.Mtim) == nil {
			return perr
		}
		return perr.WithRetry(false, true)
	}
	// Reserve the blocks the write needs before any byte changes, so a
	// full filesystem or quota is refused here, with the file untouched:
	// the range that grows the file, and the overwritten part too when the
	// file may have holes (fewer allocated bytes than its size).
	end := a.Offset + int64(len(data))
	resOff := a.Offset
	if before != nil && before.Size > a.Offset && before.Blocks*512 >= before.Size {
		resOff = min(before.Size, end)
	}
	if err := reserveRange(fd, resOff, end-resOff); err != nil {
		if before == nil && !undoCreate() {
			return nil, protocol.AsError(mapErrno(err)).WithRetry(false, true)
		}
		return nil, mapErrno(err)
	}
	written := 0
	for written < len(data) {
		n, err := unix.Pwrite(fd, data[written:], a.Offset+int64(written))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, failed(err, written > 0)
		}
		written += n
	}
	if a.Truncate {
		if err := unix.Ftruncate(fd, a.Offset+int64(written)); err != nil {
			return nil, failed(err, true)
		}
	}
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil {
		return nil, failed(err, true)
	}
	if a.MtimeNsAfter > 0 && mtimeNs(&after) < a.MtimeNsAfter {
		if err := futimens(fd, unix.NsecToTimespec(a.MtimeNsAfter)); err != nil {
			return nil, failed(err, true)
		}
		if err := unix.Fstat(fd, &after); err != nil {
			return nil, failed(err, true)
		}
	}
	return &contract.FSWriteAtResult{Path: t.path(), BytesWritten: int64(written), Size: after.Size,
		MtimeNs: mtimeNs(&after), Dev: after.Dev, Ino: after.Ino, Created: create}, nil
}

// skipReserve turns reserveRange off; only tests set it: the benchmark
// comparing the write path with and without the reservation, and the
// ENOSPC test of the path without it.
var skipReserve atomic.Bool

// reserveRange allocates the blocks of [off, off+n) of fd without changing
// its size (fallocate FALLOC_FL_KEEP_SIZE). After it succeeds, a pwrite of
// that range cannot fail for lack of space on filesystems that write in
// place (ext4, xfs without reflinked extents, tmpfs). A filesystem without
// fallocate (EOPNOTSUPP) is written without the reservation; a failure
// there is then reported as possibly applied.
func reserveRange(fd int, off, n int64) error {
	if n == 0 || skipReserve.Load() {
		return nil
	}
	for {
		err := unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, off, n)
		switch err {
		case unix.EINTR:
			continue
		case unix.EOPNOTSUPP, unix.ENOSYS:
			return nil
		}
		return err
	}
}

// inodeKey is the write-lock key of an existing file's identity; it cannot
// collide with a canonical path key, which starts with '/'.
func inodeKey(dev, ino uint64) string {
	return "inode:" + strconv.FormatUint(dev, 10) + ":" + strconv.FormatUint(ino, 10)
}

// Mkdirs implements fs.mkdirs: creates the directory and missing parents.
// Directory is false (and nothing is created at the name) when something
// other than a directory has the name.
func (f *FS) Mkdirs(p string) (*contract.FSMkdirsResult, error) {
	comps, err := f.lexical(p)
	if err != nil {
		return nil, err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, err := f.walk(comps, walkOpts{followFinal: true, mkdirs: true})
	if err != nil {
		return nil, err
	}
	defer f.closeTarget(t)
	created := false
	if !t.exists {
		err := unix.Mkdirat(t.dir, t.name, 0o777)
		if err != nil && err != unix.EEXIST {
			return nil, mapErrno(err)
		}
		created = err == nil
		if err := unix.Fstatat(t.dir, t.name, &t.st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return nil, mapErrno(err)
		}
	}
	return &contract.FSMkdirsResult{Path: t.path(), Created: created, Directory: isDir(&t.st)}, nil
}

// Mkdir creates the directory p and its missing parents for the tree
// transfers (bulk_tree.go); something other than a directory at p is
// already_exists.
func (f *FS) Mkdir(p string) (*protocol.FSMkdirResult, error) {
	r, err := f.Mkdirs(p)
	if err != nil {
		return nil, err
	}
	if !r.Directory {
		return nil, protocol.FSError(protocol.DomainAlreadyExists)
	}
	return &protocol.FSMkdirResult{Path: r.Path, Created: true}, nil
}
