// Package transfer moves files between this machine and a node over bulk
// data connections (docs/FS.md, "Transfers"; docs/PROTOCOL.md, "Bulk data
// connections"): one node.fs.transfer.get or .put request per file, its
// bytes in binary WebSocket messages on a connection of their own, the
// node's sha256 checked against the bytes received or sent.
//
// Guarantees: a get writes a part file beside the local target and renames
// it into place only once its size and sha256 match the node's (an
// interrupted get leaves nothing at the final name; Get removes the part
// file when ctx is cancelled and keeps it for Resume after any other
// failure). A put writes a part file beside the remote target, which the
// node moves into place only after the checksum matched, under node.fs.write's
// compare-and-swap rule.
package transfer

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gorilla/websocket"

	"lemon/client"
	"lemon/protocol"
)

// Options shape one transfer.
type Options struct {
	// Overwrite replaces an existing file at the destination.
	Overwrite bool
	// Mkdirs (put) creates missing parent directories on the node.
	Mkdirs bool
	// Resume continues from a part file an earlier, failed transfer of the
	// same file left, once its prefix's sha256 matched.
	Resume bool
	// Progress, if set, is called with each number of bytes moved (a
	// resumed prefix counts as moved when the transfer resumes).
	Progress func(n int64)
	// OnResume, if set, is called with the offset a transfer resumes from.
	OnResume func(offset int64)
}

// Client makes transfers to and from one node over one connection.
type Client struct {
	Conn *client.Conn
	Node string // the nodeId
}

// ErrChecksum is returned (wrapped) when the bytes received or sent do not
// have the node's sha256.
var ErrChecksum = errors.New("checksum mismatch: the bytes moved are not the node's file")

// ErrExists is returned (wrapped) when the local destination exists and
// Overwrite is false.
var ErrExists = errors.New("the local file exists; pass --overwrite to replace it")

// PartSuffix ends the name of a get's part file: ".NAME.lemon-get".
const PartSuffix = ".lemon-get"

// LocalPart is the part file a get of local writes beside it.
func LocalPart(local string) string {
	return filepath.Join(filepath.Dir(local), "."+filepath.Base(local)+PartSuffix)
}

func newSecret() (secret, key string) {
	var b [32]byte
	rand.Read(b[:])
	secret = hex.EncodeToString(b[:])
	k := sha256.Sum256([]byte(secret))
	return secret, hex.EncodeToString(k[:])
}

type callResult struct {
	payload json.RawMessage
	err     *protocol.Error
}

// start sends the request and dials the data connection. A request that
// fails before the node dials ends the dial too.
func (c *Client) start(ctx context.Context, method string, params map[string]any) (*websocket.Conn, <-chan callResult, error) {
	secret, key := newSecret()
	params["nodeId"] = c.Node
	params["transferKey"] = key
	res := make(chan callResult, 1)
	dctx, cancelDial := context.WithCancel(ctx)
	go func() {
		p, err := c.Conn.Call(ctx, method, params)
		if err != nil {
			cancelDial()
		}
		res <- callResult{p, err}
	}()
	// The request may be held before it is routed (an approval): while it
	// is pending, a dial the controller answered "no such transfer" is
	// repeated.
	for {
		ws, err := c.Conn.DialData(dctx, secret)
		if err == nil {
			cancelDial()
			return ws, res, nil
		}
		if errors.Is(err, client.ErrNoTransfer) && dctx.Err() == nil {
			select {
			case r := <-res:
				res <- r // put back for finish; a success without a data connection is an error below
				if r.err != nil {
					cancelDial()
					return nil, nil, r.err
				}
			default:
				select { // a refusal at once (the controller's bound on waiting sockets) is not retried hot
				case <-time.After(100 * time.Millisecond):
				case <-dctx.Done():
				}
				continue
			}
		}
		cancelDial()
		// The request's own error says more than the dial's.
		select {
		case r := <-res:
			if r.err != nil {
				return nil, nil, r.err
			}
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return nil, nil, err
	}
}

// drain reads the data connection to its end in the background, so the
// node's close is answered at once (the node waits for that answer before
// it replies to the request).
func drain(ws *websocket.Conn) {
	go func() {
		for {
			if _, _, err := ws.NextReader(); err != nil {
				return
			}
		}
	}()
}

// finish waits for the request's result.
func finish(ctx context.Context, res <-chan callResult) (*protocol.FSTransferResult, error) {
	select {
	case r := <-res:
		if r.err != nil {
			return nil, r.err
		}
		var out protocol.FSTransferResult
		if err := json.Unmarshal(r.payload, &out); err != nil {
			return nil, errors.New("malformed transfer result")
		}
		return &out, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func readText(ws *websocket.Conn, v any) error {
	mt, r, err := ws.NextReader()
	if err != nil {
		return err
	}
	if mt != websocket.TextMessage {
		return errors.New("unexpected binary message on the data connection")
	}
	b, err := io.ReadAll(io.LimitReader(r, protocol.TransferControlMaxBytes+1))
	if err != nil {
		return err
	}
	if len(b) > protocol.TransferControlMaxBytes || json.Unmarshal(b, v) != nil {
		return errors.New("malformed message on the data connection")
	}
	return nil
}

// hashFile hashes the first n bytes of f into h.
func hashFile(f *os.File, n int64, h hash.Hash) error {
	_, err := io.Copy(h, io.NewSectionReader(f, 0, n))
	return err
}

// Get copies the node's file remote to local. local may name an existing
// directory (the file keeps its remote name there). The local file gets the
// remote mode (permission bits) and mtime.
func (c *Client) Get(ctx context.Context, remote, local string, o Options) (*protocol.FSTransferResult, error) {
	if fi, err := os.Stat(local); err == nil && fi.IsDir() {
		local = filepath.Join(local, pathBase(remote))
	}
	if _, err := os.Lstat(local); err == nil && !o.Overwrite {
		return nil, fmt.Errorf("%s: %w", local, ErrExists)
	}
	// The part file is opened in local's directory through a root, and
	// only as a regular file: a symlink planted at its name (in a shared
	// directory, say) is refused, never written through.
	root, err := os.OpenRoot(filepath.Dir(local))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	name := filepath.Base(local)
	part := LocalPart(name)
	if fi, err := root.Lstat(part); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: the part file's name is taken by something not a regular file", LocalPart(local))
	}
	f, err := root.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: the part file's name is taken by something not a regular file", LocalPart(local))
	}
	keep := false
	defer func() {
		f.Close()
		if !keep || ctx.Err() != nil {
			root.Remove(part)
		}
	}()
	h := sha256.New()
	var offset int64
	params := map[string]any{"path": remote}
	if o.Resume {
		if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
			if err := hashFile(f, fi.Size(), h); err != nil {
				return nil, err
			}
			offset = fi.Size()
			keep = true
			params["offset"] = offset
			params["prefixSha256"] = hex.EncodeToString(h.Sum(nil))
		}
	}
	if err := f.Truncate(offset); err != nil {
		return nil, err
	}
	ws, res, err := c.start(ctx, protocol.MethodFSTransferGet, params)
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.DomainCode() == protocol.DomainResumeMismatch && offset > 0 {
		// The node's file changed: start again from the beginning.
		o.Resume = false
		f.Close()
		root.Remove(part)
		return c.Get(ctx, remote, local, o)
	}
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	stop := context.AfterFunc(ctx, func() { ws.Close() })
	defer stop()
	var hello protocol.TransferHello
	if err := readText(ws, &hello); err != nil {
		return nil, c.interrupted(ctx, res, err)
	}
	if hello.Offset != offset || hello.Size < offset {
		return nil, errors.New("the node answered a different offset")
	}
	keep = true // from here a failure leaves a part file to resume from
	if offset > 0 {
		if o.OnResume != nil {
			o.OnResume(offset)
		}
		if o.Progress != nil {
			o.Progress(offset)
		}
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, err
	}
	buf := make([]byte, protocol.TransferChunkBytes)
	w := io.MultiWriter(f, h)
	got := offset
	for got < hello.Size {
		mt, r, err := ws.NextReader()
		if err != nil {
			return nil, c.interrupted(ctx, res, fmt.Errorf("the data connection ended after %d of %d bytes", got, hello.Size))
		}
		if mt != websocket.BinaryMessage {
			return nil, errors.New("unexpected text message on the data connection")
		}
		n, err := io.CopyBuffer(w, io.LimitReader(r, hello.Size-got+1), buf)
		got += n
		if o.Progress != nil {
			o.Progress(n)
		}
		if err != nil {
			return nil, c.interrupted(ctx, res, err)
		}
		if got > hello.Size {
			return nil, errors.New("the node sent more bytes than the file's size")
		}
	}
	drain(ws)
	out, err := finish(ctx, res)
	if err != nil {
		return nil, err
	}
	if out.Size != got || out.SHA256 != hex.EncodeToString(h.Sum(nil)) {
		keep = false
		return nil, fmt.Errorf("%s: %w", remote, ErrChecksum)
	}
	if err := f.Chmod(os.FileMode(out.Mode & 0o777)); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	mt := time.UnixMilli(out.MtimeMs)
	if err := root.Chtimes(part, mt, mt); err != nil {
		return nil, err
	}
	if err := placeIn(root, part, name, o.Overwrite); err != nil {
		return nil, err
	}
	keep = true
	return out, nil
}

// ErrChanged is returned (wrapped) by a put whose local file changed (size
// or mtime) while it was sent.
var ErrChanged = errors.New("the file changed while it was sent; nothing was moved into place on the node")

// unchanged reports ErrChanged if f's size or mtime differ from fi's.
func unchanged(f *os.File, fi os.FileInfo) error {
	now, err := f.Stat()
	if err != nil {
		return err
	}
	if now.Size() != fi.Size() || !now.ModTime().Equal(fi.ModTime()) {
		return ErrChanged
	}
	return nil
}

// placeIn moves part to final, both relative to root: with overwrite by
// rename, else by a hard link (which fails if final exists, atomically)
// and removing part.
func placeIn(root *os.Root, part, final string, overwrite bool) error {
	if overwrite {
		return root.Rename(part, final)
	}
	if err := root.Link(part, final); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s: %w", final, ErrExists)
		}
		return err
	}
	return root.Remove(part)
}

// interrupted returns the request's error if it has one by now (it says
// more), else err; a cancelled ctx wins.
func (c *Client) interrupted(ctx context.Context, res <-chan callResult, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	select {
	case r := <-res:
		if r.err != nil {
			return r.err
		}
	case <-time.After(5 * time.Second):
	}
	return err
}

func pathBase(p string) string {
	for len(p) > 1 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	if i := lastSlash(p); i >= 0 {
		return p[i+1:]
	}
	return p
}

func lastSlash(p string) int {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return i
		}
	}
	return -1
}

// Put copies local to the node's path remote, with local's mode and mtime.
// The node writes a part file beside remote and moves it into place only
// after the sha256 of what it received matched this side's; with
// Overwrite an existing remote file is replaced, else the name must be free.
func (c *Client) Put(ctx context.Context, local, remote string, o Options) (*protocol.FSTransferResult, error) {
	f, err := os.Open(local)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", local)
	}
	size := fi.Size()
	params := map[string]any{"path": remote, "size": size, "mode": uint32(fi.Mode().Perm()),
		"mtimeMs": fi.ModTime().UnixMilli(), "overwrite": o.Overwrite, "mkdirs": o.Mkdirs, "resume": o.Resume}
	ws, res, err := c.start(ctx, protocol.MethodFSTransferPut, params)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	stop := context.AfterFunc(ctx, func() { ws.Close() })
	defer stop()
	var hello protocol.TransferHello
	if err := readText(ws, &hello); err != nil {
		return nil, c.interrupted(ctx, res, err)
	}
	h := sha256.New()
	var from int64
	if hello.Offset > 0 && hello.Offset <= size {
		if err := hashFile(f, hello.Offset, h); err != nil {
			return nil, err
		}
		if hex.EncodeToString(h.Sum(nil)) == hello.PrefixSHA256 {
			from = hello.Offset
		} else {
			h.Reset()
		}
	}
	sb, _ := json.Marshal(protocol.TransferStart{Offset: from})
	if err := ws.WriteMessage(websocket.TextMessage, sb); err != nil {
		return nil, c.interrupted(ctx, res, err)
	}
	if from > 0 {
		if o.OnResume != nil {
			o.OnResume(from)
		}
		if o.Progress != nil {
			o.Progress(from)
		}
	}
	buf := make([]byte, protocol.TransferChunkBytes)
	for off := from; off < size; {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		if n == 0 && err != nil {
			if err == io.EOF {
				return nil, fmt.Errorf("%s: the file shrank while it was sent", local)
			}
			return nil, err
		}
		h.Write(buf[:n])
		if err := ws.WriteMessage(websocket.BinaryMessage, buf[:n]); err != nil {
			return nil, c.interrupted(ctx, res, fmt.Errorf("the data connection ended after %d of %d bytes", off, size))
		}
		off += int64(n)
		if o.Progress != nil {
			o.Progress(int64(n))
		}
	}
	// A local writer that changed the file while it was read makes a torn
	// copy whose sha256 still matches the bytes sent: the end is not sent,
	// so the node moves nothing into place (its part file stays).
	if err := unchanged(f, fi); err != nil {
		return nil, fmt.Errorf("%s: %w", local, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	eb, _ := json.Marshal(protocol.TransferEnd{SHA256: sum})
	if err := ws.WriteMessage(websocket.TextMessage, eb); err != nil {
		return nil, c.interrupted(ctx, res, err)
	}
	drain(ws)
	out, err := finish(ctx, res)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) && pe.DomainCode() == protocol.DomainChecksumMismatch {
			return nil, fmt.Errorf("%s: %w", remote, ErrChecksum)
		}
		return nil, err
	}
	if out.SHA256 != sum || out.Size != size {
		return nil, fmt.Errorf("%s: %w", remote, ErrChecksum)
	}
	return out, nil
}
