//go:build !wasip1

package fs

// Outside wasm the imports do not exist; sdk.Call answers UNAVAILABLE
// without calling them (plugins/sdk/abi_other.go), so these only let
// host-side tools and `go vet` build the package.

func fsRead(ptr, size uint32) uint64 { return 0 }

func fsSend(ptr, size uint32) uint64 { return 0 }

func fsReceive(ptr, size uint32) uint64 { return 0 }

func fsOpen(ptr, size uint32) uint64 { return 0 }

func fsStat(ptr, size uint32) uint64 { return 0 }

func fsClose(ptr, size uint32) uint64 { return 0 }

func fsReadDir(ptr, size uint32) uint64 { return 0 }

func fsStatAt(ptr, size uint32) uint64 { return 0 }

func fsPRead(ptr, size uint32) uint64 { return 0 }

func fsWriteAt(ptr, size uint32) uint64 { return 0 }

func fsMkdirs(ptr, size uint32) uint64 { return 0 }

func fsRename(ptr, size uint32) uint64 { return 0 }

func fsWalk(ptr, size uint32) uint64 { return 0 }

func fsRemove(ptr, size uint32) uint64 { return 0 }
