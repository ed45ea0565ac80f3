//go:build wasip1

// Command storekv is the kv family of the reported case, for the host's
// tests: node.kv.get and node.kv.put declare the module's own capability
// "kv" and use the store host calls, which need no capability (the
// module's own namespace is its bookkeeping, docs/POLICY.md).
package main

import (
	"encoding/json"

	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
	"lemon/protocol"
)

//go:wasmimport lemon store.get
func storeGet(ptr, size uint32) uint64

//go:wasmimport lemon store.put
func storePut(ptr, size uint32) uint64

func init() {
	sdk.Serve(sdk.Manifest{
		Family: "kv", Version: "0.0.1",
		Capabilities: []string{"kv", "read", "write"},
		HostCalls:    []string{"store.get", "store.put"},
		Methods: []sdk.MethodSpec{
			{Name: "node.kv.get", Version: 1, Capability: "kv", Uses: []string{"read"}},
			{Name: "node.kv.put", Version: 1, Capability: "kv", Uses: []string{"write"}},
		},
	}, map[string]sdk.Handler{"node.kv.get": get, "node.kv.put": put})
}

type params struct {
	NodeID string          `json:"nodeId"`
	Key    string          `json:"key"`
	Value  json.RawMessage `json:"value,omitempty"`
}

func decode(req *sdk.Request) (params, error) {
	var p params
	if err := json.Unmarshal(req.Params, &p); err != nil || p.Key == "" {
		return p, protocol.InvalidParams("key", "key is required")
	}
	return p, nil
}

func get(req *sdk.Request) (*sdk.Result, error) {
	p, err := decode(req)
	if err != nil {
		return nil, err
	}
	var out contract.StoreGetResult
	if err := sdk.Call(storeGet, map[string]string{"key": p.Key}, &out); err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: out}, nil
}

func put(req *sdk.Request) (*sdk.Result, error) {
	p, err := decode(req)
	if err != nil {
		return nil, err
	}
	if err := sdk.Call(storePut, map[string]any{"key": p.Key, "value": p.Value}, nil); err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: map[string]bool{"stored": true}}, nil
}

func main() {}
