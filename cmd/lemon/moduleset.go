package main

import (
	"fmt"
	"os"
	"path/filepath"

	"lemon/controller"

	"lemon/host/moduleset"
	"lemon/host/moduleset/defaultset"
)

// loadModuleSet reads and verifies the module set that `lemon controller`
// and `lemon dev` pin: the directory dir (manifest.json plus modules, as
// `lemon modules export` and `lemon plugin build --set` write it), or the
// set built into this binary when dir is "". The controller's policy
// module_set goes through the same moduleset.LoadDir.
func loadModuleSet(dir string) (moduleset.Manifest, map[string][]byte, error) {
	if dir == "" {
		return defaultset.Load()
	}
	// The same strict checks as a SIGHUP re-pin (controller.LoadModuleSet):
	// a set pins at start exactly when it would re-pin.
	raw, err := os.ReadFile(filepath.Join(dir, moduleset.ManifestFile))
	if err != nil {
		return moduleset.Manifest{}, nil, fmt.Errorf("--module-set %s: %w", dir, err)
	}
	if err := controller.CheckManifestDeclarations(raw); err != nil {
		return moduleset.Manifest{}, nil, fmt.Errorf("--module-set %s: %w", dir, err)
	}
	m, mods, err := moduleset.LoadDir(dir)
	if err != nil {
		return moduleset.Manifest{}, nil, fmt.Errorf("--module-set %s: %w", dir, err)
	}
	return m, mods, nil
}
