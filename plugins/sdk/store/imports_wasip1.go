//go:build wasip1

package store

// The host-call imports of the family (module "lemon"). Go keeps in a
// module only the imports it calls, so a module imports exactly the host
// calls whose wrappers it uses.

//go:wasmimport lemon store.get
func storeGet(ptr, size uint32) uint64

//go:wasmimport lemon store.put
func storePut(ptr, size uint32) uint64

//go:wasmimport lemon store.create
func storeCreate(ptr, size uint32) uint64

//go:wasmimport lemon store.delete
func storeDelete(ptr, size uint32) uint64

//go:wasmimport lemon store.list
func storeList(ptr, size uint32) uint64

//go:wasmimport lemon store.cas
func storeCAS(ptr, size uint32) uint64

//go:wasmimport lemon store.scan
func storeScan(ptr, size uint32) uint64
