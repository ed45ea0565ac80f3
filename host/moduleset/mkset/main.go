// Command mkset writes manifest.json for a directory of modules: for each
// *.wasm it records family, version and methods (from the module's own
// lemon_describe), sha256 and size (moduleset.WriteManifest). build.sh
// runs it; the output is deterministic for the same module bytes.
package main

import (
	"fmt"
	"os"

	"lemon/controller"
	"lemon/host"
	"lemon/host/moduleset"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mkset DIR")
		os.Exit(2)
	}
	// Refuse at build time a set the controller would refuse to pin (bad
	// declarations, clashing or out-of-namespace methods).
	check := func(m moduleset.Manifest, bytesByFamily map[string][]byte) error {
		_, err := controller.NewModuleSet(m, bytesByFamily)
		return err
	}
	if _, err := moduleset.WriteManifestChecked(os.Args[1], host.DescribeModule, check); err != nil {
		fmt.Fprintln(os.Stderr, "mkset:", err)
		os.Exit(1)
	}
}
