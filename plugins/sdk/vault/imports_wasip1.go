//go:build wasip1

package vault

// The host-call imports of the family (module "lemon"). Go keeps in a
// module only the imports it calls, so a module imports exactly the host
// calls whose wrappers it uses.

//go:wasmimport lemon vault.set
func vaultSet(ptr, size uint32) uint64

//go:wasmimport lemon vault.list
func vaultList(ptr, size uint32) uint64

//go:wasmimport lemon vault.delete
func vaultDelete(ptr, size uint32) uint64

//go:wasmimport lemon vault.receipt
func vaultReceipt(ptr, size uint32) uint64
