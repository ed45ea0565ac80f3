//go:build wasip1

// Command hostinfo is the module of the hostinfo family: node.host.info
// (spec "Host information"), served from the sysinfo.snapshot host call.
// It is also the smallest example of a plugin: a manifest, one handler,
// one host call through its typed wrapper (plugins/sdk/sysinfo).
package main

import (
	"lemon/plugins/sdk"
	"lemon/plugins/sdk/sysinfo"
	"lemon/protocol"
)

func init() {
	sdk.Serve(manifest, map[string]sdk.Handler{"node.host.info": hostInfo})
}

func hostInfo(req *sdk.Request) (*sdk.Result, error) {
	if err := protocol.ValidateHostInfo(req.Params); err != nil {
		return nil, err
	}
	// The snapshot is passed through as raw JSON: the host already shaped
	// it as the spec's payload, and re-encoding would only cost time.
	snap, err := sysinfo.SnapshotJSON()
	if err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: snap}, nil
}

func main() {}
