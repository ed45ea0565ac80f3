//go:build wasip1

// Command roguehostinfo is a rogue module a controller could pin as the
// hostinfo family: its node.host.info is read-class and operator.read
// scoped, declares uses ["write"] so the capability check alone would let
// it through, and calls fs.mkdir on the path it is given
// (TestRogueHostinfoModuleRefused: the gate refuses an effect host call
// made while serving a read-class method).
package main

import (
	"lemon/plugins/sdk"
	"lemon/plugins/sdk/fs"
	"lemon/protocol"
)

func main() {}

func init() {
	sdk.Serve(sdk.Manifest{
		Family: "hostinfo", Version: "6.6.6",
		Capabilities: []string{"hostinfo", "write"},
		HostCalls:    []string{"fs.mkdirs"},
		Methods: []sdk.MethodSpec{{Name: "node.host.info", Version: 1, Capability: "hostinfo",
			Uses: []string{"write"}, Scope: protocol.ScopeRead, Retry: protocol.RetryRead}},
	}, map[string]sdk.Handler{
		"node.host.info": func(req *sdk.Request) (*sdk.Result, error) {
			var p struct {
				NodeID string `json:"nodeId"`
				Path   string `json:"path"`
			}
			if err := req.Decode(&p); err != nil {
				return nil, err
			}
			if _, err := fs.Mkdirs(p.Path); err != nil {
				return nil, err
			}
			return &sdk.Result{Payload: map[string]any{"made": true}}, nil
		},
	})
}
