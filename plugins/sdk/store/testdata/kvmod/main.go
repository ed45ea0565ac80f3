//go:build wasip1

// Command kvmod is a test module built only from the SDK and its store
// wrapper: node.kv.put/create/get/delete/cas/list/scan over the calling
// module's store namespace, the volatile one when params say
// "volatile":true (the family of issue 10's trial).
package main

import (
	"encoding/json"

	"lemon/plugins/sdk"
	"lemon/plugins/sdk/store"
	"lemon/protocol"
)

type params struct {
	Key, Prefix, After string
	Limit              int
	Value              json.RawMessage
	Expected           uint64
	Delete             bool
	Volatile           bool
	ExpiresAtMs        int64
}

func (p params) ns() store.Namespace {
	if p.Volatile {
		return store.Volatile
	}
	return store.Durable
}

func handler(fn func(p params) (any, error)) sdk.Handler {
	return func(req *sdk.Request) (*sdk.Result, error) {
		var p params
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, err
		}
		out, err := fn(p)
		if err != nil {
			return nil, err
		}
		return &sdk.Result{Payload: out}, nil
	}
}

func revision(r uint64, err error) (any, error) {
	return map[string]uint64{"revision": r}, err
}

func opts(p params) []store.Option {
	if p.ExpiresAtMs != 0 {
		return []store.Option{store.ExpiresAt(p.ExpiresAtMs)}
	}
	return nil
}

func init() {
	sdk.Serve(sdk.Manifest{
		Family: "kv", Version: "0.0.1", Capabilities: []string{"read", "write"},
		HostCalls: store.HostCalls,
		Methods: []sdk.MethodSpec{
			{Name: "node.kv.get", Version: 1, Capability: "read"},
			{Name: "node.kv.put", Version: 1, Capability: "write"},
			{Name: "node.kv.create", Version: 1, Capability: "write"},
			{Name: "node.kv.delete", Version: 1, Capability: "write"},
			{Name: "node.kv.cas", Version: 1, Capability: "write"},
			{Name: "node.kv.list", Version: 1, Capability: "read"},
			{Name: "node.kv.scan", Version: 1, Capability: "read"},
			// putdefault uses the package-level (durable) functions.
			{Name: "node.kv.putdefault", Version: 1, Capability: "write"},
			// token is read-class (a delete preview's shape): it keeps a
			// volatile token and a durable receipt, makes no effect host
			// call, and fails after its writes when asked to.
			{Name: "node.kv.token", Version: 1, Capability: "read", Scope: protocol.ScopeRead, Retry: protocol.RetryRead},
		},
	}, map[string]sdk.Handler{
		"node.kv.get":    handler(func(p params) (any, error) { return p.ns().Get(p.Key) }),
		"node.kv.put":    handler(func(p params) (any, error) { return revision(p.ns().Put(p.Key, p.Value, opts(p)...)) }),
		"node.kv.create": handler(func(p params) (any, error) { return revision(p.ns().Create(p.Key, p.Value, opts(p)...)) }),
		"node.kv.delete": handler(func(p params) (any, error) { return p.ns().Delete(p.Key) }),
		"node.kv.cas": handler(func(p params) (any, error) {
			if p.Delete {
				return p.ns().CASDelete(p.Key, p.Expected)
			}
			return p.ns().CAS(p.Key, p.Expected, p.Value, opts(p)...)
		}),
		"node.kv.list": handler(func(p params) (any, error) { return p.ns().List(p.Prefix, p.After, p.Limit) }),
		"node.kv.scan": handler(func(p params) (any, error) { return p.ns().Scan(p.Prefix, p.After, p.Limit) }),
		"node.kv.token": handler(func(p params) (any, error) {
			tok, err := store.Volatile.Put("token/"+p.Key, json.RawMessage(`"t"`))
			if err != nil {
				return nil, err
			}
			rec, err := store.CAS("receipt/"+p.Key, 0, json.RawMessage(`{"state":"done"}`))
			if err != nil {
				return nil, err
			}
			if _, err := store.Durable.Delete("old/" + p.Key); err != nil {
				return nil, err
			}
			if p.Delete {
				return nil, protocol.Errorf(protocol.CodeInternal, "failing after the bookkeeping writes")
			}
			return map[string]any{"token": tok, "receipt": rec}, nil
		}),
		"node.kv.putdefault": handler(func(p params) (any, error) {
			if _, err := store.Put(p.Key, p.Value); err != nil {
				return nil, err
			}
			return store.Get(p.Key)
		}),
	})
}

func main() {}
