package hosttest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"lemon/host"
)

// Main runs a test binary's tests and removes the module build cache
// afterwards: `func TestMain(m *testing.M) { hosttest.Main(m) }`.
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// NewHost creates a host from cfg (the shared compilation cache unless
// cfg names one), builds the plugin at pkgDir (relative to the repository
// root, e.g. "plugins/fs"), loads it pinned as family, and closes the host
// when the test ends.
func NewHost(t testing.TB, cfg host.Config, family, pkgDir string) *host.Host {
	t.Helper()
	ctx := context.Background()
	if cfg.CacheDir == "" {
		cfg.CacheDir = CacheDir(t)
	}
	h, err := host.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	wasm := Build(t, pkgDir)
	if _, err := h.Load(ctx, Pin(family, wasm), wasm); err != nil {
		t.Fatal(err)
	}
	return h
}

// LogBuffer is an io.Writer safe for concurrent use, for capturing the
// gate's audit log (slog) in tests that search it for canaries.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// FilesContaining returns the files under dir whose bytes contain needle
// (for canary searches over a node's state directory).
func FilesContaining(t testing.TB, dir string, needle []byte) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, needle) {
			hits = append(hits, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}
