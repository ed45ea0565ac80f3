// Package lemontest builds the real lemon binary once for an end-to-end
// test package (cmd/lemon/e2e, cmd/lemon/pairing_e2e) and gives it a
// compilation cache that every node of the run shares, so only the first
// node compiles the module set.
package lemontest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Build is the result of Setup.
type Build struct {
	// Root is the repository root.
	Root string
	// Dir is a temporary directory holding the binary and the cache;
	// Cleanup removes it.
	Dir string
	// Bin is the lemon binary built from lemon/cmd/lemon.
	Bin string
	// WazeroCache is a compilation-cache directory to share between nodes.
	WazeroCache string
}

// Setup checks that build.sh produced the embedded module set, builds the
// binary into a new temporary directory (prefix names it) and makes the
// shared cache directory.
func Setup(prefix string) (*Build, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	manifest := filepath.Join(root, "host", "moduleset", "defaultset", "set", "manifest.json")
	if _, err := os.Stat(manifest); err != nil {
		return nil, errors.New("the embedded module set is not built " +
			"(host/moduleset/defaultset/set/manifest.json is missing): run ./build.sh first")
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	b := &Build{Root: root, Dir: dir, Bin: filepath.Join(dir, "lemon"), WazeroCache: filepath.Join(dir, "wazero-cache")}
	cmd := exec.Command("go", "build", "-o", b.Bin, "lemon/cmd/lemon")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Cleanup()
		return nil, fmt.Errorf("go build lemon/cmd/lemon failed (run ./build.sh first): %v\n%s", err, out)
	}
	if err := os.Mkdir(b.WazeroCache, 0o700); err != nil {
		b.Cleanup()
		return nil, err
	}
	return b, nil
}

// Cleanup removes the temporary directory.
func (b *Build) Cleanup() { os.RemoveAll(b.Dir) }

// RepoRoot walks up from the working directory to the go.mod of module lemon.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(data, []byte("module lemon\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the go.mod of module lemon above the working directory")
		}
		dir = parent
	}
}
