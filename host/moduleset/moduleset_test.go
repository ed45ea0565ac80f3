package moduleset

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"testing/fstest"
	"time"
)

// declared builds a manifest of modules with the given declared sizes
// (no bytes behind them).
func declared(sizes ...int64) Manifest {
	var m Manifest
	for i, n := range sizes {
		sum := sha256.Sum256([]byte(fmt.Sprint("module ", i)))
		fam := fmt.Sprintf("fam%d", i)
		m.Modules = append(m.Modules, Module{Family: fam, Version: "1.0.0",
			SHA256: hex.EncodeToString(sum[:]), Size: n, File: fam + ".wasm"})
	}
	return m
}

func repeatSize(n int, size int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = size
	}
	return out
}

func TestCheckBoundsAtAndPastEachLimit(t *testing.T) {
	if MaxSetModules != 64 || MaxSetBytes != 256<<20 || MaxModuleBytes != 64<<20 {
		t.Fatalf("bounds changed: update docs/PROTOCOL.md and these cases")
	}
	const mib = 1 << 20
	cases := []struct {
		name  string
		sizes []int64
		ok    bool
	}{
		{"no modules", nil, true},
		{"64 modules", repeatSize(64, 1), true},
		{"65 modules", repeatSize(65, 1), false},
		{"module of 64 MiB", []int64{64 * mib}, true},
		{"module of 64 MiB + 1", []int64{64*mib + 1}, false},
		{"empty module", []int64{0}, false},
		{"negative size", []int64{-1}, false},
		{"total of 256 MiB", []int64{64 * mib, 64 * mib, 64 * mib, 64*mib - 1, 1}, true},
		{"total of 256 MiB + 1", []int64{64 * mib, 64 * mib, 64 * mib, 64 * mib, 1}, false},
		{"64 modules of 4 MiB", repeatSize(64, 4*mib), true},
		{"64 modules, one byte over", append(repeatSize(63, 4*mib), 4*mib+1), false},
	}
	for _, tc := range cases {
		err := declared(tc.sizes...).CheckBounds()
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok %v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrSetBounds) {
			t.Errorf("%s: error %v does not wrap ErrSetBounds", tc.name, err)
		}
	}
}

// Load refuses a manifest past the bounds before it reads a module file:
// the files are absent, yet the error is the bounds error.
func TestLoadChecksBoundsBeforeReadingModules(t *testing.T) {
	data, _ := json.Marshal(declared(repeatSize(MaxSetModules+1, 1)...))
	_, _, err := Load(fstest.MapFS{ManifestFile: &fstest.MapFile{Data: data}})
	if !errors.Is(err, ErrSetBounds) {
		t.Fatalf("err = %v, want ErrSetBounds", err)
	}
	// At the limit the manifest passes the bounds and Load goes on to
	// read the (absent) files.
	data, _ = json.Marshal(declared(repeatSize(MaxSetModules, 1)...))
	_, _, err = Load(fstest.MapFS{ManifestFile: &fstest.MapFile{Data: data}})
	if err == nil || errors.Is(err, ErrSetBounds) {
		t.Fatalf("err = %v, want a missing-file error", err)
	}
}

// A set file that is not a regular file (a FIFO, which would block a
// read forever, or a link to /dev/zero, which would never end) is
// refused without reading it; a module file larger than its declared
// size is read only one byte past it and fails its digest.
func TestLoadReadsOnlyRegularBoundedFiles(t *testing.T) {
	dir := t.TempDir()
	body := []byte("module bytes")
	sum := sha256.Sum256(body)
	m := Manifest{Modules: []Module{{Family: "fam", Version: "1.0.0", SHA256: hex.EncodeToString(sum[:]),
		Size: int64(len(body)), File: "fam.wasm"}}}
	data, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "fam.wasm")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, _, err := LoadDir(dir); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Fatalf("FIFO: %v, want ErrNotRegular", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("LoadDir blocked on a FIFO")
	}
	os.Remove(path)
	if err := os.Symlink("/dev/zero", path); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadDir(dir); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("link to /dev/zero: %v, want ErrNotRegular", err)
	}
	os.Remove(path)
	if err := os.WriteFile(path, append(body, make([]byte, 1<<20)...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadDir(dir); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("a larger file: %v, want ErrDigestMismatch", err)
	}
	if err := os.WriteFile(path, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadDir(dir); err != nil {
		t.Fatalf("the regular file: %v", err)
	}
}
