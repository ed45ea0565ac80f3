package moduleset

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// Describer reads what a module declares about itself from its bytes:
// family, version and methods (the host's Inspect, which runs the
// module's lemon_describe). moduleset cannot call the host itself (the
// host imports this package), so callers pass it in.
type Describer func(wasm []byte) (family, version string, methods []Method, err error)

// WriteManifest writes dir/manifest.json for every *.wasm in dir, in file
// name order: family, version and methods from describe, sha256 and size
// from the bytes, the file's base name. The output is deterministic for
// the same module bytes (build.sh's mkset and `lemon plugin build --set`
// both write it). The manifest must pass Validate and CheckBounds; it is
// written to a temporary file and renamed, so a reader never sees half of
// it. It returns the manifest written.
func WriteManifest(dir string, describe Describer) (Manifest, error) {
	return WriteManifestChecked(dir, describe, nil)
}

// WriteManifestChecked is WriteManifest with one more check before
// anything is written: check (when not nil) gets the manifest and each
// family's module bytes, and its error refuses the set (mkset and `lemon
// plugin build --set` pass the controller's pinning check, so a set the
// controller would refuse is refused when it is built).
func WriteManifestChecked(dir string, describe Describer, check func(Manifest, map[string][]byte) error) (Manifest, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.wasm"))
	if err != nil {
		return Manifest{}, err
	}
	sort.Strings(files)
	var m Manifest
	bytesByFamily := map[string][]byte{}
	for _, f := range files {
		if filepath.Base(f)[0] == '.' {
			continue
		}
		b, err := readRegular(os.DirFS(dir), filepath.Base(f), MaxModuleBytes)
		if err != nil {
			return Manifest{}, err
		}
		if int64(len(b)) > MaxModuleBytes {
			return Manifest{}, fmt.Errorf("%s: larger than %d bytes", filepath.Base(f), MaxModuleBytes)
		}
		family, version, methods, err := describe(b)
		if err != nil {
			return Manifest{}, fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
		sum := sha256.Sum256(b)
		mod := Module{Family: family, Version: version, SHA256: hex.EncodeToString(sum[:]),
			Size: int64(len(b)), File: filepath.Base(f)}
		mod.Methods = append(mod.Methods, methods...)
		m.Modules = append(m.Modules, mod)
		bytesByFamily[mod.Family] = b
	}
	if err := m.Validate(); err != nil {
		return Manifest{}, err
	}
	if err := m.CheckBounds(); err != nil {
		return Manifest{}, err
	}
	if check != nil {
		if err := check(m, bytesByFamily); err != nil {
			return Manifest{}, err
		}
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, err
	}
	tmp := filepath.Join(dir, "."+ManifestFile+".new")
	if err := os.WriteFile(tmp, append(out, '\n'), 0o644); err != nil {
		return Manifest{}, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, ManifestFile)); err != nil {
		os.Remove(tmp)
		return Manifest{}, err
	}
	return m, nil
}
