//go:build wasip1

// Command abi2mod is a module built for ABI version 2 (docs/ABI.md,
// "Versions"): its lemon_abi_version answers 2 and its manifest says
// "abi":2 (JSON host-call results). The host must refuse it at load, naming the version.
package main

import "unsafe"

var out = []byte(`{"abi":2,"family":"old","version":"0.0.1","capabilities":["hostinfo"],"hostcalls":[],` +
	`"methods":[{"name":"old.ping","version":1,"capability":"hostinfo"}]}`)

var buf []byte

func pack(b []byte) uint64 {
	return uint64(uintptr(unsafe.Pointer(&b[0])))<<32 | uint64(len(b))
}

//go:wasmexport lemon_abi_version
func abiVersion() int32 { return 2 }

//go:wasmexport lemon_malloc
func malloc(size uint32) uint32 {
	buf = make([]byte, size+1)
	return uint32(uintptr(unsafe.Pointer(&buf[0])))
}

//go:wasmexport lemon_describe
func describe() uint64 { return pack(out) }

//go:wasmexport lemon_invoke
func invoke(ptr, size uint32) uint64 { return pack([]byte(`{"ok":true,"payload":{}}`)) }

func main() {}
