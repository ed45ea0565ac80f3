//go:build wasip1

package sdk

import (
	"runtime"
	"unsafe"
)

// pinned keeps the buffer the host writes an invocation into alive until
// lemon_invoke consumes it (the host allocates one per invocation).
var pinned []byte

// invocations counts lemon_invoke calls; yieldEvery is how often the
// guest yields to its other goroutines.
var invocations uint32

const yieldEvery = 16

// lastResult keeps the previous result buffer alive until the next call.
var lastResult []byte

func ptrOf(b []byte) uint32 {
	if len(b) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(&b[0])))
}

func pack(b []byte) uint64 { return uint64(ptrOf(b))<<32 | uint64(uint32(len(b))) }

//go:wasmexport lemon_abi_version
func lemonABIVersion() int32 { return ABIVersion }

//go:wasmexport lemon_malloc
func lemonMalloc(size uint32) uint32 {
	if size == 0 {
		size = 1
	}
	pinned = make([]byte, size)
	return ptrOf(pinned)
}

//go:wasmexport lemon_describe
func lemonDescribe() uint64 {
	lastResult = describe()
	return pack(lastResult)
}

// inputBuf is where the host writes an invocation of at most
// inputBufSize bytes (lemon_input), so an invocation is one guest call,
// not two (lemon_malloc, lemon_invoke). A larger one goes through
// lemon_malloc.
var inputBuf = make([]byte, inputBufSize)

const inputBufSize = 16 << 10

//go:wasmexport lemon_input
func lemonInput() uint64 { return pack(inputBuf) }

//go:wasmexport lemon_invoke
func lemonInvoke(ptr, size uint32) uint64 {
	buf := pinned
	pinned = nil
	var in []byte
	switch {
	case ptr != 0 && ptr == ptrOf(inputBuf) && int(size) <= len(inputBuf):
		// A copy: the Request's strings and Params alias the
		// invocation's bytes and must stay valid after this call.
		in = append([]byte(nil), inputBuf[:size]...)
	case ptr != 0 && ptr == ptrOf(buf) && int(size) <= len(buf):
		in = buf[:size]
	}
	lastResult = invoke(in)
	// Let the Go scheduler run the GC's workers and finalizers; a reactor
	// otherwise never yields. A yield costs about 4.5 µs in a guest, so it
	// happens every yieldEvery invocations, not each (docs/ABI.md,
	// "Instances").
	if invocations++; invocations%yieldEvery == 0 {
		runtime.Gosched()
	}
	return pack(lastResult)
}

//go:wasmimport lemon result_read
func resultRead(ptr, size uint32) uint32

// readPending copies the host's pending result of n bytes.
func readPending(n uint32) []byte {
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	resultRead(ptrOf(b), n)
	return b
}

// callImport invokes a host-call import with JSON args.
func callImport(fn ImportFunc, args []byte) (status uint32, out []byte) {
	return callImportDiscard(fn, args, false)
}

// callImportDiscard is callImport; with discard a success's result stays
// pending unread (the host replaces it at the next call), which saves
// copying a result the caller does not use.
func callImportDiscard(fn ImportFunc, args []byte, discard bool) (status uint32, out []byte) {
	r := fn(ptrOf(args), uint32(len(args)))
	runtime.KeepAlive(args)
	status = uint32(r >> 32)
	if status == 0 && discard {
		return 0, nil
	}
	out = readPending(uint32(r))
	return status, out
}
