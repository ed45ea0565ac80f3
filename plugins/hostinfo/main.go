//go:build wasip1

// Command hostinfo is the module of the hostinfo family: node.host.info
// (spec "Host information"). The host measures (sysinfo.snapshot returns
// raw figures); this module validates the params and shapes the payload
// (plugins/hostinfo/shape). It is also the smallest example of a plugin: a
// manifest, one handler, one host call through its typed wrapper
// (plugins/sdk/sysinfo).
package main

import (
	"encoding/json"

	"lemon/plugins/hostinfo/shape"
	"lemon/plugins/sdk"
	"lemon/plugins/sdk/sysinfo"
	"lemon/protocol"
)

func init() {
	sdk.Serve(manifest, map[string]sdk.Handler{"node.host.info": hostInfo})
}

var nodeIDKey = [1]string{"nodeId"}

// payload holds the last payload; the SDK copies it into the result
// envelope before the next invocation.
var payload []byte

func hostInfo(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.HostInfoParams
	// The plain {"nodeId":"…"} takes the fast path; anything else the
	// strict decode.
	var vals [1]string
	if _, ok := sdk.PlainStrings(req.Params, nodeIDKey[:], vals[:]); ok {
		p.NodeID = vals[0]
	} else if err := req.Decode(&p); err != nil {
		return nil, err
	}
	if err := protocol.RequireNodeID(p.NodeID); err != nil {
		return nil, err
	}
	f, err := sysinfo.Snapshot()
	if err != nil {
		return nil, err
	}
	// Payload: shape.Payload(f) gives the same bytes through the SDK's
	// codec; this method writes them by hand (AppendPayload) because its
	// bound against native is tight (docs/BENCHMARKS.md, "Module ABI").
	h := shape.Payload(f)
	payload = shape.AppendPayload(payload[:0], &h)
	return &sdk.Result{Payload: json.RawMessage(payload)}, nil
}

func main() {}
