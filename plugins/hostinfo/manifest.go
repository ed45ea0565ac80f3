//go:build wasip1

package main

import (
	"lemon/plugins/sdk"
	"lemon/protocol"
)

// manifest declares the hostinfo family (docs/PLUGINS.md, "Declaring a
// method"): node.host.info is an operator.read pure read.
var manifest = sdk.Manifest{
	Family:       "hostinfo",
	Version:      "1.1.0",
	Capabilities: []string{"hostinfo"},
	HostCalls:    []string{"sysinfo.snapshot"},
	Methods: []sdk.MethodSpec{{
		Name: "node.host.info", Version: 1, Capability: "hostinfo",
		Scope: protocol.ScopeRead, Retry: protocol.RetryRead, DeadlineMs: protocol.DefaultTimeoutMs,
		Params: sdk.Params(nil),
	}},
}
