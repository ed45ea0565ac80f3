//go:build wasip1

// Command kvmod is a module for the host's capability tests: it declares
// a capability of its own ("kv") for its methods, and the built-in ones
// its host calls need (hostinfo for test.ping, write for test.write).
package main

import (
	"encoding/json"

	"lemon/plugins/sdk"
)

//go:wasmimport lemon test.ping
func testPing(ptr, size uint32) uint64

//go:wasmimport lemon test.write
func testWrite(ptr, size uint32) uint64

func init() {
	sdk.Serve(sdk.Manifest{
		Family: "kv", Version: "0.0.1",
		Capabilities: []string{"kv", "hostinfo", "write"},
		HostCalls:    []string{"test.ping", "test.write"},
		Methods: []sdk.MethodSpec{
			{Name: "node.kv.get", Version: 1, Capability: "kv", Uses: []string{"hostinfo"}},
			{Name: "node.kv.put", Version: 1, Capability: "kv", Uses: []string{"write"}},
			{Name: "node.kv.stat", Version: 1, Capability: "hostinfo"},
		},
	}, map[string]sdk.Handler{
		"node.kv.get":  get,
		"node.kv.put":  put,
		"node.kv.stat": get,
	})
}

func get(req *sdk.Request) (*sdk.Result, error) {
	var out json.RawMessage
	if err := sdk.CallJSON(testPing, map[string]string{"method": req.Method}, &out); err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: out}, nil
}

func put(req *sdk.Request) (*sdk.Result, error) {
	if err := sdk.CallJSON(testWrite, nil, nil); err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: map[string]bool{"stored": true}}, nil
}

func main() {}
