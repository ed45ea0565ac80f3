//go:build wasip1

// Command kvmod is a team's own family for the worker's tests: node.kv.*
// methods declared only in this module's manifest, served by a node and
// routed by a controller that knows nothing else of them. It makes no
// host calls; it needs the hostinfo capability only because every
// method must name one its module declares.
package main

import (
	"encoding/json"

	"lemon/plugins/sdk"
	"lemon/protocol"
)

var manifest = sdk.Manifest{
	Family: "kv", Version: "0.1.0",
	Capabilities: []string{"hostinfo"},
	Methods: []sdk.MethodSpec{
		{Name: "node.kv.get", Version: 1, Capability: "hostinfo", Scope: protocol.ScopeRead, Retry: protocol.RetryRead,
			DeadlineMs: 5000, Params: sdk.Params(map[string]*sdk.Schema{"key": sdk.String(1, 16)}, "key")},
		{Name: "node.kv.wipe", Version: 1, Capability: "hostinfo", Scope: protocol.ScopeAdmin, Retry: protocol.RetryMutation,
			Params: sdk.Params(nil)},
	},
}

func init() {
	sdk.Serve(manifest, map[string]sdk.Handler{"node.kv.get": get, "node.kv.wipe": wipe})
}

func get(req *sdk.Request) (*sdk.Result, error) {
	var p struct {
		Key string `json:"key"`
	}
	if err := json.Unmarshal(req.Params, &p); err != nil {
		return nil, protocol.InvalidParams("key", "key must be a string")
	}
	return &sdk.Result{Payload: map[string]string{"key": p.Key, "value": "v-" + p.Key}}, nil
}

func wipe(*sdk.Request) (*sdk.Result, error) {
	return &sdk.Result{Payload: map[string]bool{"wiped": true}}, nil
}

func main() {}
