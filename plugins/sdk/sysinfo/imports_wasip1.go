//go:build wasip1

package sysinfo

// The host-call imports of the family (module "lemon"). Go keeps in a
// module only the imports it calls, so a module imports exactly the host
// calls whose wrappers it uses.

//go:wasmimport lemon sysinfo.snapshot
func sysinfoSnapshot(ptr, size uint32) uint64
