//go:build wasip1

package config

//go:wasmimport lemon config.get
func configGet(ptr, size uint32) uint64
