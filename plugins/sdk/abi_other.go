//go:build !wasip1

package sdk

// callImport outside wasm: host calls exist only inside the host, so a
// module compiled natively (for docs or unit tests of pure logic) gets an
// UNAVAILABLE error from every host call.
func callImport(fn ImportFunc, args []byte) (uint32, []byte) {
	return callImportDiscard(fn, args, false)
}

func callImportDiscard(fn ImportFunc, args []byte, _ bool) (uint32, []byte) {
	return 1, []byte(`{"code":"UNAVAILABLE","message":"host calls are only available inside the wasm host"}`)
}
