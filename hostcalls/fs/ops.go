package fs

import (
	"encoding/json"

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
