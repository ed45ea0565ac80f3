package transfer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"lemon/protocol"
)

// TreeOptions shape a tree transfer.
type TreeOptions struct {
	// Overwrite replaces existing files at the destination.
	Overwrite bool
	// Parallel is the number of streams a put uses (1 to 64; default 4).
	Parallel int
	// Progress is called with bytes moved; Start with the totals once known;
	// FileDone after each file.
	Progress func(n int64)
	Start    func(bytes int64, files int)
	FileDone func()
}

func writeJSON(ws *websocket.Conn, v any) error {
	b, _ := json.Marshal(v)
	return ws.WriteMessage(websocket.TextMessage, b)
}

type localDirMeta struct {
	path    string
	mode    uint32
	mtimeMs int64
}

// GetTree copies the node's directory remote to the local directory local
// (created; it must not exist as a file) as one stream: directories get
// the remote modes and mtimes at the end, files theirs, each written to a
// part file and moved into place once its sha256 matched; the whole tree's
// digest is checked against the node's result. Symlinks and special files
// on the node are not copied.
func (c *Client) GetTree(ctx context.Context, remote, local string, o TreeOptions) (*protocol.FSTransferResult, error) {
	if err := os.MkdirAll(local, 0o700); err != nil {
		return nil, err
	}
	// Every local operation goes through root: a symlink already in the
	// local tree that leads out of it (say link -> ~/.ssh) is refused, so
	// the node's names cannot write outside local (docs/FS.md, "Transfers").
	root, err := os.OpenRoot(local)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	ws, res, err := c.start(ctx, protocol.MethodFSTransferGet, map[string]any{"path": remote, "tree": true})
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	stop := context.AfterFunc(ctx, func() { ws.Close() })
	defer stop()
	var hello protocol.TransferEntry
	if err := readText(ws, &hello); err != nil {
		return nil, c.interrupted(ctx, res, err)
	}
	if o.Start != nil {
		o.Start(hello.Size, int(hello.Files))
	}
	dirs := []localDirMeta{}
	var dg protocol.TreeDigest
	buf := make([]byte, protocol.TransferChunkBytes)
	for {
		var e protocol.TransferEntry
		if err := readText(ws, &e); err != nil {
			return nil, c.interrupted(ctx, res, err)
		}
		if e.Done {
			break
		}
		if !protocol.ValidTreeName(e.Name) {
			return nil, errors.New("the node sent a malformed tree entry")
		}
		lp := filepath.FromSlash(e.Name) // relative to root
		if e.Dir {
			if err := root.Mkdir(lp, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return nil, err
			}
			dirs = append(dirs, localDirMeta{lp, e.Mode, e.MtimeMs})
			continue
		}
		sum, err := c.getOne(ctx, ws, res, root, lp, e, o, buf)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name, err)
		}
		dg.Add(e.Name, sum)
		if o.FileDone != nil {
			o.FileDone()
		}
	}
	drain(ws)
	out, err := finish(ctx, res)
	if err != nil {
		return nil, err
	}
	if out.SHA256 != dg.Sum() {
		return nil, fmt.Errorf("%s: %w", remote, ErrChecksum)
	}
	sort.Slice(dirs, func(i, k int) bool { return len(dirs[i].path) > len(dirs[k].path) })
	for _, d := range dirs {
		root.Chmod(d.path, os.FileMode(d.mode&0o777))
		t := time.UnixMilli(d.mtimeMs)
		root.Chtimes(d.path, t, t)
	}
	return out, nil
}

// getOne receives one file of a tree into lp, a path relative to root.
func (c *Client) getOne(ctx context.Context, ws *websocket.Conn, res <-chan callResult, root *os.Root, lp string, e protocol.TransferEntry, o TreeOptions, buf []byte) (string, error) {
	if _, err := root.Lstat(lp); err == nil && !o.Overwrite {
		return "", ErrExists
	}
	// A fresh part file: whatever has its name (a leftover part, or a
	// symlink planted to redirect the write) is removed, not written
	// through.
	part := LocalPart(lp)
	if err := root.Remove(part); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	f, err := root.OpenFile(part, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	ok := false
	defer func() {
		f.Close()
		if !ok {
			root.Remove(part)
		}
	}()
	h := sha256.New()
	w := io.MultiWriter(f, h)
	var got int64
	for got < e.Size {
		mt, r, err := ws.NextReader()
		if err != nil {
			return "", c.interrupted(ctx, res, fmt.Errorf("the data connection ended after %d of %d bytes", got, e.Size))
		}
		if mt != websocket.BinaryMessage {
			return "", errors.New("unexpected text message on the data connection")
		}
		n, err := io.CopyBuffer(w, io.LimitReader(r, e.Size-got+1), buf)
		got += n
		if o.Progress != nil {
			o.Progress(n)
		}
		if err != nil {
			return "", c.interrupted(ctx, res, err)
		}
		if got > e.Size {
			return "", errors.New("the node sent more bytes than the file's size")
		}
	}
	var end protocol.TransferEntry
	if err := readText(ws, &end); err != nil {
		return "", c.interrupted(ctx, res, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if end.SHA256 != sum {
		return "", ErrChecksum
	}
	if err := f.Chmod(os.FileMode(e.Mode & 0o777)); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	mt := time.UnixMilli(e.MtimeMs)
	if err := root.Chtimes(part, mt, mt); err != nil {
		return "", err
	}
	if err := placeIn(root, part, lp, o.Overwrite); err != nil {
		return "", err
	}
	ok = true
	return sum, nil
}

type treeFile struct {
	local, name string
	size        int64
}

// PutTree copies the local directory local into the node's directory
// remote (created with its parents) in o.Parallel streams, files spread
// over them by size. Files keep their mode and mtime (the node has no call
// that sets a directory's); symlinks are followed as scp -r does, except
// to directories; special files are skipped with a note on warn.
func (c *Client) PutTree(ctx context.Context, local, remote string, o TreeOptions, warn func(string)) error {
	par := o.Parallel
	if par <= 0 {
		par = 4
	}
	root := filepath.Clean(local)
	var files []treeFile
	var dirs []string
	var total int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		name := filepath.ToSlash(rel)
		info, err := os.Stat(p)
		if err != nil {
			return err
		}
		switch {
		case info.IsDir() && d.Type()&fs.ModeSymlink == 0:
			dirs = append(dirs, name)
		case info.Mode().IsRegular():
			files = append(files, treeFile{p, name, info.Size()})
			total += info.Size()
		default:
			if warn != nil {
				warn(p + " is not a regular file or directory; skipped")
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if o.Start != nil {
		o.Start(total, len(files))
	}
	// Largest first, each to the stream with the fewest bytes so far.
	sort.Slice(files, func(i, k int) bool { return files[i].size > files[k].size })
	groups := make([][]treeFile, min(par, max(len(files), 1)))
	load := make([]int64, len(groups))
	for _, f := range files {
		g := 0
		for i := range load {
			if load[i] < load[g] {
				g = i
			}
		}
		groups[g] = append(groups[g], f)
		load[g] += f.size
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for i, g := range groups {
		var ds []string
		if i == 0 {
			ds = dirs
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.putStream(ctx, remote, ds, g, o); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}

func (c *Client) putStream(ctx context.Context, remote string, dirs []string, files []treeFile, o TreeOptions) error {
	ws, res, err := c.start(ctx, protocol.MethodFSTransferPut, map[string]any{"path": remote, "tree": true, "overwrite": o.Overwrite})
	if err != nil {
		return err
	}
	defer ws.Close()
	stop := context.AfterFunc(ctx, func() { ws.Close() })
	defer stop()
	var hello protocol.TransferHello
	if err := readText(ws, &hello); err != nil {
		return c.interrupted(ctx, res, err)
	}
	for _, d := range dirs {
		if err := writeJSON(ws, protocol.TransferEntry{Name: d, Dir: true}); err != nil {
			return c.interrupted(ctx, res, err)
		}
	}
	var dg protocol.TreeDigest
	buf := make([]byte, protocol.TransferChunkBytes)
	for _, tf := range files {
		sum, err := c.putOne(ctx, ws, res, tf, buf, o)
		if err != nil {
			return fmt.Errorf("%s: %w", tf.local, err)
		}
		dg.Add(tf.name, sum)
		if o.FileDone != nil {
			o.FileDone()
		}
	}
	if err := writeJSON(ws, protocol.TransferEntry{Done: true}); err != nil {
		return c.interrupted(ctx, res, err)
	}
	drain(ws)
	out, err := finish(ctx, res)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) && pe.DomainCode() == protocol.DomainChecksumMismatch {
			return fmt.Errorf("%s: %w", remote, ErrChecksum)
		}
		return err
	}
	if out.SHA256 != dg.Sum() || out.Files != int64(len(files)) {
		return fmt.Errorf("%s: %w", remote, ErrChecksum)
	}
	return nil
}

func (c *Client) putOne(ctx context.Context, ws *websocket.Conn, res <-chan callResult, tf treeFile, buf []byte, o TreeOptions) (string, error) {
	f, err := os.Open(tf.local)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	size := tf.size
	if fi.Size() != size {
		return "", errors.New("the file changed size while the tree was sent")
	}
	if err := writeJSON(ws, protocol.TransferEntry{Name: tf.name, Size: size, Mode: uint32(fi.Mode().Perm()),
		MtimeMs: fi.ModTime().UnixMilli()}); err != nil {
		return "", c.interrupted(ctx, res, err)
	}
	h := sha256.New()
	for off := int64(0); off < size; {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		if n == 0 && err != nil {
			return "", errors.New("the file shrank while it was sent")
		}
		h.Write(buf[:n])
		if err := ws.WriteMessage(websocket.BinaryMessage, buf[:n]); err != nil {
			return "", c.interrupted(ctx, res, err)
		}
		off += int64(n)
		if o.Progress != nil {
			o.Progress(int64(n))
		}
	}
	if err := unchanged(f, fi); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if err := writeJSON(ws, protocol.TransferEntry{SHA256: sum}); err != nil {
		return "", c.interrupted(ctx, res, err)
	}
	return sum, nil
}
