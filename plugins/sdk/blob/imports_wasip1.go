//go:build wasip1

package blob

//go:wasmimport lemon blob.read
func blobRead(ptr, size uint32) uint64

//go:wasmimport lemon blob.sha256
func blobSHA256(ptr, size uint32) uint64

//go:wasmimport lemon blob.hash_update
func hashUpdate(ptr, size uint32) uint64

//go:wasmimport lemon blob.hash_sum
func hashSum(ptr, size uint32) uint64

//go:wasmimport lemon blob.free
func blobFree(ptr, size uint32) uint64
