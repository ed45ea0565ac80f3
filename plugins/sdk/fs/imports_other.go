//go:build !wasip1

package fs

// Outside wasm the imports do not exist; sdk.Call answers UNAVAILABLE
// without calling them (plugins/sdk/abi_other.go), so these only let
// host-side tools and `go vet` build the package.

func fsRead(ptr, size uint32) uint64 { return 0 }

func fsWrite(ptr, size uint32) uint64 { return 0 }

func fsMkdir(ptr, size uint32) uint64 { return 0 }

func fsMove(ptr, size uint32) uint64 { return 0 }

func fsDeletePreview(ptr, size uint32) uint64 { return 0 }

func fsDeletePreviewPayload(ptr, size uint32) uint64 { return 0 }

func fsDelete(ptr, size uint32) uint64 { return 0 }

func fsSend(ptr, size uint32) uint64 { return 0 }

func fsReceive(ptr, size uint32) uint64 { return 0 }

func fsOpen(ptr, size uint32) uint64 { return 0 }

func fsClose(ptr, size uint32) uint64 { return 0 }

func fsReadDir(ptr, size uint32) uint64 { return 0 }

func fsStatAt(ptr, size uint32) uint64 { return 0 }

func fsPRead(ptr, size uint32) uint64 { return 0 }
