// Package defaultset embeds the module set build.sh produced from
// plugins/, so bin/lemon carries a pinned set and `lemon dev` needs no
// files beside it.
package defaultset

import (
	"embed"
	"errors"
	"io/fs"

	"lemon/host/moduleset"
)

//go:embed all:set
var files embed.FS

// ErrNotBuilt means the binary was built without running build.sh.
var ErrNotBuilt = errors.New("the default module set is not built: run ./build.sh")

// FS returns the set's files (manifest.json and the modules).
func FS() fs.FS {
	sub, _ := fs.Sub(files, "set")
	return sub
}

// Load returns the embedded set, verified.
func Load() (moduleset.Manifest, map[string][]byte, error) {
	if _, err := fs.Stat(FS(), moduleset.ManifestFile); err != nil {
		return moduleset.Manifest{}, nil, ErrNotBuilt
	}
	return moduleset.Load(FS())
}
