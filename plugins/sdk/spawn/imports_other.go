//go:build !wasip1

package spawn

// Outside wasm the imports do not exist; sdk.Call answers UNAVAILABLE
// without calling them (plugins/sdk/abi_other.go), so these only let
// host-side tools and `go vet` build the package.

func spawnStart(ptr, size uint32) uint64 { return 0 }

func spawnWait(ptr, size uint32) uint64 { return 0 }

func spawnSignal(ptr, size uint32) uint64 { return 0 }

func spawnRelease(ptr, size uint32) uint64 { return 0 }
