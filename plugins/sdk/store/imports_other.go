//go:build !wasip1

package store

// Outside wasm the imports do not exist; sdk.Call answers UNAVAILABLE
// without calling them (plugins/sdk/abi_other.go), so these only let
// host-side tools and `go vet` build the package.

func storeGet(ptr, size uint32) uint64 { return 0 }

func storePut(ptr, size uint32) uint64 { return 0 }

func storeCreate(ptr, size uint32) uint64 { return 0 }

func storeDelete(ptr, size uint32) uint64 { return 0 }

func storeList(ptr, size uint32) uint64 { return 0 }

func storeCAS(ptr, size uint32) uint64 { return 0 }

func storeScan(ptr, size uint32) uint64 { return 0 }
