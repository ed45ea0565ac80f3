package main

import (
	"fmt"
	"io"
	"runtime"
)

// goos is runtime.GOOS; tests change it.
var goos = runtime.GOOS

// nodeUnsupported reports whether this OS cannot run a node, and then says
// so on stderr. The node's fs and spawn families are Linux-only
// (openat2-style confinement, cgroups, pidfds; docs/DEPLOY.md,
// "Platforms"); the operator commands build and run everywhere.
func nodeUnsupported(cmd string, stderr io.Writer) bool {
	if goos == "linux" {
		return false
	}
	fmt.Fprintf(stderr, "%s: the node runs on Linux only (this binary is for %s/%s); "+
		"the operator commands (call, fs, nodes, run, controller) work here\n", cmd, goos, runtime.GOARCH)
	return true
}
