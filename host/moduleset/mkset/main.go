// Command mkset writes manifest.json for a directory of modules: for each
// *.wasm it records family, version and methods (from the module's own
// lemon_describe), sha256 and size (moduleset.WriteManifest). build.sh
// runs it; the output is deterministic for the same module bytes.
package main

import (
	"fmt"
	"os"

	"lemon/host"
	"lemon/host/moduleset"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mkset DIR")
		os.Exit(2)
	}
	if _, err := moduleset.WriteManifest(os.Args[1], host.DescribeModule); err != nil {
		fmt.Fprintln(os.Stderr, "mkset:", err)
		os.Exit(1)
	}
}
