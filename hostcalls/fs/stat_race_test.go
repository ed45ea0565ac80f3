package fs

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"lemon/protocol"
)

// TestStatSymlinkSwapRace: while root/x is swapped (rename over it)
// between a symlink into the root, a symlink out of it, a dangling
// symlink and a FIFO, fs.stat and fs.open of x (followed or not) answer
// filesystem_busy for a symlink replaced between the walk and the
// readlink (not a generic filesystem error), and only what
// is inside the root: never the outside file's inode, never a path
// outside the root, never a crash or a hang.
func TestStatSymlinkSwapRace(t *testing.T) {
	e := newEnv(t, []node{{path: "root/d/a.md", file: "abc"}, {path: "secret", file: "s"}}, "root")
	var sec syscall.Stat_t
	if err := syscall.Stat(e.abs("secret"), &sec); err != nil {
		t.Fatal(err)
	}
	root := e.abs("root")
	tmp := filepath.Join(root, "tmp")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			os.Remove(tmp)
			switch i % 4 {
			case 0:
				os.Symlink("d/a.md", tmp)
			case 1:
				os.Symlink(e.abs("secret"), tmp)
			case 2:
				os.Symlink("nowhere", tmp)
			default:
				syscall.Mkfifo(tmp, 0o600)
			}
			os.Rename(tmp, filepath.Join(root, "x"))
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	for i := 0; i < 4000; i++ {
		noFollow := i%2 == 1
		var s struct {
			Path string
			Stat struct{ Ino, Dev uint64 }
		}
		var perr *protocol.Error
		if i%4 < 2 {
			r, p := statP(t, e, nil, "x", noFollow)
			s.Path, s.Stat.Ino, s.Stat.Dev, perr = r.Path, r.Stat.Ino, r.Stat.Dev, p
		} else {
			call := newCall()
			r, p := openH(t, e, call, "x", noFollow)
			call.end()
			s.Path, s.Stat.Ino, s.Stat.Dev, perr = r.Path, r.Stat.Ino, r.Stat.Dev, p
		}
		if perr != nil {
			switch perr.DomainCode() {
			case protocol.DomainPathNotAllowed, protocol.DomainNotFound, protocol.DomainFilesystemBusy:
				continue
			}
			t.Fatalf("%d: x (noFollow %v): %+v", i%4, noFollow, perr)
		}
		if s.Stat.Ino == sec.Ino && s.Stat.Dev == sec.Dev {
			t.Fatalf("stat x (noFollow %v) answered the file outside the root: %+v", noFollow, s)
		}
		if rel, err := filepath.Rel(root, s.Path); err != nil || rel == ".." || len(rel) > 2 && rel[:3] == "../" {
			t.Fatalf("stat x: path %q outside the root", s.Path)
		}
	}
}
