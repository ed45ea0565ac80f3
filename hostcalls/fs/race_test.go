package fs

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"lemon/protocol"
)

// swapper exchanges two names atomically (renameat2 RENAME_EXCHANGE) until
// stop closes, counting the swaps.
func swapper(t *testing.T, a, b string, stop <-chan struct{}, swaps *atomic.Int64, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("exchange: %v", err)
				return
			}
			swaps.Add(1)
		}
	}()
}

// allowedRaceErrors are the classifications a request may get when a
// directory on its path is swapped for a symlink while it resolves.
var allowedRaceErrors = map[string]bool{"": true, "path_not_allowed": true, "not_found": true, "not_directory": true, "revision_conflict": true}

// TestRaceSwapDirWithOutsideLink swaps root/d with a symlink to a
// directory outside every root (holding a canary) while readers, listers
// and writers hammer paths through d. Nothing outside may be read, listed
// or changed.
func TestRaceSwapDirWithOutsideLink(t *testing.T) {
	e := newEnv(t, []node{
		{path: "root/d/f.txt", file: "inside"},
		{path: "root/swap", symlink: "${TMP}/outside"},
		{path: "outside/f.txt", file: "CANARY"},
		{path: "outside/secret-name", file: "CANARY"},
	}, "root")
	stop := make(chan struct{})
	var bg, workers sync.WaitGroup
	var swaps, okReads, okWrites atomic.Int64
	swapper(t, e.abs("root/d"), e.abs("root/swap"), stop, &swaps, &bg)
	const iters = 1500
	for w := 0; w < 2; w++ {
		workers.Add(3)
		go func() { // reader
			defer workers.Done()
			for i := 0; i < iters; i++ {
				call := newCall()
				r, err := e.f.Read("d/f.txt", 0, 100, call.PutBlob)
				if !allowedRaceErrors[domain(err)] {
					t.Errorf("read: unexpected %v", err)
				}
				if err == nil {
					b, _ := call.Blob(r.Blob)
					if string(b) != "inside" || r.Path != e.abs("root/d/f.txt") && r.Path != e.abs("root/swap/f.txt") {
						t.Errorf("read returned %q at %s", b, r.Path)
						return
					}
					okReads.Add(1)
				}
			}
		}()
		go func() { // lister
			defer workers.Done()
			for i := 0; i < iters; i++ {
				r, err := e.f.List("d", true)
				if !allowedRaceErrors[domain(err)] {
					t.Errorf("list: unexpected %v", err)
				}
				if err == nil {
					for _, en := range r.Entries {
						if en.Name == "secret-name" {
							t.Errorf("listed the outside directory")
							return
						}
					}
				}
			}
		}()
		go func(w int) { // writer: create new files and overwrite by CAS
			defer workers.Done()
			for i := 0; i < iters; i++ {
				_, err := e.f.Write(protocol.FSWriteCall{Path: fmt.Sprintf("d/w%d-%d", w, i), Truncate: true}, []byte("written"))
				if !allowedRaceErrors[domain(err)] {
					t.Errorf("write: unexpected %v", err)
				}
				if err == nil {
					okWrites.Add(1)
				}
				st, err := e.f.Stat("d/f.txt")
				if err == nil {
					e.f.Write(protocol.FSWriteCall{Path: "d/f.txt", Truncate: true, ExpectedModifiedAtMs: &st.MtimeMs}, []byte("inside"))
				}
				e.f.Mkdir(fmt.Sprintf("d/m%d-%d", w, i))
			}
		}(w)
	}
	workers.Wait()
	close(stop)
	bg.Wait()
	t.Logf("swaps %d, successful reads %d, writes %d", swaps.Load(), okReads.Load(), okWrites.Load())
	if swaps.Load() == 0 {
		t.Fatal("the swapper never ran")
	}
	names := e.dirNames("outside")
	if len(names) != 2 || names[0] != "f.txt" || names[1] != "secret-name" {
		t.Fatalf("outside directory changed: %d names", len(names))
	}
	if e.content("outside/f.txt") != "CANARY" || e.content("outside/secret-name") != "CANARY" {
		t.Fatal("canary changed")
	}
}

// TestRaceSwapDirWithLinkToSlash swaps root/d with a symlink to "/".
// Inside, d holds etc/passwd and tmp/; through the link those would be
// the real /etc/passwd and /tmp. Reads must only ever return the inside
// file and writes must never create anything in the real /tmp.
func TestRaceSwapDirWithLinkToSlash(t *testing.T) {
	e := newEnv(t, []node{
		{path: "root/d/etc/passwd", file: "inside-passwd"},
		{path: "root/d/tmp", dir: true},
		{path: "root/swap", symlink: "/"},
	}, "root")
	var rb [6]byte
	rand.Read(rb[:])
	prefix := "lemon-race-" + hex.EncodeToString(rb[:])
	stop := make(chan struct{})
	var bg, workers sync.WaitGroup
	var swaps atomic.Int64
	swapper(t, e.abs("root/d"), e.abs("root/swap"), stop, &swaps, &bg)
	const iters = 1500
	workers.Add(2)
	go func() {
		defer workers.Done()
		for i := 0; i < iters; i++ {
			call := newCall()
			r, err := e.f.Read("d/etc/passwd", 0, 4096, call.PutBlob)
			if !allowedRaceErrors[domain(err)] {
				t.Errorf("read: unexpected %v", err)
			}
			if err == nil {
				if b, _ := call.Blob(r.Blob); string(b) != "inside-passwd" {
					t.Errorf("read the real /etc/passwd")
					return
				}
			}
		}
	}()
	go func() {
		defer workers.Done()
		for i := 0; i < iters; i++ {
			name := fmt.Sprintf("d/tmp/%s-%d", prefix, i)
			_, err := e.f.Write(protocol.FSWriteCall{Path: name, Truncate: true, Mkdirs: true}, []byte("x"))
			if !allowedRaceErrors[domain(err)] {
				t.Errorf("write: unexpected %v", err)
			}
		}
	}()
	workers.Wait()
	close(stop)
	bg.Wait()
	if swaps.Load() == 0 {
		t.Fatal("the swapper never ran")
	}
	leaked, _ := filepath.Glob("/tmp/" + prefix + "*")
	for _, p := range leaked {
		os.Remove(p)
	}
	if len(leaked) > 0 {
		t.Fatalf("%d files escaped into /tmp", len(leaked))
	}
}
