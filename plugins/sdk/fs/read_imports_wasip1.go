//go:build wasip1

package fs

// The imports of the read primitives (read.go).

//go:wasmimport lemon fs.open
func fsOpen(ptr, size uint32) uint64

//go:wasmimport lemon fs.close
func fsClose(ptr, size uint32) uint64

//go:wasmimport lemon fs.readdir
func fsReadDir(ptr, size uint32) uint64

//go:wasmimport lemon fs.statat
func fsStatAt(ptr, size uint32) uint64

//go:wasmimport lemon fs.pread
func fsPRead(ptr, size uint32) uint64
