//go:build wasip1

package log

//go:wasmimport lemon log.write
func logWrite(ptr, size uint32) uint64
