package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"lemon/client/transfer"
	"lemon/hostcalls/datadial"
	"lemon/protocol"
)

// transferFlags are the flags of lemon fs get and put.
type transferFlags struct {
	overwrite, mkdirs, recursive, resume bool
	parallel                             int
}

// transfer runs lemon fs get or put (docs/FS.md, "Transfers").
func (c *fsClient) transfer(ctx context.Context, cmd, src, dst string, fl transferFlags) error {
	if fl.parallel < 1 || fl.parallel > 64 {
		return errors.New("--parallel must be 1 to 64")
	}
	tc := &transfer.Client{Conn: c.conn, Node: c.node}
	prog := newTreeProgress(os.Stderr)
	defer prog.stop()
	var moved atomic.Int64 // bytes moved, a resumed prefix included: a put's part file exists on the node once > 0
	o := transfer.Options{Overwrite: fl.overwrite, Mkdirs: fl.mkdirs, Resume: fl.resume,
		Progress: func(n int64) { moved.Add(n); prog.add(n) }}
	if !fl.recursive {
		o.OnResume = func(off int64) { fmt.Fprintf(os.Stderr, "lemon fs: resuming from byte %d\n", off) }
	}
	if !fl.recursive {
		if cmd == "get" {
			var st protocol.FSStat
			if err := c.call(ctx, "node.fs.stat", map[string]any{"path": src}, &st); err != nil {
				return err
			}
			if st.Type == "directory" {
				return errors.New("the remote path is a directory: pass -r to copy a tree")
			}
			if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
				dst = filepath.Join(dst, path.Base(st.Path))
			}
			if dir := filepath.Dir(dst); !dirExists(dir) {
				return fmt.Errorf("local directory %s does not exist", dir)
			}
			prog.start(st.Size, 1)
			var err error
			datadial.RunBulk(func() { _, err = tc.Get(ctx, src, dst, o) })
			return transferError(err, "get", dst, 0)
		}
		fi, err := os.Stat(src)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return errors.New("the local path is a directory: pass -r to copy a tree")
		}
		// As get and cp: onto an existing remote directory, the file goes
		// into DIR/NAME (docs/FS.md, "From the CLI").
		var st protocol.FSStat
		if c.call(ctx, "node.fs.stat", map[string]any{"path": dst}, &st) == nil && st.Type == "directory" {
			dst = strings.TrimSuffix(st.Path, "/") + "/" + filepath.Base(src)
		}
		prog.start(fi.Size(), 1)
		datadial.RunBulk(func() { _, err = tc.Put(ctx, src, dst, o) })
		return transferError(err, "put", "", moved.Load())
	}
	if cmd == "get" {
		return c.getTree(ctx, tc, src, dst, fl, o, prog)
	}
	return c.putTree(ctx, tc, src, dst, fl, o, prog)
}

// Messages of an interrupted single-file transfer (docs/FS.md, "Transfers").
const (
	msgGetInterrupted     = "interrupted; the partial download was removed"
	msgPutInterrupted     = "interrupted; the part file stays on the node: rerun with --resume"
	msgPutInterruptedNone = "interrupted; nothing was sent"
)

// transferError adds what to do next to a failed single-file transfer:
// the hint to resume only when a part file exists (a get's local part
// file, or a put that moved bytes before it failed in transit), the
// --overwrite hint when a put's destination exists, and what an interrupt
// (SIGINT) left. local is a get's local target; moved is the bytes a put
// moved.
func transferError(err error, cmd, local string, moved int64) error {
	var pe *protocol.Error
	switch {
	case err == nil || errors.Is(err, transfer.ErrChecksum) || errors.Is(err, transfer.ErrExists):
		return err
	case errors.Is(err, context.Canceled):
		msg := msgGetInterrupted
		if cmd == "put" {
			msg = msgPutInterruptedNone
			if moved > 0 {
				msg = msgPutInterrupted
			}
		}
		return interruptedError{msg, err}
	case errors.As(err, &pe) && pe.DomainCode() == protocol.DomainAlreadyExists:
		return fmt.Errorf("%s: pass --overwrite to replace it", pe.Error())
	case errors.As(err, &pe) && pe.DomainCode() == protocol.DomainTransferNotRouted:
		return err // nothing was sent: the message names the controller to use
	}
	hint := false
	if cmd == "get" {
		_, serr := os.Stat(transfer.LocalPart(local))
		hint = serr == nil
	} else if moved > 0 {
		hint = !errors.As(err, &pe) || pe.Code == protocol.CodeUnavailable || pe.Code == protocol.CodeTimeout
	}
	if hint {
		return fmt.Errorf("%w (rerun with --resume to continue)", err)
	}
	return err
}

// interruptedError says what an interrupt left in place of the context
// error it wraps ("context canceled" says nothing to an operator), which
// errors.Is still finds.
type interruptedError struct {
	msg string
	err error
}

func (e interruptedError) Error() string { return e.msg }
func (e interruptedError) Unwrap() error { return e.err }

func dirExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

// getTree copies the node's directory remote to local as scp -r does:
// into local/<base> when local is a directory, else to local itself. With
// at least two subdirectories at the top and few top-level files, each
// subdirectory is its own stream, --parallel at a time; else the tree is
// one stream.
func (c *fsClient) getTree(ctx context.Context, tc *transfer.Client, remote, local string, fl transferFlags, o transfer.Options, prog *treeProgress) error {
	var st protocol.FSStat
	if err := c.call(ctx, "node.fs.stat", map[string]any{"path": remote}, &st); err != nil {
		return err
	}
	if st.Type != "directory" {
		return errors.New("the remote path is not a directory")
	}
	if fi, err := os.Stat(local); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s exists and is not a directory", local)
		}
		local = filepath.Join(local, path.Base(st.Path))
	}
	topts := transfer.TreeOptions{Overwrite: fl.overwrite, Progress: prog.add, Start: prog.start, FileDone: prog.fileDone}
	var top protocol.FSListResult
	if err := c.call(ctx, "node.fs.list", map[string]any{"path": st.Path, "showHidden": true}, &top); err != nil {
		return err
	}
	var dirs, files []protocol.FSListEntry
	for _, e := range top.Entries {
		switch {
		case e.FSEntryStat == nil:
		case e.Type == "directory":
			dirs = append(dirs, e)
		case e.Type == "regular":
			files = append(files, e)
		}
	}
	if top.Truncated || len(dirs) < 2 || len(files) > maxTopFiles || fl.parallel == 1 {
		_, err := tc.GetTree(ctx, st.Path, local, topts)
		return err
	}
	if err := os.MkdirAll(local, 0o700); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, fl.parallel)
	errc := make(chan error, len(dirs)+len(files))
	var wg sync.WaitGroup
	run := func(fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			if err := fn(); err != nil {
				errc <- err
				cancel()
			}
		}()
	}
	for _, e := range dirs {
		run(func() error {
			_, err := tc.GetTree(ctx, st.Path+"/"+e.Name, filepath.Join(local, e.Name), topts)
			return err
		})
	}
	for _, e := range files {
		prog.start(e.Size, 1)
		run(func() error {
			_, err := tc.Get(ctx, st.Path+"/"+e.Name, filepath.Join(local, e.Name),
				transfer.Options{Overwrite: fl.overwrite, Progress: prog.add})
			prog.fileDone()
			return err
		})
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, d := range append(dirs, protocol.FSListEntry{Name: "", FSEntryStat: &protocol.FSEntryStat{Mode: st.Mode, MtimeMs: st.MtimeMs}}) {
		p := filepath.Join(local, d.Name)
		os.Chmod(p, os.FileMode(d.Mode&0o777))
		t := time.UnixMilli(d.MtimeMs)
		os.Chtimes(p, t, t)
	}
	return nil
}

// maxTopFiles is the most top-level files get -r moves one request each
// beside parallel subdirectory streams; with more, the tree is one stream.
const maxTopFiles = 64

// putTree copies the local directory local to the node as scp -r does:
// into remote/<base> when remote is a directory, else to remote itself.
func (c *fsClient) putTree(ctx context.Context, tc *transfer.Client, local, remote string, fl transferFlags, _ transfer.Options, prog *treeProgress) error {
	fi, err := os.Stat(local)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return errors.New("the local path is not a directory")
	}
	var st protocol.FSStat
	err = c.call(ctx, "node.fs.stat", map[string]any{"path": remote}, &st)
	var pe *protocol.Error
	switch {
	case err == nil && st.Type == "directory":
		remote = strings.TrimSuffix(st.Path, "/") + "/" + filepath.Base(filepath.Clean(local))
	case err == nil:
		return fmt.Errorf("%s exists on the node and is not a directory", remote)
	case errors.As(err, &pe) && pe.DomainCode() == protocol.DomainNotFound:
	default:
		return err
	}
	return tc.PutTree(ctx, local, remote, transfer.TreeOptions{Overwrite: fl.overwrite, Parallel: fl.parallel,
		Progress: prog.add, Start: prog.start, FileDone: prog.fileDone},
		func(msg string) { fmt.Fprintln(os.Stderr, "lemon fs:", termSafe(msg)) })
}

// treeProgress is one progress line for a whole transfer: bytes, files,
// rate and ETA in human units, redrawn five times a second on a terminal
// (silent elsewhere).
type treeProgress struct {
	w            io.Writer
	total, moved atomic.Int64
	files, done  atomic.Int64
	began        time.Time
	startOnce    sync.Once
	stopc        chan struct{}
	wg           sync.WaitGroup
	once         sync.Once
}

func newTreeProgress(f *os.File) *treeProgress {
	if !interactive(f) {
		return nil
	}
	return &treeProgress{w: f, stopc: make(chan struct{})}
}

func (p *treeProgress) start(total int64, files int) {
	if p == nil {
		return
	}
	// Parallel streams each add their totals as they start.
	p.total.Add(total)
	p.files.Add(int64(files))
	p.startOnce.Do(p.run)
}

func (p *treeProgress) run() {
	p.began = time.Now()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.draw()
			case <-p.stopc:
				return
			}
		}
	}()
}

func (p *treeProgress) add(n int64) {
	if p != nil {
		p.moved.Add(n)
	}
}

func (p *treeProgress) fileDone() {
	if p != nil {
		p.done.Add(1)
	}
}

func (p *treeProgress) stop() {
	if p == nil || p.began.IsZero() {
		return
	}
	p.once.Do(func() {
		close(p.stopc)
		p.wg.Wait()
		p.draw()
		fmt.Fprintln(p.w)
	})
}

func (p *treeProgress) draw() {
	moved, total := p.moved.Load(), p.total.Load()
	el := time.Since(p.began).Seconds()
	rate := float64(moved) / max(el, 1e-3)
	eta := "--:--"
	if rate > 0 && total >= moved {
		eta = clock(time.Duration(float64(total-moved) / rate * float64(time.Second)))
	}
	pct := 100.0
	if total > 0 {
		pct = float64(moved) * 100 / float64(total)
	}
	line := fmt.Sprintf("%s / %s  %3.0f%%  %s/s  ETA %s", humanBytes(moved), humanBytes(total), pct, humanBytes(int64(rate)), eta)
	if f := p.files.Load(); f > 1 {
		line += fmt.Sprintf("  %d/%d files", p.done.Load(), f)
	}
	fmt.Fprintf(p.w, "\r%-70s", line)
}

// humanBytes formats n in binary units: 512 B, 1.5 KiB, 256.0 MiB.
func humanBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	f, u := float64(n)/1024, 0
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	return fmt.Sprintf("%.1f %s", f, units[u])
}

func clock(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s%3600/60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
