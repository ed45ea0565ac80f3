//go:build wasip1

// Command kvmod is a test module built only from the SDK and its store
// wrapper: node.kv.put/create/get/delete/list over the calling module's
// store namespace (the family of issue 10's trial).
package main

import (
	"encoding/json"

	"lemon/plugins/sdk"
	"lemon/plugins/sdk/store"
)

func init() {
	sdk.Serve(sdk.Manifest{
		Family: "kv", Version: "0.0.1", Capabilities: []string{"read", "write"},
		HostCalls: []string{"store.get", "store.put", "store.create", "store.delete", "store.list"},
		Methods: []sdk.MethodSpec{
			{Name: "node.kv.get", Version: 1, Capability: "read"},
			{Name: "node.kv.put", Version: 1, Capability: "write"},
			{Name: "node.kv.create", Version: 1, Capability: "write"},
			{Name: "node.kv.delete", Version: 1, Capability: "write"},
			{Name: "node.kv.list", Version: 1, Capability: "read"},
		},
	}, map[string]sdk.Handler{
		"node.kv.get": func(req *sdk.Request) (*sdk.Result, error) {
			var p struct{ Key string }
			if err := json.Unmarshal(req.Params, &p); err != nil {
				return nil, err
			}
			r, err := store.Get(p.Key)
			if err != nil {
				return nil, err
			}
			return &sdk.Result{Payload: r}, nil
		},
		"node.kv.put":    put(store.Put),
		"node.kv.create": put(store.Create),
		"node.kv.delete": func(req *sdk.Request) (*sdk.Result, error) {
			var p struct{ Key string }
			if err := json.Unmarshal(req.Params, &p); err != nil {
				return nil, err
			}
			r, err := store.Delete(p.Key)
			if err != nil {
				return nil, err
			}
			return &sdk.Result{Payload: r}, nil
		},
		"node.kv.list": func(req *sdk.Request) (*sdk.Result, error) {
			var p struct {
				Prefix, After string
				Limit         int
			}
			if err := json.Unmarshal(req.Params, &p); err != nil {
				return nil, err
			}
			r, err := store.List(p.Prefix, p.After, p.Limit)
			if err != nil {
				return nil, err
			}
			return &sdk.Result{Payload: r}, nil
		},
	})
}

func put(fn func(string, json.RawMessage) error) sdk.Handler {
	return func(req *sdk.Request) (*sdk.Result, error) {
		var p struct {
			Key   string
			Value json.RawMessage
		}
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, err
		}
		if err := fn(p.Key, p.Value); err != nil {
			return nil, err
		}
		return &sdk.Result{Payload: map[string]bool{"ok": true}}, nil
	}
}

func main() {}
