//go:build wasip1

package main

// rawLogWrite is log.write without the SDK's truncation, to test the
// host's own bound.
//
//go:wasmimport lemon log.write
func rawLogWrite(ptr, size uint32) uint64
