package fs

import (
	"encoding/json"
	"strconv"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// typeName names a file type as the spec's `type` field does.
func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "regular"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "char_device"
	case unix.S_IFBLK:
		return "block_device"
	}
	return "unknown"
}

func isReg(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFREG }
func isDir(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFDIR }

// mtimeMs is the stat modification time in integer Unix ms, ns truncated.
func mtimeMs(st *unix.Stat_t) int64 {
	return st.Mtim.Sec*1000 + st.Mtim.Nsec/1e6
}

// accessible is the kernel's own access check for the worker account:
// faccessat2(dir, name, mode, AT_EACCESS|AT_SYMLINK_NOFOLLOW), relative to
// the target's parent descriptor, so ACLs, capabilities, immutable flags
// and read-only mounts all count. Any failure is false. It never falls
// back to a mode-bit guess: unix.Faccessat would emulate the check from
// st_mode when faccessat2 answers EPERM, which is exactly the kernel's
// answer for W_OK on an immutable file (docs/FS.md).
func accessible(dir int, name string, mode uint32) bool {
	for {
		err := unix.Faccessat2(dir, name, mode, unix.AT_EACCESS|unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		return err == nil
	}
}

// statOf builds the stat fields (mime is added by the module or the
// payload builder).
func statOf(dir int, name string, st *unix.Stat_t, path string) *protocol.FSStat {
	e := entryStatOf(dir, name, st)
	return &protocol.FSStat{Path: path, Type: e.Type, Size: e.Size, MtimeMs: e.MtimeMs, Mode: e.Mode,
		Readable: e.Readable, Writable: e.Writable}
}

// entryStatOf builds a listing entry's stat fields (no path, no mime).
func entryStatOf(dir int, name string, st *unix.Stat_t) *protocol.FSEntryStat {
	return &protocol.FSEntryStat{
		Type:     typeName(st.Mode),
		Size:     st.Size,
		MtimeMs:  mtimeMs(st),
		Mode:     st.Mode,
		Readable: accessible(dir, name, unix.R_OK),
		Writable: accessible(dir, name, unix.W_OK),
	}
}

// readDirNames reads every name of an open directory except . and ..,
// calling fn for each.
func readDirNames(fd int, fn func(name string)) error {
	buf := make([]byte, 32<<10)
	var names []string
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		names = names[:0]
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
		for _, nm := range names {
			fn(nm)
		}
	}
}

// openRegular opens an existing regular target for I/O. The type is
// checked by lstat first and again on the open descriptor, and the open
// uses O_NONBLOCK, so a FIFO, socket or device is never used for I/O.
func (f *FS) openRegular(t *target, flags int) (int, *unix.Stat_t, error) {
	if !isReg(&t.st) {
		return -1, nil, errNotRegular()
	}
	fd, err := f.openAt(t.dir, t.name, flags|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1, nil, mapErrno(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.closeFD(fd)
		return -1, nil, mapErrno(err)
	}
	if !isReg(&st) {
		f.closeFD(fd)
		return -1, nil, errNotRegular()
	}
	return fd, &st, nil
}

// Read implements fs.read: up to length bytes (capped by MaxReadChunk) at
// offset of a regular file, stored with put (the invocation's blob store;
// the bytes never reach guest memory). At or past EOF the chunk is empty
// and EOF is true.
func (f *FS) Read(p string, offset, length int64, put func([]byte) uint32) (*contract.FSReadResult, error) {
	return f.read(p, offset, length, 0, put)
}

// readResultReserve is the room, in bytes, a node.fs.read payload needs
// besides its path and its base64 data: the keys, offset, length, size,
// eof, a media type, and protocol.RelayReserve.
const readResultReserve = 512 + protocol.RelayReserve

// ReadChunkFor returns the largest chunk, in bytes (at least 1), whose
// node.fs.read payload for the resolved path fits maxResult bytes of JSON
// once base64-encoded (hostcalls.Invocation.MaxResultBytes).
func ReadChunkFor(maxResult int, path string) int {
	enc, _ := json.Marshal(path) // an upper bound of the path as the payload holds it
	return max(protocol.Base64Budget(maxResult-readResultReserve-len(enc), 1), 1)
}

// read is Read with the chunk also capped so the payload fits maxResult
// bytes (ReadChunkFor); 0 means no session limit is known. A chunk may be
// shorter than asked: the response's length says how long it is.
func (f *FS) read(p string, offset, length int64, maxResult int, put func([]byte) uint32) (*contract.FSReadResult, error) {
	if offset < 0 || offset > protocol.FSMaxOffset {
		return nil, protocol.InvalidParams("offset", "offset must be an integer from 0 to 9007199254740991")
	}
	if length < 1 || length > protocol.FSMaxReadLength {
		return nil, protocol.InvalidParams("length", "length must be an integer from 1 to 1048576")
	}
	t, err := f.resolve(p, walkOpts{followFinal: true})
	if err != nil {
		return nil, err
	}
	defer f.closeTarget(t)
	if !t.exists {
		return nil, errNotFound()
	}
	fd, st, err := f.openRegular(t, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.closeFD(fd)
	if length > int64(f.maxRead) {
		length = int64(f.maxRead)
	}
	if maxResult > 0 {
		length = min(length, int64(ReadChunkFor(maxResult, t.path())))
	}
	buf, err := preadFull(fd, offset, length, st.Size)
	if err != nil {
		return nil, err
	}
	n := int64(len(buf))
	return &contract.FSReadResult{Path: t.path(), Offset: offset, Length: n, Size: st.Size, EOF: offset+n >= st.Size,
		Blob: put(buf)}, nil
}

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

// Write implements fs.write (spec node.fs.write): data (at most 1 MiB,
// checked before anything is created) written at offset of a regular
// file under compare-and-swap on expectedModifiedAtMs:
//   - nil or 0: the target must be missing; it is created with O_EXCL;
//   - otherwise the existing file's mtimeMs must equal it.
//
// Any mismatch is revision_conflict and writes nothing. truncate cuts the
// file at offset+len(data). Writes to one file are serialized whether they
// name it by its canonical path, a symlink alias or another hard link, and
// each successful write leaves the file's mtimeMs strictly greater than
// before, setting it with utimensat when the clock tick did not advance.
//
// Before any byte changes, the blocks the write needs are reserved
// (reserveRange), so ENOSPC or EDQUOT there leaves the file's bytes, size
// and mtime as they were and is a plain filesystem_error. A failure after
// that point is filesystem_error with retrySafe:false and
// mutationMayHaveApplied:true unless it could be undone exactly
// (docs/FS.md, "What a failed write leaves"). Nothing is fsync'd.
func (f *FS) Write(a protocol.FSWriteCall, data []byte) (*protocol.FSWriteResult, error) {
	if len(data) > protocol.FSMaxWriteBytes {
		return nil, protocol.InvalidParams("dataBase64", "dataBase64 decodes to more than 1048576 bytes")
	}
	if a.Offset < 0 || a.Offset > protocol.FSMaxOffset {
		return nil, protocol.InvalidParams("offset", "offset must be an integer from 0 to 9007199254740991")
	}
	exp := a.ExpectedModifiedAtMs
	if exp != nil && (*exp < 0 || *exp > protocol.FSMaxOffset) {
		return nil, protocol.InvalidParams("expectedModifiedAtMs", "expectedModifiedAtMs must be an integer from 0 to 9007199254740991")
	}
	comps, err := f.lexical(a.Path)
	if err != nil {
		return nil, err
	}
	// A write to an existing file (a nonzero revision) never needs new
	// parents: with any missing, the file is missing and the answer is
	// revision_conflict, which must not leave created directories behind.
	mkdirs := a.Mkdirs && (exp == nil || *exp == 0)
	t, err := f.walk(comps, walkOpts{followFinal: true, mkdirs: mkdirs})
	if err != nil {
		if a.Mkdirs && !mkdirs && protocol.AsError(err).DomainCode() == protocol.DomainNotFound {
			return nil, protocol.FSError(protocol.DomainRevisionConflict)
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
	// Hard links of one file share no path: the compare-and-swap also
	// holds the inode's lock, so a write through another link cannot
	// interleave with it.
	var lockedDev, lockedIno uint64
	if exp != nil && *exp != 0 && t.exists {
		lockedDev, lockedIno = t.st.Dev, t.st.Ino
		defer f.locks.lock(inodeKey(lockedDev, lockedIno))()
	}

	var fd int
	var before *unix.Stat_t
	if exp == nil || *exp == 0 {
		fd, err = f.openAt(t.dir, t.name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NONBLOCK, 0o666)
		if err == unix.EEXIST {
			return nil, protocol.FSError(protocol.DomainRevisionConflict)
		}
		if err != nil {
			return nil, mapErrno(err)
		}
	} else {
		// Re-stat under the lock: the walk's lstat may predate a write
		// that just finished.
		if err := unix.Fstatat(t.dir, t.name, &t.st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if err == unix.ENOENT {
				return nil, protocol.FSError(protocol.DomainRevisionConflict)
			}
			return nil, mapErrno(err)
		}
		fd, before, err = f.openRegular(t, unix.O_WRONLY)
		if err != nil {
			if pe := protocol.AsError(err); pe.DomainCode() == protocol.DomainNotFound {
				return nil, protocol.FSError(protocol.DomainRevisionConflict)
			}
			return nil, err
		}
		// A different file (replaced since the walk) is not the one whose
		// lock is held; its revision was not the one observed either.
		if mtimeMs(before) != *exp || before.Dev != lockedDev || before.Ino != lockedIno {
			f.closeFD(fd)
			return nil, protocol.FSError(protocol.DomainRevisionConflict)
		}
	}
	defer f.closeFD(fd)
	// A file this write created is removed again if the write then fails
	// (e.g. EFBIG at an offset the filesystem cannot reach), so an error
	// leaves no trace and a retry with expectedModifiedAtMs 0 still works.
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
	if before != nil && mtimeMs(&after) <= mtimeMs(before) {
		next := mtimeMs(before) + 1
		if err := futimens(fd, unix.NsecToTimespec(next*1e6)); err != nil {
			return nil, failed(err, true)
		}
		if err := unix.Fstat(fd, &after); err != nil {
			return nil, failed(err, true)
		}
	}
	return &protocol.FSWriteResult{Path: t.path(), Offset: a.Offset, BytesWritten: int64(written), Size: after.Size, MtimeMs: mtimeMs(&after)}, nil
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

// Mkdir implements fs.mkdir: creates the directory and missing parents;
// an existing directory is success, an existing non-directory is
// already_exists.
func (f *FS) Mkdir(p string) (*protocol.FSMkdirResult, error) {
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
	if !t.exists {
		if err := unix.Mkdirat(t.dir, t.name, 0o777); err != nil && err != unix.EEXIST {
			return nil, mapErrno(err)
		}
		if err := unix.Fstatat(t.dir, t.name, &t.st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return nil, mapErrno(err)
		}
	}
	if !isDir(&t.st) {
		return nil, protocol.FSError(protocol.DomainAlreadyExists)
	}
	return &protocol.FSMkdirResult{Path: t.path(), Created: true}, nil
}

// OpenDir admits a directory (a process cwd) exactly as the fs methods
// admit paths: path relative to the default cwd or absolute, walked from a
// pinned root, symlinks re-admitted. It returns an O_RDONLY|O_DIRECTORY|
// O_CLOEXEC descriptor the caller owns and closes (it does not count
// against the descriptor budget once returned) and the canonical path.
// Errors: invalid_path, path_not_allowed, not_found, not_directory,
// filesystem_busy. It implements spawn.DirResolver.
func (f *FS) OpenDir(p string) (int, string, error) {
	if f.closed.Load() {
		return -1, "", errBusy()
	}
	f.life.RLock()
	defer f.life.RUnlock()
	t, err := f.resolve(p, walkOpts{followFinal: true})
	if err != nil {
		return -1, "", err
	}
	defer f.closeTarget(t)
	if !t.exists {
		return -1, "", errNotFound()
	}
	if !isDir(&t.st) {
		return -1, "", errNotDir()
	}
	fd, err := f.openAt(t.dir, t.name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, "", mapErrno(err)
	}
	f.fdsInUse.Add(-1) // ownership passes to the caller
	return fd, t.path(), nil
}
