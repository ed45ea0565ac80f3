// Package moduleset reads and verifies a version-pinned module set
// (docs/PROTOCOL.md, "Module set"): a manifest of {family, version, sha256, size, methods}
// plus the module bytes, as build.sh writes it into a directory.
package moduleset

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"lemon/host/abi"
	"os"
	"path"
	"sort"
)

// ManifestFile is the manifest's file name inside a set directory.
const ManifestFile = "manifest.json"

// Bounds on one module set (docs/PROTOCOL.md, "Module set"). The
// controller refuses to pin a set beyond them and a node refuses to fetch
// one, so neither side can be made to hold more.
const (
	// MaxModuleBytes bounds one module file (64 MiB).
	MaxModuleBytes = 64 << 20
	// MaxSetModules is the most modules one manifest may list.
	MaxSetModules = 64
	// MaxSetBytes bounds the sum of a set's module sizes (256 MiB).
	MaxSetBytes = 256 << 20
)

// ErrSetBounds is wrapped by CheckBounds errors.
var ErrSetBounds = errors.New("set is beyond the bounds a node accepts")

// Method is one method a module serves, as its manifest declares it
// (name, version, capability, scope, retry class, params schema, blobs,
// deadline): the pinned set carries every declaration to the controller.
type Method = abi.MethodSpec

// Module is one pinned module: File is its name inside the set directory,
// SHA256 the lowercase hex digest of its bytes, Size in bytes.
type Module struct {
	Family  string   `json:"family"`
	Version string   `json:"version"`
	SHA256  string   `json:"sha256"`
	Size    int64    `json:"size"`
	File    string   `json:"file"`
	Methods []Method `json:"methods"`
}

// Manifest pins every module of a set.
type Manifest struct {
	Modules []Module `json:"modules"`
}

// ErrDigestMismatch means module bytes do not match the pinned digest.
var ErrDigestMismatch = errors.New("module bytes do not match the pinned sha256")

// Digest identifies the whole set: sha256 over the sorted "family version
// sha256" lines. Nodes advertise it; the controller compares it.
func (m Manifest) Digest() string {
	lines := make([]string, len(m.Modules))
	for i, mod := range m.Modules {
		lines[i] = mod.Family + " " + mod.Version + " " + mod.SHA256 + "\n"
	}
	sort.Strings(lines)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Find returns the module of a family.
func (m Manifest) Find(family string) (Module, bool) {
	for _, mod := range m.Modules {
		if mod.Family == family {
			return mod, true
		}
	}
	return Module{}, false
}

// Validate checks the manifest's shape: unique families, hex digests,
// plain file names, positive sizes.
func (m Manifest) Validate() error {
	seen := map[string]bool{}
	for _, mod := range m.Modules {
		if mod.Family == "" || seen[mod.Family] {
			return fmt.Errorf("manifest: family %q empty or repeated", mod.Family)
		}
		seen[mod.Family] = true
		if b, err := hex.DecodeString(mod.SHA256); err != nil || len(b) != sha256.Size {
			return fmt.Errorf("manifest: family %q: sha256 is not 64 hex digits", mod.Family)
		}
		if mod.File == "" || path.Base(mod.File) != mod.File || mod.File[0] == '.' {
			return fmt.Errorf("manifest: family %q: file must be a plain name", mod.Family)
		}
		if mod.Size <= 0 || mod.Size > MaxModuleBytes {
			return fmt.Errorf("manifest: family %q: size out of range", mod.Family)
		}
	}
	return nil
}

// CheckBounds refuses a manifest listing more than MaxSetModules modules,
// a module whose size is outside 1..MaxModuleBytes bytes, or sizes adding
// up to more than MaxSetBytes. Its errors wrap ErrSetBounds and name no
// manifest content, so they are safe to log.
func (m Manifest) CheckBounds() error {
	if len(m.Modules) > MaxSetModules {
		return fmt.Errorf("%w: more than 64 modules", ErrSetBounds)
	}
	var total int64
	for _, mod := range m.Modules {
		if mod.Size <= 0 || mod.Size > MaxModuleBytes {
			return fmt.Errorf("%w: a module's size is outside 1 byte to 64 MiB", ErrSetBounds)
		}
		total += mod.Size
	}
	if total > MaxSetBytes {
		return fmt.Errorf("%w: modules add up to more than 256 MiB", ErrSetBounds)
	}
	return nil
}

// Verify checks bytes against the module's size and digest.
func (mod Module) Verify(b []byte) error {
	sum := sha256.Sum256(b)
	if int64(len(b)) != mod.Size || hex.EncodeToString(sum[:]) != mod.SHA256 {
		return fmt.Errorf("module %s %s: %w", mod.Family, mod.Version, ErrDigestMismatch)
	}
	return nil
}

// ParseManifest decodes and validates manifest JSON.
func ParseManifest(data []byte) (Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return Manifest{}, fmt.Errorf("manifest: %w", err)
	}
	return m, m.Validate()
}

// Load reads a set from fsys (a directory, or the embedded default) and
// verifies every module's bytes against the manifest. A manifest beyond
// CheckBounds is refused before any module file is read.
func Load(fsys fs.FS) (Manifest, map[string][]byte, error) {
	data, err := readRegular(fsys, ManifestFile, MaxManifestBytes)
	if err != nil {
		return Manifest{}, nil, fmt.Errorf("module set: %w", err)
	}
	m, err := ParseManifest(data)
	if err != nil {
		return Manifest{}, nil, err
	}
	if err := m.CheckBounds(); err != nil {
		return Manifest{}, nil, err
	}
	bytesByFamily := map[string][]byte{}
	for _, mod := range m.Modules {
		b, err := readRegular(fsys, mod.File, mod.Size)
		if err != nil {
			return Manifest{}, nil, fmt.Errorf("module set: %s: %w", mod.Family, err)
		}
		if err := mod.Verify(b); err != nil {
			return Manifest{}, nil, err
		}
		bytesByFamily[mod.Family] = b
	}
	return m, bytesByFamily, nil
}

// MaxManifestBytes bounds a set's manifest.json.
const MaxManifestBytes = 16 << 20

// ErrNotRegular means a set file is not a regular file (a device, a FIFO,
// a directory), which a set never holds: reading one could block or never
// end.
var ErrNotRegular = errors.New("not a regular file")

// readRegular reads name from fsys if it is a regular file of at most
// max bytes; one byte more is read, so a larger file is refused (or, for
// a module, fails its digest check) without reading it all.
func readRegular(fsys fs.FS, name string, max int64) ([]byte, error) {
	fi, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", name, ErrNotRegular)
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max && name == ManifestFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, max)
	}
	return b, nil
}

// LoadDir is Load over a directory.
func LoadDir(dir string) (Manifest, map[string][]byte, error) {
	return Load(os.DirFS(dir))
}
