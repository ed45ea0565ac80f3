package fs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/sys/unix"

	"lemon/hostcalls"
	"lemon/hostcalls/contract"
	"lemon/hostcalls/datadial"
	"lemon/protocol"
)

// Bulk transfers (docs/FS.md, "Transfers"; docs/PROTOCOL.md, "Bulk data
// connections"): fs.send and fs.receive stream one file over a data
// connection the node dials to its controller, with the same resolution,
// confinement and gate (capability, rate limit, audit) as every other fs
// host call. The bytes never enter the guest. They are primitives: the fs
// module maps the methods' params to their args, decides what a put
// expects of the final name and shapes the payloads (plugins/fs/transfer.go).

var (
	sendErrors = append(readErrors[:len(readErrors):len(readErrors)],
		hostcalls.Err(protocol.FSError(protocol.DomainResumeMismatch), "the first offset bytes do not have sha256 prefixSha256"),
		hostcalls.Err(protocol.FSError(protocol.DomainSizeChanged), "the file changed while it was read"),
		hostcalls.Err(protocol.FSError(protocol.DomainTransferInterrupted), "the data connection failed or ended early"),
		hostcalls.Err(errFileLimit, "a file is larger than the execution context's max_file_bytes"))
	receiveErrors = append(statErrors[:len(statErrors):len(statErrors)],
		hostcalls.Err(errFileLimit, "size is more than the execution context's max_file_bytes"),
		hostcalls.Err(protocol.InvalidParams("expect", ""), "expect.absent with replace; an mtime or an identity without replace, with absent or on a tree"),
		hostcalls.Err(protocol.FSError(protocol.DomainNotRegularFile), "path is not a regular file"),
		errPreconditionSpec("the entry at path is not what replace and expect allow (details.field absent, present, mtime or identity): before any byte moves, or at the rename with mutationMayHaveApplied (the part file)"),
		hostcalls.Err(protocol.FSError(protocol.DomainChecksumMismatch), "the bytes received do not have the sender's sha256; the part file is removed"),
		hostcalls.Err(protocol.FSError(protocol.DomainTransferInterrupted), "the data connection failed or ended early; the part file is kept for resume"))
)

func errInterrupted() *protocol.Error {
	return protocol.FSError(protocol.DomainTransferInterrupted)
}

// enter holds f.life for a long request (a transfer is not bounded by the
// 25 s request deadline, only by its own context).
func (f *FS) enter() (func(), error) {
	if f.closed.Load() {
		return nil, protocol.FSError(protocol.DomainFilesystemBusy)
	}
	f.life.RLock()
	if f.closed.Load() {
		f.life.RUnlock()
		return nil, protocol.FSError(protocol.DomainFilesystemBusy)
	}
	return f.life.RUnlock, nil
}

// dialData dials the data connection and closes it when ctx ends, so a
// cancelled or expired request stops its transfer.
func dialData(ctx context.Context, ticket string) (*websocket.Conn, func(), error) {
	dial := datadial.From(ctx)
	if dial == nil {
		return nil, nil, protocol.Errorf(protocol.CodeUnavailable, "bulk transfers are not available on this node connection")
	}
	dctx, cancel := context.WithTimeout(ctx, protocol.TransferWaitMs*time.Millisecond)
	conn, err := dial(dctx, ticket)
	cancel()
	if err != nil {
		return nil, nil, errInterrupted().WithRetry(true, false)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	return conn, func() { stop(); conn.Close() }, nil
}

// hashPrefix hashes the first n bytes of fd into h.
func hashPrefix(fd int, n int64, h io.Writer, buf []byte) error {
	var off int64
	for off < n {
		m, err := unix.Pread(fd, buf[:min(int64(len(buf)), n-off)], off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return mapErrno(err)
		}
		if m == 0 {
			return protocol.FSError(protocol.DomainSizeChanged)
		}
		h.Write(buf[:m])
		off += int64(m)
	}
	return nil
}

// Send implements fs.send: it streams path from offset over the data
// connection of ticket (a text hello, then binary messages of at most
// protocol.TransferChunkBytes) and returns the whole file's sha256.
func (f *FS) Send(ctx context.Context, a contract.FSSendArgs) (*contract.FSTransferResult, error) {
	return f.send(ctx, a, 0)
}

// send is Send refusing files larger than limit bytes (0: no limit).
func (f *FS) send(ctx context.Context, a contract.FSSendArgs, limit int64) (*contract.FSTransferResult, error) {
	if a.Offset < 0 || a.Offset > protocol.FSMaxOffset {
		return nil, protocol.InvalidParams("offset", "offset must be an integer from 0 to 9007199254740991")
	}
	if !protocol.ValidTransferSecret(a.DataTicket) {
		return nil, protocol.InvalidParams("dataTicket", "dataTicket must be 64 lowercase hex digits")
	}
	if a.Tree {
		return f.sendTree(ctx, a, limit)
	}
	if a.Offset > 0 && !protocol.ValidTransferSecret(a.PrefixSHA256) {
		return nil, protocol.InvalidParams("prefixSha256", "prefixSha256 (64 lowercase hex digits) is required with an offset")
	}
	leave, err := f.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	t, err := f.resolve(a.Path, walkOpts{followFinal: true})
	if err != nil {
		return nil, err
	}
	defer f.closeTarget(t)
	if !t.exists {
		return nil, errNotFound()
	}
	if t.isRoot {
		return nil, errNotRegular()
	}
	fd, st, err := f.openRegular(t, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.closeFD(fd)
	size := st.Size
	if limit > 0 && size > limit {
		return nil, errFileLimit
	}
	if a.Offset > size {
		return nil, protocol.FSError(protocol.DomainResumeMismatch)
	}
	buf := make([]byte, protocol.TransferChunkBytes)
	h := sha256.New()
	if a.Offset > 0 {
		if err := hashPrefix(fd, a.Offset, h, buf); err != nil {
			return nil, err
		}
		if hex.EncodeToString(cloneHash(h)) != a.PrefixSHA256 {
			return nil, protocol.FSError(protocol.DomainResumeMismatch)
		}
	}
	unix.Fadvise(fd, a.Offset, size-a.Offset, unix.FADV_SEQUENTIAL)
	conn, done, err := dialData(ctx, a.DataTicket)
	if err != nil {
		return nil, err
	}
	defer done()
	hello, _ := json.Marshal(protocol.TransferHello{Size: size, Mode: st.Mode & 0o7777, MtimeMs: mtimeMs(st), Offset: a.Offset})
	if conn.WriteMessage(websocket.TextMessage, hello) != nil {
		return nil, errInterrupted().WithRetry(true, false)
	}
	for off := a.Offset; off < size; {
		n, err := unix.Pread(fd, buf[:min(int64(len(buf)), size-off)], off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, mapErrno(err)
		}
		if n == 0 {
			return nil, protocol.FSError(protocol.DomainSizeChanged)
		}
		h.Write(buf[:n])
		if conn.WriteMessage(websocket.BinaryMessage, buf[:n]) != nil {
			return nil, errInterrupted().WithRetry(true, false)
		}
		off += int64(n)
		runtime.Gosched() // let control requests in between chunks (docs/FS.md, "Memory and flow")
	}
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err == nil && (after.Size != size || mtimeMs(&after) != mtimeMs(st)) {
		return nil, protocol.FSError(protocol.DomainSizeChanged)
	}
	closeData(conn)
	return &contract.FSTransferResult{Path: t.path(), Size: size, SHA256: hex.EncodeToString(h.Sum(nil)),
		Mode: st.Mode & 0o7777, MtimeMs: mtimeMs(st), Offset: a.Offset}, nil
}

// cloneHash returns the digest so far without ending h.
func cloneHash(h interface{ Sum([]byte) []byte }) []byte { return h.Sum(nil) }

// PartName is the name of the part file a put of name writes beside it:
// hidden, fixed for a name (so a resumed put finds it) and at most 29 bytes.
func PartName(name string) string {
	s := sha256.Sum256([]byte(name))
	return ".lemon-part-" + hex.EncodeToString(s[:])[:17]
}

// readText reads one text message of at most TransferControlMaxBytes.
func readText(conn *websocket.Conn, v any) error {
	mt, r, err := conn.NextReader()
	if err != nil {
		return errInterrupted().WithRetry(true, true)
	}
	if mt != websocket.TextMessage {
		return protocol.InvalidParams("data", "expected a text message on the data connection")
	}
	b, err := io.ReadAll(io.LimitReader(r, protocol.TransferControlMaxBytes+1))
	if err != nil {
		return errInterrupted().WithRetry(true, true)
	}
	if len(b) > protocol.TransferControlMaxBytes || json.Unmarshal(b, v) != nil {
		return protocol.InvalidParams("data", "malformed text message on the data connection")
	}
	return nil
}

// Receive implements fs.receive: it writes Size bytes from the data
// connection into the part file beside path (PartName), checks their
// sha256 against the sender's, gives the file its mode and mtime and moves
// it into place if the entry there is what a.Replace and a.Expect allow
// (commitPart). Until that rename nothing exists at path; an interrupted
// put leaves only the part file, which Resume continues.
func (f *FS) Receive(ctx context.Context, a contract.FSReceiveArgs) (*contract.FSTransferResult, error) {
	return f.receive(ctx, a, 0)
}

// msTimespec is the timespec of m ms since the epoch, for every m a put
// accepts (|m| ≤ protocol.FSMaxOffset; m × 1e6 ns would overflow int64).
func msTimespec(m int64) unix.Timespec {
	sec, ms := m/1000, m%1000
	if ms < 0 {
		sec, ms = sec-1, ms+1000
	}
	return unix.Timespec{Sec: sec, Nsec: ms * int64(time.Millisecond)}
}

// receive is Receive refusing files larger than limit bytes (0: no limit).
func (f *FS) receive(ctx context.Context, a contract.FSReceiveArgs, limit int64) (*contract.FSTransferResult, error) {
	if a.Tree {
		return f.receiveTree(ctx, a, limit)
	}
	if limit > 0 && a.Size > limit {
		return nil, errFileLimit
	}
	switch {
	case a.Size < 0 || a.Size > protocol.FSMaxOffset:
		return nil, protocol.InvalidParams("size", "size must be an integer from 0 to 9007199254740991")
	case !protocol.ValidTransferMode(a.Mode):
		return nil, protocol.InvalidParams("mode", "mode must be permission bits, 0 to 0o1777 (no setuid or setgid)")
	case !protocol.ValidMtimeMs(a.MtimeMs):
		return nil, protocol.InvalidParams("mtimeMs", "mtimeMs must be an integer from -9007199254740991 to 9007199254740991")
	case !protocol.ValidTransferSecret(a.DataTicket):
		return nil, protocol.InvalidParams("dataTicket", "dataTicket must be 64 lowercase hex digits")
	}
	if err := checkReceiveExpect(a); err != nil {
		return nil, err
	}
	existing := expects(a.Expect)
	leave, err := f.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	t, err := f.resolve(a.Path, walkOpts{followFinal: true, mkdirs: a.Mkdirs && !existing})
	if err != nil {
		return nil, err
	}
	defer f.closeTarget(t)
	if t.isRoot || t.exists && !isReg(&t.st) {
		return nil, errNotRegular()
	}
	// The early check, before any byte moves; commitPart compares again
	// at the rename.
	if t.exists && !a.Replace {
		return nil, errPrecondition(contract.FSFieldAbsent)
	}
	if !t.exists && existing {
		return nil, errPrecondition(contract.FSFieldPresent)
	}
	part := PartName(t.name)
	pfd, err := f.openAt(t.dir, part, unix.O_RDWR|unix.O_CREAT|unix.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, mapErrno(err)
	}
	defer f.closeFD(pfd)
	var pst unix.Stat_t
	if err := unix.Fstat(pfd, &pst); err != nil {
		return nil, mapErrno(err)
	}
	if !isReg(&pst) {
		return nil, errNotRegular()
	}
	removePart := func() { unix.Unlinkat(t.dir, part, 0) }
	// From here on a part file exists beside path: errors say a mutation
	// may have applied (the part file), and that a retry is safe.
	buf := make([]byte, protocol.TransferChunkBytes)
	h := sha256.New()
	var kept int64
	if a.Resume && pst.Size <= a.Size {
		kept = pst.Size
		if err := hashPrefix(pfd, kept, h, buf); err != nil {
			return nil, protocol.AsError(err).WithRetry(true, true)
		}
	}
	conn, done, err := dialData(ctx, a.DataTicket)
	if err != nil {
		return nil, protocol.AsError(err).WithRetry(true, true)
	}
	defer done()
	hello := protocol.TransferHello{Size: a.Size, Offset: kept}
	if kept > 0 {
		hello.PrefixSHA256 = hex.EncodeToString(cloneHash(h))
	}
	hb, _ := json.Marshal(hello)
	if conn.WriteMessage(websocket.TextMessage, hb) != nil {
		return nil, errInterrupted().WithRetry(true, true)
	}
	var start protocol.TransferStart
	if err := readText(conn, &start); err != nil {
		return nil, protocol.AsError(err).WithRetry(true, true)
	}
	if start.Offset != kept && start.Offset != 0 {
		return nil, protocol.InvalidParams("offset", "the start offset must be the hello's offset or 0").WithRetry(true, true)
	}
	if start.Offset == 0 {
		h.Reset()
	}
	if err := unix.Ftruncate(pfd, start.Offset); err != nil {
		return nil, protocol.AsError(mapErrno(err)).WithRetry(true, true)
	}
	if a.Size > start.Offset {
		// Reserve the blocks first, so a full filesystem fails here.
		if err := unix.Fallocate(pfd, unix.FALLOC_FL_KEEP_SIZE, start.Offset, a.Size-start.Offset); err == unix.ENOSPC || err == unix.EDQUOT {
			return nil, protocol.AsError(mapErrno(err)).WithRetry(true, true)
		}
	}
	off := start.Offset
	for off < a.Size {
		runtime.Gosched() // let control requests in between chunks
		mt, r, err := conn.NextReader()
		if err != nil {
			return nil, errInterrupted().WithRetry(true, true)
		}
		if mt != websocket.BinaryMessage {
			return nil, protocol.InvalidParams("data", "expected a binary message on the data connection").WithRetry(true, true)
		}
		for {
			n, rerr := io.ReadFull(r, buf)
			if int64(n) > a.Size-off {
				return nil, protocol.InvalidParams("data", "the sender sent more bytes than size").WithRetry(true, true)
			}
			if n > 0 {
				h.Write(buf[:n])
				if err := pwriteAll(pfd, buf[:n], off); err != nil {
					return nil, protocol.AsError(mapErrno(err)).WithRetry(true, true)
				}
				off += int64(n)
			}
			if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
				break
			}
			if rerr != nil {
				return nil, errInterrupted().WithRetry(true, true)
			}
		}
	}
	var end protocol.TransferEnd
	if err := readText(conn, &end); err != nil {
		return nil, protocol.AsError(err).WithRetry(true, true)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if end.SHA256 != sum {
		removePart()
		return nil, protocol.FSError(protocol.DomainChecksumMismatch).WithRetry(true, true)
	}
	if a.Mode != 0 {
		if err := unix.Fchmod(pfd, a.Mode); err != nil {
			return nil, protocol.AsError(mapErrno(err)).WithRetry(true, true)
		}
	}
	if a.MtimeMs != 0 {
		if err := futimens(pfd, msTimespec(a.MtimeMs)); err != nil {
			return nil, protocol.AsError(mapErrno(err)).WithRetry(true, true)
		}
	}
	if err := f.commitPart(t, part, a.Replace, a.Expect); err != nil {
		return nil, err
	}
	var fin unix.Stat_t
	if err := unix.Fstat(pfd, &fin); err != nil {
		return nil, protocol.AsError(mapErrno(err)).WithRetry(false, true)
	}
	closeData(conn)
	return &contract.FSTransferResult{Path: t.path(), Size: fin.Size, SHA256: sum, Mode: fin.Mode & 0o7777,
		MtimeMs: mtimeMs(&fin), Offset: start.Offset}, nil
}

// closeData sends a normal close and waits (up to a second) for the
// peer's, so the socket is never closed with unread data: that would
// reset the connection and could drop bytes the caller has not read yet.
func closeData(conn *websocket.Conn) {
	conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	conn.SetReadDeadline(time.Now().Add(time.Second))
	for {
		if _, _, err := conn.NextReader(); err != nil {
			return
		}
	}
}

func pwriteAll(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := unix.Pwrite(fd, b, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}

// checkReceiveExpect refuses contradictory expectations: Absent with
// Replace, an mtime or identity without Replace or with Absent.
func checkReceiveExpect(a contract.FSReceiveArgs) error {
	switch {
	case a.Expect.Absent && (a.Replace || expects(a.Expect)):
		return protocol.InvalidParams("expect", "expect.absent excludes replace, an mtime and an identity")
	case expects(a.Expect) && !a.Replace:
		return protocol.InvalidParams("expect", "an expected mtime or identity needs replace")
	}
	return nil
}

// commitPart renames the part file to t, comparing what the caller
// expects atomically with the rename (docs/FS.md, "Transfers"): with an
// expectation of an existing entry (an mtime range, an identity), the
// entry at t must still match it, checked and replaced under the path's
// and the inode's locks, which fs.write_at also takes; else without
// replace t must not exist (RENAME_NOREPLACE); with replace it is
// replaced. A refused expectation is precondition_failed; the part file
// exists, so every error says a mutation may have applied.
func (f *FS) commitPart(t *target, part string, replace bool, exp contract.FSExpect) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	defer f.locks.lock(t.path())()
	var flags uint
	switch {
	case expects(exp):
		var st unix.Stat_t
		if err := unix.Fstatat(t.dir, t.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if err == unix.ENOENT {
				return errPrecondition(contract.FSFieldPresent).WithRetry(false, true)
			}
			return protocol.AsError(mapErrno(err)).WithRetry(true, true)
		}
		defer f.locks.lock(inodeKey(st.Dev, st.Ino))()
		if err := unix.Fstatat(t.dir, t.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return errPrecondition(contract.FSFieldPresent).WithRetry(false, true)
		}
		if !isReg(&st) {
			return errPrecondition(contract.FSFieldIdentity).WithRetry(false, true)
		}
		if err := checkExpect(exp, &st); err != nil {
			return protocol.AsError(err).WithRetry(false, true)
		}
	case !replace:
		flags = unix.RENAME_NOREPLACE
	}
	if err := unix.Renameat2(t.dir, part, t.dir, t.name, flags); err != nil {
		switch {
		case errors.Is(err, unix.EEXIST):
			return errPrecondition(contract.FSFieldAbsent).WithRetry(false, true)
		case flags != 0 && isRenameUnsupported(err):
			return protocol.FSError(protocol.DomainAtomicMoveUnavailable).WithRetry(false, true)
		case errors.Is(err, unix.EISDIR):
			return protocol.FSError(protocol.DomainNotRegularFile).WithRetry(false, true)
		}
		return protocol.AsError(mapErrno(err)).WithRetry(true, true)
	}
	return nil
}

// hcSend and hcReceive run on the request's workspace view (FS.For), like
// every fs host call, and apply its max_file_bytes to each file moved.
func (fs *FS) hcSend(ctx context.Context, call hostcalls.Call, a contract.FSSendArgs) (contract.FSTransferResult, error) {
	f, release, err := fs.For(call)
	if err != nil {
		return contract.FSTransferResult{}, protocol.AsError(err)
	}
	defer release()
	var r *contract.FSTransferResult
	datadial.RunBulk(func() { r, err = f.send(ctx, a, fileLimit(call)) })
	if err != nil {
		return contract.FSTransferResult{}, protocol.AsError(err)
	}
	return *r, nil
}

func (fs *FS) hcReceive(ctx context.Context, call hostcalls.Call, a contract.FSReceiveArgs) (contract.FSTransferResult, error) {
	f, release, err := fs.For(call)
	if err != nil {
		return contract.FSTransferResult{}, protocol.AsError(err)
	}
	defer release()
	var r *contract.FSTransferResult
	datadial.RunBulk(func() { r, err = f.receive(ctx, a, fileLimit(call)) })
	if err != nil {
		return contract.FSTransferResult{}, protocol.AsError(err)
	}
	return *r, nil
}

// fileLimit is the request context's max_file_bytes (0: none).
func fileLimit(call hostcalls.Call) int64 {
	if call == nil {
		return 0
	}
	return call.Invocation().Authority.MaxFileBytes
}
