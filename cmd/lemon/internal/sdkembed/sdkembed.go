// Package sdkembed carries the guest-side SDK sources inside bin/lemon:
// plugins/sdk and every lemon package it imports (all stdlib-only), as
// build.sh copies them into _sdk/tree, so `lemon plugin new` can vendor
// them into a scaffold that builds with no network and no checkout
// (docs/PLUGINS.md, "Your first plugin").
//
// A binary built without build.sh (plain `go build ./cmd/lemon`) carries
// no SDK: Files then returns ErrNotBuilt and every other command works.
package sdkembed

import (
	"embed"
	"errors"
	"io/fs"
	"strings"
)

//go:embed all:_sdk
var files embed.FS

// ErrNotBuilt means the binary was built without running build.sh.
var ErrNotBuilt = errors.New("this lemon binary carries no plugin SDK: build it with ./build.sh")

// Files returns the SDK tree (paths relative to the lemon module root,
// e.g. "plugins/sdk/sdk.go") and the Go version of the lemon module
// ("1.26.0"), for the vendored copy's go.mod.
func Files() (fs.FS, string, error) {
	v, err := fs.ReadFile(files, "_sdk/GOVERSION")
	if err != nil {
		return nil, "", ErrNotBuilt
	}
	tree, err := fs.Sub(files, "_sdk/tree")
	if err != nil {
		return nil, "", ErrNotBuilt
	}
	if _, err := fs.Stat(tree, "plugins/sdk"); err != nil {
		return nil, "", ErrNotBuilt
	}
	return tree, strings.TrimSpace(string(v)), nil
}
