//go:build wasip1

package fs

// The host-call imports of the family (module "lemon"). Go keeps in a
// module only the imports it calls, so a module imports exactly the host
// calls whose wrappers it uses.

//go:wasmimport lemon fs.read
func fsRead(ptr, size uint32) uint64

//go:wasmimport lemon fs.send
func fsSend(ptr, size uint32) uint64

//go:wasmimport lemon fs.receive
func fsReceive(ptr, size uint32) uint64

//go:wasmimport lemon fs.open
func fsOpen(ptr, size uint32) uint64

//go:wasmimport lemon fs.stat
func fsStat(ptr, size uint32) uint64

//go:wasmimport lemon fs.close
func fsClose(ptr, size uint32) uint64

//go:wasmimport lemon fs.readdir
func fsReadDir(ptr, size uint32) uint64

//go:wasmimport lemon fs.statat
func fsStatAt(ptr, size uint32) uint64

//go:wasmimport lemon fs.pread
func fsPRead(ptr, size uint32) uint64

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
