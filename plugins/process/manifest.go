//go:build wasip1

package main

import (
	"lemon/plugins/sdk"
	"lemon/protocol"
)

// processID is 1..128 ASCII letters, digits, '_', ':' or '-'.
var processID = &sdk.Schema{Type: "string", Pattern: `^[A-Za-z0-9_:-]{1,128}$`, MaxLength: intp(protocol.ProcessIDMaxLen)}

// manifest declares the process family (docs/PLUGINS.md, "Declaring a
// method"): every method needs operator.admin; get is a pure read. Run's
// deadline is the longest a run may ask for (timeoutMs at most 30 minutes
// plus 5 s); the controller keeps protocol's rule of timeoutMs + 5 s.
var manifest = sdk.Manifest{
	Family:       "process",
	Version:      "1.1.0",
	Capabilities: []string{"exec"},
	HostCalls: []string{"spawn.start", "spawn.wait", "spawn.signal", "spawn.release",
		"store.get", "store.put", "store.delete", "store.cas", "store.scan", "blob.sha256", "config.get"},
	Methods: []sdk.MethodSpec{
		{Name: protocol.MethodProcessRun, Version: 1, Capability: "exec", Scope: protocol.ScopeAdmin,
			Retry: protocol.RetryMutation, DeadlineMs: protocol.ProcessTimeoutMaxMs + protocol.ProcessRunDeadlineSlop,
			Params: sdk.Params(map[string]*sdk.Schema{
				"processId":      processID,
				"cwd":            sdk.String(1, protocol.ProcessCwdMaxBytes),
				"argv":           sdk.Array(sdk.String(0, protocol.ProcessArgvMaxBytes), 1, protocol.ProcessArgvMaxCount),
				"stdinBase64":    sdk.String(0, (protocol.ProcessStdinMaxBytes+2)/3*4),
				"timeoutMs":      sdk.Integer(protocol.ProcessTimeoutMinMs, protocol.ProcessTimeoutMaxMs),
				"maxOutputBytes": sdk.Integer(protocol.ProcessMaxOutputMin, protocol.ProcessMaxOutputMax),
			}, "processId", "cwd", "argv", "stdinBase64", "timeoutMs", "maxOutputBytes"),
			InputBlobs: map[string]sdk.BlobSpec{"stdinBase64": {Encoding: "base64", MaxBytes: protocol.ProcessStdinMaxBytes}}},
		{Name: protocol.MethodProcessGet, Version: 1, Capability: "exec", Scope: protocol.ScopeAdmin,
			Retry: protocol.RetryRead, DeadlineMs: protocol.DefaultTimeoutMs,
			Params: sdk.Params(map[string]*sdk.Schema{"processId": processID}, "processId")},
		{Name: protocol.MethodProcessCancel, Version: 1, Capability: "exec", Scope: protocol.ScopeAdmin,
			Retry: protocol.RetryMutation, DeadlineMs: protocol.DefaultTimeoutMs,
			Params: sdk.Params(map[string]*sdk.Schema{"processId": processID}, "processId")},
	},
}

func intp(n int) *int { return &n }
