package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"lemon/client/transfer"
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
	o := transfer.Options{Overwrite: fl.overwrite, Mkdirs: fl.mkdirs, Resume: fl.resume, Progress: prog.add}
	if !fl.recursive {
		if cmd == "get" {
			var st protocol.FSStat
			if err := c.call(ctx, "node.fs.stat", map[string]any{"path": src}, &st); err != nil {
				return err
			}
			if st.Type == "directory" {
				return errors.New("the remote path is a directory: pass -r to copy a tree")
			}
			prog.start(st.Size, 1)
			_, err := tc.Get(ctx, src, dst, o)
			return transferError(err, dst)
		}
		fi, err := os.Stat(src)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return errors.New("the local path is a directory: pass -r to copy a tree")
		}
		prog.start(fi.Size(), 1)
		_, err = tc.Put(ctx, src, dst, o)
		return transferError(err, "")
	}
	if cmd == "get" {
		return c.getTree(ctx, tc, src, dst, fl, o, prog)
	}
	return c.putTree(ctx, tc, src, dst, fl, o, prog)
}

// transferError adds what to do next to a failure that left a part file.
func transferError(err error, local string) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.DomainCode() == protocol.DomainTransferInterrupted ||
		!errors.As(err, &pe) && !errors.Is(err, transfer.ErrChecksum) && !errors.Is(err, transfer.ErrExists) {
		return fmt.Errorf("%w (rerun with --resume to continue)", err)
	}
	return err
}

// job is one file of a tree copy.
type job struct {
	src, dst string
	size     int64
}

// runJobs moves the files of a tree with fl.parallel transfers at once;
// the first failure stops the rest.
func runJobs(ctx context.Context, jobs []job, parallel int, do func(ctx context.Context, j job) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan job)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for i := 0; i < parallel; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				if err := do(ctx, j); err != nil {
					once.Do(func() { first = fmt.Errorf("%s: %w", j.src, err); cancel() })
				}
			}
		}()
	}
feed:
	for _, j := range jobs {
		select {
		case ch <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(ch)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}

type localDir struct {
	path    string
	mode    uint32
	mtimeMs int64
}

// getTree copies the node's directory remote to local as scp -r does:
// into local/<base> when local is a directory, else to local itself.
// Files keep their mode and mtime; directories get theirs at the end.
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
		local = filepath.Join(local, filepath.Base(st.Path))
	}
	var jobs []job
	var dirs []localDir
	var total int64
	var walk func(rdir, ldir string, mode uint32, mtime int64) error
	walk = func(rdir, ldir string, mode uint32, mtime int64) error {
		if err := os.Mkdir(ldir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		dirs = append(dirs, localDir{ldir, mode, mtime})
		var r protocol.FSListResult
		if err := c.call(ctx, "node.fs.list", map[string]any{"path": rdir, "showHidden": true}, &r); err != nil {
			return err
		}
		if r.Truncated {
			return fmt.Errorf("%s holds more than %d entries, more than one listing shows; copy its subdirectories one by one", r.Path, r.Limit)
		}
		for _, e := range r.Entries {
			if e.FSEntryStat == nil {
				return fmt.Errorf("%s/%s: %s", r.Path, e.Name, e.Error)
			}
			rp, lp := r.Path+"/"+e.Name, filepath.Join(ldir, e.Name)
			typ, size, emode, emtime := e.Type, e.Size, e.Mode, e.MtimeMs
			if typ == "symlink" { // as scp -r: follow it
				var ls protocol.FSStat
				if err := c.call(ctx, "node.fs.stat", map[string]any{"path": rp}, &ls); err != nil {
					return err
				}
				typ, size, emode, emtime = ls.Type, ls.Size, ls.Mode, ls.MtimeMs
			}
			switch typ {
			case "directory":
				if err := walk(rp, lp, emode, emtime); err != nil {
					return err
				}
			case "regular":
				jobs = append(jobs, job{rp, lp, size})
				total += size
			default:
				fmt.Fprintf(os.Stderr, "lemon fs: skipping %s (%s)\n", rp, typ)
			}
		}
		return nil
	}
	if err := walk(st.Path, local, st.Mode, st.MtimeMs); err != nil {
		return err
	}
	prog.start(total, len(jobs))
	err := runJobs(ctx, jobs, fl.parallel, func(ctx context.Context, j job) error {
		_, err := tc.Get(ctx, j.src, j.dst, o)
		prog.fileDone()
		return err
	})
	if err != nil {
		return err
	}
	// Deepest first, so setting a parent's mtime comes last.
	sort.Slice(dirs, func(i, k int) bool { return len(dirs[i].path) > len(dirs[k].path) })
	for _, d := range dirs {
		os.Chmod(d.path, os.FileMode(d.mode&0o777))
		t := time.UnixMilli(d.mtimeMs)
		os.Chtimes(d.path, t, t)
	}
	return nil
}

// putTree copies the local directory local to the node as scp -r does:
// into remote/<base> when remote is a directory, else to remote itself.
// Files keep their mode and mtime (the node has no call that sets a
// directory's).
func (c *fsClient) putTree(ctx context.Context, tc *transfer.Client, local, remote string, fl transferFlags, o transfer.Options, prog *treeProgress) error {
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
	var jobs []job
	var dirs []string
	var total int64
	root := filepath.Clean(local)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rp := remote
		if rel != "." {
			rp = strings.TrimSuffix(remote, "/") + "/" + filepath.ToSlash(rel)
		}
		info, err := os.Stat(p) // as scp -r: follow symlinks
		if err != nil {
			return err
		}
		switch {
		case info.IsDir():
			if d.Type()&fs.ModeSymlink != 0 {
				fmt.Fprintf(os.Stderr, "lemon fs: skipping %s (a symlink to a directory)\n", p)
				return nil
			}
			dirs = append(dirs, rp)
		case info.Mode().IsRegular():
			jobs = append(jobs, job{p, rp, info.Size()})
			total += info.Size()
		default:
			fmt.Fprintf(os.Stderr, "lemon fs: skipping %s (not a regular file)\n", p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if err := c.call(ctx, "node.fs.mkdir", map[string]any{"path": d}, nil); err != nil {
			return err
		}
	}
	prog.start(total, len(jobs))
	o.Mkdirs = true
	return runJobs(ctx, jobs, fl.parallel, func(ctx context.Context, j job) error {
		_, err := tc.Put(ctx, j.src, j.dst, o)
		prog.fileDone()
		return err
	})
}

// treeProgress is one progress line for a whole transfer: bytes, files,
// rate and ETA in human units, redrawn five times a second on a terminal
// (silent elsewhere).
type treeProgress struct {
	w            io.Writer
	total, moved atomic.Int64
	files, done  atomic.Int64
	began        time.Time
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
	p.total.Store(total)
	p.files.Store(int64(files))
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
