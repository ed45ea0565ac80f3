//go:build wasip1

package fs

// The host-call imports of the family (module "lemon"). Go keeps in a
// module only the imports it calls, so a module imports exactly the host
// calls whose wrappers it uses.

//go:wasmimport lemon fs.list
func fsList(ptr, size uint32) uint64

//go:wasmimport lemon fs.list_payload
func fsListPayload(ptr, size uint32) uint64

//go:wasmimport lemon fs.stat
func fsStat(ptr, size uint32) uint64

//go:wasmimport lemon fs.stat_payload
func fsStatPayload(ptr, size uint32) uint64

//go:wasmimport lemon fs.read
func fsRead(ptr, size uint32) uint64

//go:wasmimport lemon fs.send
func fsSend(ptr, size uint32) uint64

//go:wasmimport lemon fs.receive
func fsReceive(ptr, size uint32) uint64

//go:wasmimport lemon fs.write_at
func fsWriteAt(ptr, size uint32) uint64

//go:wasmimport lemon fs.mkdirs
func fsMkdirs(ptr, size uint32) uint64

//go:wasmimport lemon fs.rename
func fsRename(ptr, size uint32) uint64

//go:wasmimport lemon fs.walk
func fsWalk(ptr, size uint32) uint64

//go:wasmimport lemon fs.remove
func fsRemove(ptr, size uint32) uint64
