// Package hosttest helps tests run modules through the real host: it
// builds a plugin directory into a wasip1 reactor once per test binary and
// pins it in a moduleset.Module.
package hosttest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"lemon/host/moduleset"
	"lemon/policies/authority"
)

var (
	mu    sync.Mutex
	built = map[string][]byte{}
	dir   string
)

// RepoRoot returns the repository root (the directory holding go.mod).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Build compiles the plugin at pkgDir (relative to the repository root,
// e.g. "plugins/hostinfo") with the same flags as build.sh and returns its
// bytes. Results are cached for the life of the test binary.
func Build(t testing.TB, pkgDir string) []byte {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if b, ok := built[pkgDir]; ok {
		return b
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "lemon-hosttest-")
		if err != nil {
			t.Fatal(err)
		}
		dir = d
	}
	out := filepath.Join(dir, filepath.Base(pkgDir)+".wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-buildvcs=false", "-o", out, "./"+pkgDir)
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkgDir, err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	built[pkgDir] = b
	return b
}

// CacheDir returns a wazero compilation-cache directory shared by the
// tests of this binary, so each module compiles once.
func CacheDir(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if dir == "" {
		d, err := os.MkdirTemp("", "lemon-hosttest-")
		if err != nil {
			t.Fatal(err)
		}
		dir = d
	}
	return filepath.Join(dir, "wazero-cache")
}

// Pin describes wasm as a pinned module of family.
func Pin(family string, wasm []byte) moduleset.Module {
	sum := sha256.Sum256(wasm)
	return moduleset.Module{Family: family, Version: "test", SHA256: hex.EncodeToString(sum[:]),
		Size: int64(len(wasm)), File: family + ".wasm"}
}

// Cleanup removes the build cache; call it from TestMain after m.Run.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
		dir = ""
	}
}

// Context returns the JSON of a valid execution context v1 for a request
// with invokeId runID: principal "test", full-access policy, capabilities
// caps (docs/POLICY.md, "Execution context").
func Context(t testing.TB, runID string, caps ...string) json.RawMessage {
	t.Helper()
	return ContextOf(t, authority.ExecutionContext{RunID: runID, Principal: "test", Provenance: "test", Capabilities: caps})
}

// ContextOf validates c (authority.New) and returns its JSON.
func ContextOf(t testing.TB, c authority.ExecutionContext) json.RawMessage {
	t.Helper()
	if c.Capabilities == nil {
		c.Capabilities = []string{}
	}
	ec, err := authority.New(c)
	if err != nil {
		t.Fatalf("context: %v", err)
	}
	b, err := ec.MarshalJSON()
	if err != nil {
		t.Fatalf("context: %v", err)
	}
	return b
}
