package fs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash"
	"io"
	"runtime"
	"sort"

	"github.com/gorilla/websocket"
	"golang.org/x/sys/unix"

	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// Tree transfers (docs/FS.md, "Transfers"): get -r and put -r move a whole
// directory as one stream of protocol.TransferEntry records on one data
// connection, so a tree of many small files costs one request, not one
// per file. Every file is still written through a part file and moved into
// place under the compare-and-swap rule, and checked against its sha256.

// maxTreeDepth bounds the directories a tree walk holds open at once.
const maxTreeDepth = 64

func writeJSON(conn *websocket.Conn, v any) error {
	b, _ := json.Marshal(v)
	if conn.WriteMessage(websocket.TextMessage, b) != nil {
		return errInterrupted().WithRetry(true, false)
	}
	return nil
}

// sendTree implements fs.send with tree: a pre-walk counts files and
// bytes for the hello; the walk then sends each directory (before its
// contents) and each regular file, in name order. Symlinks and special
// files are not sent. Descriptors are opened relative to their parent
// with O_NOFOLLOW, beneath the resolved root.
func (f *FS) sendTree(ctx context.Context, a contract.FSSendArgs, limit int64) (*contract.FSTransferResult, error) {
	if a.Offset != 0 {
		return nil, protocol.InvalidParams("offset", "a tree transfer has no offset")
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
	if !isDir(&t.st) {
		return nil, errNotDir()
	}
	rfd, err := f.openAt(t.dir, t.name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, mapErrno(err)
	}
	defer f.closeFD(rfd)
	var files, total int64
	if err := f.walkTree(rfd, "", 0, func(int, string, *unix.Stat_t) error { return nil },
		func(_ int, _ string, st *unix.Stat_t) error {
			if limit > 0 && st.Size > limit {
				return errFileLimit
			}
			files++
			total += st.Size
			return nil
		}); err != nil {
		return nil, err
	}
	if _, err := unix.Seek(rfd, 0, io.SeekStart); err != nil { // the pre-walk read the root to its end
		return nil, mapErrno(err)
	}
	conn, done, err := dialData(ctx, a.DataTicket)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := writeJSON(conn, protocol.TransferEntry{Size: total, Files: files}); err != nil {
		return nil, err
	}
	buf := make([]byte, protocol.TransferChunkBytes)
	var dg protocol.TreeDigest
	var sent, sentFiles int64
	err = f.walkTree(rfd, "", 0, func(_ int, name string, st *unix.Stat_t) error {
		return writeJSON(conn, protocol.TransferEntry{Name: name, Dir: true, Mode: st.Mode & 0o7777, MtimeMs: mtimeMs(st)})
	}, func(dfd int, name string, st *unix.Stat_t) error {
		fd, err := f.openAt(dfd, baseName(name), unix.O_RDONLY|unix.O_NONBLOCK, 0)
		if err != nil {
			return mapErrno(err)
		}
		defer f.closeFD(fd)
		var fst unix.Stat_t
		if err := unix.Fstat(fd, &fst); err != nil || !isReg(&fst) || limit > 0 && fst.Size > limit {
			return protocol.FSError(protocol.DomainSizeChanged)
		}
		if err := writeJSON(conn, protocol.TransferEntry{Name: name, Size: fst.Size, Mode: fst.Mode & 0o7777, MtimeMs: mtimeMs(&fst)}); err != nil {
			return err
		}
		h := sha256.New()
		for off := int64(0); off < fst.Size; {
			n, err := unix.Pread(fd, buf[:min(int64(len(buf)), fst.Size-off)], off)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return mapErrno(err)
			}
			if n == 0 {
				return protocol.FSError(protocol.DomainSizeChanged)
			}
			h.Write(buf[:n])
			if conn.WriteMessage(websocket.BinaryMessage, buf[:n]) != nil {
				return errInterrupted().WithRetry(true, false)
			}
			off += int64(n)
			runtime.Gosched()
		}
		sum := hex.EncodeToString(h.Sum(nil))
		dg.Add(name, sum)
		sent += fst.Size
		sentFiles++
		return writeJSON(conn, protocol.TransferEntry{SHA256: sum})
	})
	if err != nil {
		return nil, err
	}
	if err := writeJSON(conn, protocol.TransferEntry{Done: true, Files: sentFiles}); err != nil {
		return nil, err
	}
	closeData(conn)
	return &contract.FSTransferResult{Path: t.path(), Size: sent, SHA256: dg.Sum(), Mode: t.st.Mode & 0o7777,
		MtimeMs: mtimeMs(&t.st), Files: sentFiles}, nil
}

func baseName(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			return name[i+1:]
		}
	}
	return name
}

// walkTree calls dir for each directory under dfd (before its contents)
// and file for each regular file, names relative to the root, sorted.
func (f *FS) walkTree(dfd int, prefix string, depth int, dir, file func(dfd int, name string, st *unix.Stat_t) error) error {
	if depth >= maxTreeDepth {
		return protocol.InvalidParams("path", "the tree is deeper than 64 directories")
	}
	var names []string
	if err := readDirNames(dfd, func(n string) { names = append(names, n) }); err != nil {
		return mapErrno(err)
	}
	sort.Strings(names)
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // vanished meanwhile
		}
		name := n
		if prefix != "" {
			name = prefix + "/" + n
		}
		switch {
		case isDir(&st):
			if err := dir(dfd, name, &st); err != nil {
				return err
			}
			sub, err := f.openAt(dfd, n, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				return mapErrno(err)
			}
			err = f.walkTree(sub, name, depth+1, dir, file)
			f.closeFD(sub)
			if err != nil {
				return err
			}
		case isReg(&st):
			if err := file(dfd, name, &st); err != nil {
				return err
			}
		}
	}
	return nil
}

// recvBytes writes size bytes from the binary messages of conn to fd from
// off, hashing them into h.
func recvBytes(conn *websocket.Conn, fd int, off, size int64, h hash.Hash, buf []byte) error {
	end := off + size
	for off < end {
		runtime.Gosched() // let control requests in between chunks
		mt, r, err := conn.NextReader()
		if err != nil {
			return errInterrupted().WithRetry(true, true)
		}
		if mt != websocket.BinaryMessage {
			return protocol.InvalidParams("data", "expected a binary message on the data connection").WithRetry(true, true)
		}
		for {
			n, rerr := io.ReadFull(r, buf)
			if int64(n) > end-off {
				return protocol.InvalidParams("data", "the sender sent more bytes than size").WithRetry(true, true)
			}
			if n > 0 {
				h.Write(buf[:n])
				if err := pwriteAll(fd, buf[:n], off); err != nil {
					return protocol.AsError(mapErrno(err)).WithRetry(true, true)
				}
				off += int64(n)
			}
			if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
				break
			}
			if rerr != nil {
				return errInterrupted().WithRetry(true, true)
			}
		}
	}
	return nil
}

// receiveTree implements fs.receive with tree: directories are created,
// each file goes through its part file, is checked against the sender's
// sha256 and moved into place (replacing an existing file only with
// replace; else precondition_failed, field absent). The first failure ends the transfer; files already moved
// into place stay (each was verified).
func (f *FS) receiveTree(ctx context.Context, a contract.FSReceiveArgs, limit int64) (*contract.FSTransferResult, error) {
	if a.Size != 0 || a.Mode != 0 || a.MtimeMs != 0 || a.Resume {
		return nil, protocol.InvalidParams("tree", "a tree receive takes no size, mode, mtimeMs or resume")
	}
	if expects(a.Expect) || a.Expect.Absent && a.Replace {
		return nil, protocol.InvalidParams("expect", "a tree receive takes no mtime or identity expectation, and expect.absent excludes replace")
	}
	if !protocol.ValidTransferSecret(a.DataTicket) {
		return nil, protocol.InvalidParams("dataTicket", "dataTicket must be 64 lowercase hex digits")
	}
	root, err := f.Mkdir(a.Path)
	if err != nil {
		return nil, err
	}
	leave, err := f.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	conn, done, err := dialData(ctx, a.DataTicket)
	if err != nil {
		return nil, protocol.AsError(err).WithRetry(true, true)
	}
	defer done()
	if err := writeJSON(conn, protocol.TransferHello{}); err != nil {
		return nil, err
	}
	buf := make([]byte, protocol.TransferChunkBytes)
	var dg protocol.TreeDigest
	var files, bytes int64
	for {
		var e protocol.TransferEntry
		if err := readText(conn, &e); err != nil {
			return nil, protocol.AsError(err).WithRetry(true, true)
		}
		if e.Done {
			break
		}
		if !protocol.ValidTreeName(e.Name) || e.Size < 0 || e.Size > protocol.FSMaxOffset || !protocol.ValidTransferMode(e.Mode) ||
			!protocol.ValidMtimeMs(e.MtimeMs) {
			return nil, protocol.InvalidParams("data", "malformed tree entry").WithRetry(true, true)
		}
		if limit > 0 && e.Size > limit {
			// A fresh error: errFileLimit is shared.
			return nil, protocol.DomainError(errFileLimit.Code, errFileLimit.DomainCode(), errFileLimit.Message).WithRetry(false, true)
		}
		p := root.Path + "/" + e.Name
		if e.Dir {
			if _, err := f.Mkdir(p); err != nil {
				return nil, protocol.AsError(err).WithRetry(true, true)
			}
			continue
		}
		sum, err := f.receiveOne(conn, p, e, a.Replace, buf)
		if err != nil {
			return nil, protocol.AsError(err).WithRetry(true, true)
		}
		dg.Add(e.Name, sum)
		files++
		bytes += e.Size
	}
	closeData(conn)
	return &contract.FSTransferResult{Path: root.Path, Size: bytes, SHA256: dg.Sum(), Files: files}, nil
}

// receiveOne receives one file of a tree put into p.
func (f *FS) receiveOne(conn *websocket.Conn, p string, e protocol.TransferEntry, replace bool, buf []byte) (string, error) {
	t, err := f.resolve(p, walkOpts{followFinal: true, mkdirs: true})
	if err != nil {
		return "", err
	}
	defer f.closeTarget(t)
	if t.isRoot || t.exists && !isReg(&t.st) {
		return "", errNotRegular()
	}
	if t.exists && !replace {
		return "", errPrecondition(contract.FSFieldAbsent)
	}
	part := PartName(t.name)
	pfd, err := f.openAt(t.dir, part, unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC|unix.O_NONBLOCK, 0o600)
	if err != nil {
		return "", mapErrno(err)
	}
	defer f.closeFD(pfd)
	h := sha256.New()
	if err := recvBytes(conn, pfd, 0, e.Size, h, buf); err != nil {
		return "", err
	}
	var end protocol.TransferEntry
	if err := readText(conn, &end); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if end.SHA256 != sum {
		unix.Unlinkat(t.dir, part, 0)
		return "", protocol.FSError(protocol.DomainChecksumMismatch)
	}
	if err := unix.Fchmod(pfd, e.Mode); err != nil {
		return "", mapErrno(err)
	}
	if e.MtimeMs != 0 {
		if err := futimens(pfd, msTimespec(e.MtimeMs)); err != nil {
			return "", mapErrno(err)
		}
	}
	if err := f.commitPart(t, part, replace, contract.FSExpect{}); err != nil {
		return "", err
	}
	return sum, nil
}
