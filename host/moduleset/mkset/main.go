// Command mkset writes manifest.json for a directory of modules: for each
// *.wasm it records family, version and methods (from the module's own
// lemon_describe), sha256 and size. build.sh runs it; the output is
// deterministic for the same module bytes.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"lemon/controller"
	"lemon/host"
	"lemon/host/moduleset"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mkset DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "mkset:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.wasm"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	var m moduleset.Manifest
	bytesByFamily := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		man, err := host.Inspect(context.Background(), b)
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
		sum := sha256.Sum256(b)
		mod := moduleset.Module{Family: man.Family, Version: man.Version, SHA256: hex.EncodeToString(sum[:]),
			Size: int64(len(b)), File: filepath.Base(f)}
		mod.Methods = append(mod.Methods, man.Methods...)
		m.Modules = append(m.Modules, mod)
		bytesByFamily[mod.Family] = b
	}
	if err := m.Validate(); err != nil {
		return err
	}
	// Refuse at build time a set the controller would refuse to pin (bad
	// declarations, clashing or out-of-namespace methods).
	if _, err := controller.NewModuleSet(m, bytesByFamily); err != nil {
		return err
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, moduleset.ManifestFile), append(out, '\n'), 0o644)
}
