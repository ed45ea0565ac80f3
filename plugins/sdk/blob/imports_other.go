//go:build !wasip1

package blob

// Outside wasm these are never called: sdk.Call answers UNAVAILABLE.
func blobRead(ptr, size uint32) uint64   { return 0 }
func blobSHA256(ptr, size uint32) uint64 { return 0 }
func hashUpdate(ptr, size uint32) uint64 { return 0 }
func hashSum(ptr, size uint32) uint64    { return 0 }
func blobFree(ptr, size uint32) uint64   { return 0 }
