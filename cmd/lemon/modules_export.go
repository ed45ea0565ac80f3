package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"

	"lemon/host/moduleset"
	"lemon/host/moduleset/defaultset"
)

// `lemon modules export DIR`, a subcommand of `lemon modules` (modules.go).
func init() {
	modulesSubcommands["export"] = modulesSubcommand{
		usage: "lemon modules export DIR [--force]   write the module set built into this binary to DIR",
		run: func(_ context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) int {
			return modulesExport(args, stdout, stderr)
		},
	}
	setUsage("modules", modulesUsageText())
	setUsage("modules export", modulesExportUsage)
}

const modulesExportUsage = `usage: lemon modules export DIR [--force]

Writes the module set built into this binary (one .wasm per family and
manifest.json, byte for byte as pinned) into DIR, creating it. Add or
replace a module with 'lemon plugin build PLUGIN_DIR --set DIR', then pin
the set with 'lemon dev --module-set DIR' or 'lemon controller --module-set
DIR'. A DIR that already holds a manifest.json is refused unless --force
(which overwrites the set's files and leaves other files alone).
`

func modulesExport(args []string, stdout, stderr io.Writer) int {
	fl := newFlags("lemon modules export", stderr)
	force := fl.Bool("force", false, "overwrite an existing set in DIR")
	pos, err := parseInterleaved(fl, args)
	if err != nil {
		return flagExit(err, modulesExportUsage, stdout, stderr)
	}
	if len(pos) != 1 {
		fmt.Fprint(stderr, modulesExportUsage)
		return 2
	}
	m, err := exportSet(defaultset.FS(), pos[0], *force)
	if err != nil {
		fmt.Fprintln(stderr, "lemon modules export:", err)
		return 1
	}
	for _, mod := range m.Modules {
		fmt.Fprintf(stdout, "%-10s %-8s %s  %s\n", mod.Family, mod.Version, mod.SHA256, mod.File)
	}
	fmt.Fprintf(stdout, "set %s (%d modules) written to %s\n", m.Digest(), len(m.Modules), pos[0])
	return 0
}

// exportSet verifies the set in fsys and copies its manifest and modules
// into dir byte for byte.
func exportSet(fsys iofs.FS, dir string, force bool) (moduleset.Manifest, error) {
	if _, err := iofs.Stat(fsys, moduleset.ManifestFile); err != nil {
		return moduleset.Manifest{}, defaultset.ErrNotBuilt
	}
	m, mods, err := moduleset.Load(fsys)
	if err != nil {
		return moduleset.Manifest{}, err
	}
	manifest, err := iofs.ReadFile(fsys, moduleset.ManifestFile)
	if err != nil {
		return moduleset.Manifest{}, err
	}
	if _, err := os.Stat(filepath.Join(dir, moduleset.ManifestFile)); err == nil && !force {
		return moduleset.Manifest{}, fmt.Errorf("%s already holds a module set; pass --force to overwrite it", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return moduleset.Manifest{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return moduleset.Manifest{}, err
	}
	for _, mod := range m.Modules {
		if err := writeFileAtomic(filepath.Join(dir, mod.File), mods[mod.Family]); err != nil {
			return moduleset.Manifest{}, err
		}
	}
	// The manifest last: a reader never sees it name a module not yet written.
	if err := writeFileAtomic(filepath.Join(dir, moduleset.ManifestFile), manifest); err != nil {
		return moduleset.Manifest{}, err
	}
	return m, nil
}
