package fs

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"lemon/hostcalls"
	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// The read primitives (docs/FS.md, "Primitives"): fs.open resolves a path
// with the walker, exactly as every fs call does, and keeps a descriptor
// of what it found for the rest of the invocation; fs.readdir, fs.statat
// and fs.pread act on that descriptor and never on a path again, so
// nothing they touch can lie outside the allowed roots (or the
// workspace) as it stood when the path was resolved. The module shapes
// the spec's payloads from their raw figures (plugins/fs).

// errHandleBudget refuses an fs.open past contract.FSMaxHandles handles
// held by one invocation.
var errHandleBudget = protocol.DomainError(protocol.CodeForbidden, protocol.DomainLimitExceeded,
	"the invocation holds the most fs handles it may (16); close one first").WithRetry(false, false)

// errNoHandle answers a handle id this invocation does not hold.
var errNoHandle = protocol.InvalidParams("handle", "handle names no open fs handle of this invocation")

// errNoHandles answers when the host gives no per-invocation state.
var errNoHandles = protocol.Errorf(protocol.CodeInternal, "fs handles are unavailable")

// handle is one open descriptor of an invocation: an O_RDONLY descriptor
// of a regular file or directory the node may read, else an O_PATH one.
// It is closed once the invocation has ended (or fs.close ran) and no
// call still uses it, so a call that outlived its deadline never reads
// through a descriptor number reused by another open.
type handle struct {
	f     *FS
	fd    int
	path  string
	st    unix.Stat_t
	rdOK  bool // fd was opened O_RDONLY (not O_PATH)
	refs  int
	close bool
}

// handles is an invocation's table of handles (hostcalls.Scoper value).
type handles struct {
	mu     sync.Mutex
	m      map[uint32]*handle
	next   uint32
	closed bool // Close ran: the invocation ended, add refuses
}

// handlesKey keys the table of one FS core in the invocation's scope.
type handlesKey struct{ c *core }

var _ io.Closer = (*handles)(nil)

func tableOf(call hostcalls.Call, f *FS) (*handles, error) {
	s, ok := call.(hostcalls.Scoper)
	if !ok {
		return nil, errNoHandles
	}
	t, ok := s.Scoped(handlesKey{f.core}, func() io.Closer { return &handles{m: map[uint32]*handle{}} }).(*handles)
	if !ok {
		return nil, errNoHandles
	}
	return t, nil
}

// errHandlesClosed refuses an fs.open that finished after its invocation
// ended: nothing would ever close the descriptor (docs/FS.md, "Primitives:
// handles").
var errHandlesClosed = protocol.Errorf(protocol.CodeInternal, "the invocation has ended; its fs handles are closed")

// add registers h, refusing past the budget and once the table is closed
// (an fs.open that outlived its deadline and its invocation); on refusal
// the caller closes h's descriptor, which gives back its descriptor budget.
func (t *handles) add(h *handle) (uint32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, errHandlesClosed
	}
	if len(t.m) >= contract.FSMaxHandles {
		return 0, errHandleBudget
	}
	t.next++
	t.m[t.next] = h
	return t.next, nil
}

// acquire returns handle id with a reference held; release it with
// t.release.
func (t *handles) acquire(id uint32) (*handle, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.m[id]
	if !ok || h.close {
		return nil, errNoHandle
	}
	h.refs++
	return h, nil
}

func (t *handles) release(h *handle) {
	t.mu.Lock()
	h.refs--
	done := h.close && h.refs == 0
	t.mu.Unlock()
	if done {
		h.f.closeFD(h.fd)
	}
}

// drop closes handle id (fs.close).
func (t *handles) drop(id uint32) error {
	t.mu.Lock()
	h, ok := t.m[id]
	delete(t.m, id)
	done := ok && !h.close && h.refs == 0
	if ok {
		h.close = true
	}
	t.mu.Unlock()
	if !ok {
		return errNoHandle
	}
	if done {
		h.f.closeFD(h.fd)
	}
	return nil
}

// Close closes every handle no call still uses; the others close when
// their last call returns. A later add refuses (docs/FS.md, "Primitives:
// handles").
func (t *handles) Close() error {
	t.mu.Lock()
	t.closed = true
	var done []*handle
	for id, h := range t.m {
		delete(t.m, id)
		if !h.close && h.refs == 0 {
			done = append(done, h)
		}
		h.close = true
	}
	t.mu.Unlock()
	for _, h := range done {
		h.f.closeFD(h.fd)
	}
	return nil
}

// rawStat converts a kernel stat and the access checks.
func rawStat(st *unix.Stat_t, readable, writable bool) contract.FSRawStat {
	return contract.FSRawStat{Mode: st.Mode, Size: st.Size, MtimeSec: st.Mtim.Sec, MtimeNsec: st.Mtim.Nsec,
		Ino: st.Ino, Dev: st.Dev, Nlink: uint64(st.Nlink), UID: st.Uid, GID: st.Gid,
		Readable: readable, Writable: writable}
}

// open resolves p and opens what it names: a regular file or directory
// O_RDONLY when the node may read it (O_NONBLOCK, so a file swapped for
// a FIFO since the walk never blocks), anything else, or what the node
// may not read, O_PATH. The stat is the descriptor's own (fstat), so it
// describes exactly what later calls on the handle act on.
func (f *FS) open(p string, noFollow bool) (*handle, contract.FSOpenResult, error) {
	var res contract.FSOpenResult
	t, err := f.resolve(p, walkOpts{followFinal: !noFollow})
	if err != nil {
		return nil, res, err
	}
	defer f.closeTarget(t)
	if !t.exists {
		return nil, res, errNotFound()
	}
	fd := -1
	switch t.st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		fd, err = f.openAt(t.dir, t.name, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	case unix.S_IFDIR:
		fd, err = f.openAt(t.dir, t.name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	}
	rdOK := fd >= 0
	if fd < 0 {
		if err != nil && err != unix.EACCES && err != unix.EPERM {
			return nil, res, mapErrno(err)
		}
		if fd, err = f.openAt(t.dir, t.name, unix.O_PATH, 0); err != nil {
			return nil, res, mapErrno(err)
		}
	}
	h := &handle{f: f, fd: fd, path: t.path(), rdOK: rdOK}
	if err := unix.Fstat(fd, &h.st); err != nil {
		f.closeFD(fd)
		return nil, res, mapErrno(err)
	}
	if h.st.Mode&unix.S_IFMT != t.st.Mode&unix.S_IFMT {
		// Replaced by another type of file between the walk and the open:
		// the walk's checks held for what it saw, not for this.
		f.closeFD(fd)
		return nil, res, errBusy()
	}
	res = contract.FSOpenResult{Path: h.path,
		Stat: rawStat(&h.st, accessible(t.dir, t.name, unix.R_OK), accessible(t.dir, t.name, unix.W_OK))}
	if noFollow && h.st.Mode&unix.S_IFMT == unix.S_IFLNK {
		var buf [protocol.FSMaxPathBytes + 1]byte
		n, err := unix.Readlinkat(t.dir, t.name, buf[:])
		if err != nil {
			f.closeFD(fd)
			if err == unix.EINVAL {
				// No longer a symlink: replaced since the walk.
				return nil, res, errBusy()
			}
			return nil, res, mapErrno(err)
		}
		res.Link = string(buf[:n])
	}
	return h, res, nil
}

// stat resolves p like open and answers the walk's own lstat of the
// target, with the kernel's access checks, without opening it
// (fs.stat): the canonical path, the raw stat, and a final symlink's
// target when noFollow.
func (f *FS) stat(p string, noFollow bool) (contract.FSStatResult, error) {
	var res contract.FSStatResult
	t, err := f.resolve(p, walkOpts{followFinal: !noFollow})
	if err != nil {
		return res, err
	}
	defer f.closeTarget(t)
	if !t.exists {
		return res, errNotFound()
	}
	res = contract.FSStatResult{Path: t.path(),
		Stat: rawStat(&t.st, accessible(t.dir, t.name, unix.R_OK), accessible(t.dir, t.name, unix.W_OK))}
	if noFollow && t.st.Mode&unix.S_IFMT == unix.S_IFLNK {
		var buf [protocol.FSMaxPathBytes + 1]byte
		n, err := unix.Readlinkat(t.dir, t.name, buf[:])
		if err == unix.EINVAL {
			// No longer a symlink: replaced since the walk's lstat.
			return res, errBusy()
		}
		if err != nil {
			return res, mapErrno(err)
		}
		res.Link = string(buf[:n])
	}
	return res, nil
}

// readDir returns the next entries of directory handle h as a result of
// at most maxBytes bytes (contract.ParseFSReadDir's format). When an
// entry does not fit, the directory offset goes back to it (lseek to the
// d_off of the record before it), so the next call starts there.
func readDir(h *handle, maxBytes int, skipHidden, withStat bool) ([]byte, error) {
	if h.st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, errNotDir()
	}
	if !h.rdOK {
		return nil, protocol.FSError(protocol.DomainPermissionDenied)
	}
	out := make([]byte, 1, min(maxBytes, 64<<10))
	buf := make([]byte, 32<<10)
	// last is the directory offset just past the last record consumed:
	// where the next call must start if a record does not fit.
	last, err := unix.Seek(h.fd, 0, io.SeekCurrent)
	if err != nil {
		return nil, mapErrno(err)
	}
	for {
		n, err := unix.Getdents(h.fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, mapErrno(err)
		}
		if n <= 0 {
			out[0] = 1
			return out, nil
		}
		for b := buf[:n]; len(b) >= 19; {
			// struct linux_dirent64: d_ino u64, d_off i64, d_reclen u16,
			// d_type u8, d_name NUL-terminated.
			off := int64(binary.NativeEndian.Uint64(b[8:]))
			reclen := int(binary.NativeEndian.Uint16(b[16:]))
			if reclen < 19 || reclen > len(b) {
				return nil, protocol.FSError(protocol.DomainFilesystemError)
			}
			typ, name := b[18], b[19:reclen]
			if i := indexNUL(name); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			if len(name) == 0 || string(name) == "." || string(name) == ".." || skipHidden && name[0] == '.' {
				last = off
				continue
			}
			mark := len(out)
			out = contract.AppendFSDirEntry(out, typ, name)
			if withStat {
				out = appendStatAt(out, h.fd, string(name))
			}
			if len(out) > maxBytes {
				if _, err := unix.Seek(h.fd, last, io.SeekStart); err != nil {
					return nil, mapErrno(err)
				}
				return out[:mark], nil
			}
			last = off
		}
	}
}

// readDirSmallest reads the rest of directory handle h and returns its n
// smallest names in byte order (names starting with '.' left out when
// skipHidden), each followed by its lstat record when withStat, in
// contract.ParseFSReadDir's format with flags bit 0 set and bit 1 set when
// names were left out. Memory stays bounded for a directory of any size:
// names pile up in one arena and, past 4n of them, are sorted and cut back
// to the n smallest.
func readDirSmallest(h *handle, n int, skipHidden, withStat bool) ([]byte, error) {
	if h.st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, errNotDir()
	}
	if !h.rdOK {
		return nil, protocol.FSError(protocol.DomainPermissionDenied)
	}
	type span struct {
		off, n uint32
		typ    uint8
	}
	var (
		arena []byte
		spans []span
		more  bool
	)
	name := func(s span) []byte { return arena[s.off : s.off+s.n] }
	compact := func() {
		slices.SortFunc(spans, func(a, b span) int { return bytes.Compare(name(a), name(b)) })
		if len(spans) <= n {
			return
		}
		more = true
		kept := make([]byte, 0, len(arena)/2)
		for i, s := range spans[:n] {
			spans[i] = span{uint32(len(kept)), s.n, s.typ}
			kept = append(kept, name(s)...)
		}
		spans, arena = spans[:n], kept
	}
	buf := make([]byte, 32<<10)
	for {
		got, err := unix.Getdents(h.fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, mapErrno(err)
		}
		if got <= 0 {
			break
		}
		for b := buf[:got]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:]))
			if reclen < 19 || reclen > len(b) {
				return nil, protocol.FSError(protocol.DomainFilesystemError)
			}
			typ, nm := b[18], b[19:reclen]
			if i := indexNUL(nm); i >= 0 {
				nm = nm[:i]
			}
			b = b[reclen:]
			if len(nm) == 0 || string(nm) == "." || string(nm) == ".." || skipHidden && nm[0] == '.' {
				continue
			}
			if len(spans) >= 4*n {
				compact()
			}
			spans = append(spans, span{uint32(len(arena)), uint32(len(nm)), typ})
			arena = append(arena, nm...)
		}
	}
	compact()
	out := make([]byte, 1, 1+len(arena)+len(spans)*(3+1+contract.FSStatRecordBytes))
	out[0] = 1
	if more {
		out[0] |= 2
	}
	for _, sp := range spans {
		nm := name(sp)
		out = contract.AppendFSDirEntry(out, sp.typ, nm)
		if withStat {
			out = appendStatAt(out, h.fd, string(nm))
		}
	}
	return out, nil
}

// appendStatAt appends the fs.statat record of name relative to dir.
func appendStatAt(out []byte, dir int, name string) []byte {
	if name == "" || name == "." || name == ".." || len(name) > protocol.FSMaxNameBytes ||
		strings.IndexByte(name, '/') >= 0 || strings.IndexByte(name, 0) >= 0 {
		return contract.AppendFSStatError(out, protocol.DomainInvalidPath)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return contract.AppendFSStatError(out, protocol.AsError(mapErrno(err)).DomainCode())
	}
	rs := rawStat(&st, accessible(dir, name, unix.R_OK), accessible(dir, name, unix.W_OK))
	return contract.AppendFSStatRecord(out, &rs)
}

func indexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

// statAt lstat's each name relative to directory handle h, in order
// (contract.ParseFSStatAt's format). A name that is not one plain
// component is an invalid_path record; the kernel's refusal of one name
// is that name's record, never the call's error.
func statAt(h *handle, names []string) ([]byte, error) {
	if h.st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, errNotDir()
	}
	out := make([]byte, 0, len(names)*70)
	for _, name := range names {
		out = appendStatAt(out, h.fd, name)
	}
	return out, nil
}

// pread reads at most length bytes at offset of regular-file handle h
// into an invocation blob (put), capped by the node's MaxReadChunk, the
// context's max_file_bytes and the result room (ReadChunkFor).
func (f *FS) pread(h *handle, offset, length int64, maxResult int, put func([]byte) uint32) (*contract.FSPReadResult, error) {
	if offset < 0 || offset > protocol.FSMaxOffset {
		return nil, protocol.InvalidParams("offset", "offset must be an integer from 0 to 9007199254740991")
	}
	if length < 1 || length > protocol.FSMaxReadLength {
		return nil, protocol.InvalidParams("length", "length must be an integer from 1 to 1048576")
	}
	if h.st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, errNotRegular()
	}
	if !h.rdOK {
		return nil, protocol.FSError(protocol.DomainPermissionDenied)
	}
	var st unix.Stat_t
	if err := unix.Fstat(h.fd, &st); err != nil {
		return nil, mapErrno(err)
	}
	length = min(length, int64(f.maxRead))
	if maxResult > 0 {
		length = min(length, int64(ReadChunkFor(maxResult, h.path)))
	}
	buf, err := preadFull(h.fd, offset, length, st.Size)
	if err != nil {
		return nil, err
	}
	n := int64(len(buf))
	return &contract.FSPReadResult{Blob: put(buf), Length: n, Size: st.Size, EOF: offset+n >= st.Size}, nil
}

// preadFull reads min(length, size-offset) bytes at offset, fewer if the
// file shrinks meanwhile; none at or past size.
func preadFull(fd int, offset, length, size int64) ([]byte, error) {
	if offset >= size {
		return []byte{}, nil
	}
	buf := make([]byte, min(length, size-offset))
	got := 0
	for got < len(buf) {
		n, err := unix.Pread(fd, buf[got:], offset+int64(got))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, mapErrno(err)
		}
		if n == 0 {
			break
		}
		got += n
	}
	return buf[:got], nil
}

// Host calls of the read primitives.

func (fs *FS) hcOpen(ctx context.Context, call hostcalls.Call, a contract.FSOpenArgs) (contract.FSOpenResult, error) {
	f, release, err := fs.For(call)
	if err != nil {
		return contract.FSOpenResult{}, protocol.AsError(err)
	}
	defer release()
	tab, err := tableOf(call, f)
	if err != nil {
		return contract.FSOpenResult{}, err
	}
	return run(ctx, f, "open", false, func() (*contract.FSOpenResult, error) {
		h, res, err := f.open(a.Path, a.NoFollow)
		if err != nil {
			return nil, err
		}
		id, err := tab.add(h)
		if err != nil {
			f.closeFD(h.fd)
			return nil, err
		}
		res.Handle = id
		return &res, nil
	})
}

func (fs *FS) hcStat(ctx context.Context, call hostcalls.Call, a contract.FSStatArgs) (contract.FSStatResult, error) {
	f, release, err := fs.For(call)
	if err != nil {
		return contract.FSStatResult{}, protocol.AsError(err)
	}
	defer release()
	return run(ctx, f, "stat", false, func() (*contract.FSStatResult, error) {
		res, err := f.stat(a.Path, a.NoFollow)
		if err != nil {
			return nil, err
		}
		return &res, nil
	})
}

func (fs *FS) hcClose(_ context.Context, call hostcalls.Call, a contract.FSHandleArgs) (contract.Empty, error) {
	tab, err := tableOf(call, fs)
	if err != nil {
		return contract.Empty{}, err
	}
	return contract.Empty{}, tab.drop(a.Handle)
}

// withHandle runs fn under f.do with a reference to handle id held.
func withHandle[R any](ctx context.Context, fs *FS, call hostcalls.Call, op string, id uint32, fn func(*handle) (*R, error)) (R, error) {
	var zero R
	tab, err := tableOf(call, fs)
	if err != nil {
		return zero, err
	}
	h, err := tab.acquire(id)
	if err != nil {
		return zero, err
	}
	return run(ctx, fs, op, false, func() (*R, error) {
		defer tab.release(h)
		return fn(h)
	})
}

func (fs *FS) hcReadDir(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	var a contract.FSReadDirArgs
	if perr := protocol.DecodeParams(args, &a); perr != nil {
		return nil, perr
	}
	if a.Smallest < 0 || a.Smallest > contract.FSReadDirMaxSmallest {
		return nil, protocol.InvalidParams("smallest", "smallest must be an integer from 0 to 1024")
	}
	if a.Smallest > 0 && a.MaxBytes != 0 {
		return nil, protocol.InvalidParams("maxBytes", "maxBytes does not apply with smallest")
	}
	if a.MaxBytes == 0 {
		a.MaxBytes = contract.FSReadDirDefaultBytes
	}
	if a.MaxBytes < contract.FSReadDirMinBytes || a.MaxBytes > contract.FSReadDirMaxBytes {
		return nil, protocol.InvalidParams("maxBytes", "maxBytes must be an integer from 512 to 1048576")
	}
	out, err := withHandle(ctx, fs, call, "readdir", a.Handle, func(h *handle) (*[]byte, error) {
		if a.Smallest > 0 {
			b, err := readDirSmallest(h, a.Smallest, a.SkipHidden, a.Stat)
			return &b, err
		}
		b, err := readDir(h, a.MaxBytes, a.SkipHidden, a.Stat)
		return &b, err
	})
	return out, err
}

func (fs *FS) hcStatAt(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	var a contract.FSStatAtArgs
	if perr := protocol.DecodeParams(args, &a); perr != nil {
		return nil, perr
	}
	if len(a.Names) < 1 || len(a.Names) > contract.FSStatAtMaxNames {
		return nil, protocol.InvalidParams("names", "names must hold 1 to 1024 names")
	}
	out, err := withHandle(ctx, fs, call, "statat", a.Handle, func(h *handle) (*[]byte, error) {
		b, err := statAt(h, a.Names)
		return &b, err
	})
	return out, err
}

func (fs *FS) hcPRead(ctx context.Context, call hostcalls.Call, a contract.FSPReadArgs) (contract.FSPReadResult, error) {
	inv := call.Invocation()
	length := a.Length
	// The context's max_file_bytes also bounds what one read returns: a
	// longer read is a short chunk, which the spec allows.
	if limit := inv.Authority.MaxFileBytes; limit > 0 && length > limit {
		length = limit
	}
	return withHandle(ctx, fs, call, "pread", a.Handle, func(h *handle) (*contract.FSPReadResult, error) {
		return fs.pread(h, a.Offset, length, inv.MaxResultBytes, call.PutBlob)
	})
}

// The errors of the read primitives, as data for docs/HOSTCALLS.md.
var (
	handleErrors = []hostcalls.ErrorSpec{
		hostcalls.Err(errNoHandle, "handle names no open handle of this invocation"),
		hostcalls.Err(protocol.FSError(protocol.DomainFilesystemBusy), "the family is closing (retry safe)"),
		hostcalls.Err(protocol.FSOutcomeUnknown(false), "the request deadline passed during the operation"),
		hostcalls.Err(protocol.FSError(protocol.DomainFilesystemError), "any other OS failure"),
	}
	openErrors = append(statErrors[:len(statErrors):len(statErrors)],
		hostcalls.Err(errHandleBudget, "the invocation already holds 16 handles"))
	closeErrors   = handleErrors[:1]
	readDirErrors = append(handleErrors[:len(handleErrors):len(handleErrors)],
		hostcalls.Err(protocol.InvalidParams("maxBytes", ""), "maxBytes is not 0 or 512 to 1048576, or not 0 with smallest"),
		hostcalls.Err(protocol.InvalidParams("smallest", ""), "smallest is not 0 to 1024"),
		hostcalls.Err(protocol.FSError(protocol.DomainNotDirectory), "the handle is not a directory"),
		hostcalls.Err(protocol.FSError(protocol.DomainPermissionDenied), "the node may not read the directory"))
	statAtErrors = append(handleErrors[:len(handleErrors):len(handleErrors)],
		hostcalls.Err(protocol.InvalidParams("names", ""), "names holds no name or more than 1024"),
		hostcalls.Err(protocol.FSError(protocol.DomainNotDirectory), "the handle is not a directory"))
	preadErrors = append(handleErrors[:len(handleErrors):len(handleErrors)],
		hostcalls.Err(protocol.InvalidParams("offset", ""), "offset is not 0 to 9007199254740991"),
		hostcalls.Err(protocol.InvalidParams("length", ""), "length is not 1 to 1048576"),
		hostcalls.Err(protocol.FSError(protocol.DomainNotRegularFile), "the handle is not a regular file"),
		hostcalls.Err(protocol.FSError(protocol.DomainPermissionDenied), "the node may not read the file"))
)

// readTable is the read primitives' part of Table.
func (f *FS) readTable() hostcalls.Table {
	read := hostcalls.CapRead
	return hostcalls.Table{
		hostcalls.Define(contract.FSOpen, read, hostcalls.AuditMeta, f.hcOpen, openErrors...),
		hostcalls.Define(contract.FSStat, read, hostcalls.AuditMeta, f.hcStat, statErrors...),
		hostcalls.Define(contract.FSClose, read, hostcalls.AuditMeta, f.hcClose, closeErrors...),
		hostcalls.DefineRaw(contract.FSReadDir.Spec(), read, hostcalls.AuditRead, f.hcReadDir, readDirErrors...),
		hostcalls.DefineRaw(contract.FSStatAt.Spec(), read, hostcalls.AuditMeta, f.hcStatAt, statAtErrors...),
		hostcalls.Define(contract.FSPRead, read, hostcalls.AuditRead, f.hcPRead, preadErrors...),
	}
}
