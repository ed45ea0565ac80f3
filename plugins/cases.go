// Package plugins holds one guest module per method family (hostinfo, fs,
// process, secrets), plugins/sdk for plugin authors, and each family's
// conformance cases, which this package embeds so `lemon plugin
// conformance` can run them against any module of a family.
package plugins

import (
	"embed"
	"io/fs"
)

//go:embed */conformance/*.json
var cases embed.FS

// Conformance returns the embedded case files of family (nil if none).
func Conformance(family string) fs.FS {
	sub, err := fs.Sub(cases, family+"/conformance")
	if err != nil {
		return nil
	}
	if entries, err := fs.ReadDir(sub, "."); err != nil || len(entries) == 0 {
		return nil
	}
	return sub
}
