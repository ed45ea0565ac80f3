//go:build !wasip1

package fs

// Stand-ins outside wasm (see imports_other.go).

func fsOpen(ptr, size uint32) uint64 { return 0 }

func fsClose(ptr, size uint32) uint64 { return 0 }

func fsReadDir(ptr, size uint32) uint64 { return 0 }

func fsStatAt(ptr, size uint32) uint64 { return 0 }

func fsPRead(ptr, size uint32) uint64 { return 0 }
