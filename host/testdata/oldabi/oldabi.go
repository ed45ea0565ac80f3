//go:build wasip1

// Package oldabi is a module built for an older ABI version (docs/ABI.md,
// "Versions"): its lemon_abi_version answers Version and its manifest
// says "abi":Version. The host must refuse it at load, naming the
// version. abi1mod and abi2mod set Version from their init.
package oldabi

import (
	"strconv"
	"unsafe"
)

// Version is the ABI this module claims.
var Version int32

var buf, out []byte

func pack(b []byte) uint64 {
	return uint64(uintptr(unsafe.Pointer(&b[0])))<<32 | uint64(len(b))
}

//go:wasmexport lemon_abi_version
func abiVersion() int32 { return Version }

//go:wasmexport lemon_malloc
func malloc(size uint32) uint32 {
	buf = make([]byte, size+1)
	return uint32(uintptr(unsafe.Pointer(&buf[0])))
}

//go:wasmexport lemon_describe
func describe() uint64 {
	out = []byte(`{"abi":` + strconv.Itoa(int(Version)) + `,"family":"old","version":"0.0.1","capabilities":["hostinfo"],"hostcalls":[],` +
		`"methods":[{"name":"old.ping","version":1,"capability":"hostinfo"}]}`)
	return pack(out)
}

//go:wasmexport lemon_invoke
func invoke(ptr, size uint32) uint64 { return pack([]byte(`{"ok":true,"payload":{}}`)) }
