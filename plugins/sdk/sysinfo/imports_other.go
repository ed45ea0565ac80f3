//go:build !wasip1

package sysinfo

// Outside wasm the imports do not exist; sdk.Call answers UNAVAILABLE
// without calling them (plugins/sdk/abi_other.go), so these only let
// host-side tools and `go vet` build the package.

func sysinfoSnapshot(ptr, size uint32) uint64 { return 0 }
