//go:build wasip1

package spawn

// The host-call imports of the family (module "lemon"). Go keeps in a
// module only the imports it calls, so a module imports exactly the host
// calls whose wrappers it uses.

//go:wasmimport lemon spawn.start
func spawnStart(ptr, size uint32) uint64

//go:wasmimport lemon spawn.wait
func spawnWait(ptr, size uint32) uint64

//go:wasmimport lemon spawn.signal
func spawnSignal(ptr, size uint32) uint64

//go:wasmimport lemon spawn.release
func spawnRelease(ptr, size uint32) uint64
