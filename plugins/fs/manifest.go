//go:build wasip1

package main

import (
	"lemon/plugins/sdk"
	"lemon/protocol"
)

// Schemas of the fs family's params, as loose as protocol/fs.go's
// validators or looser (those stay the stricter check).
var (
	fsPath   = sdk.String(1, protocol.FSMaxPathBytes)
	fsOffset = sdk.Integer(0, protocol.FSMaxOffset)
	// fsData is standard base64 of at most FSMaxWriteBytes decoded bytes.
	fsData = sdk.String(0, (protocol.FSMaxWriteBytes+2)/3*4)
	// fsSecret is 64 hex digits (transferKey, dataTicket, a sha256).
	fsSecret = sdk.String(64, 64)
)

// manifest declares the fs family (docs/PLUGINS.md, "Declaring a
// method"): every method needs operator.admin; list, stat and read are
// pure reads.
var manifest = sdk.Manifest{
	Family:       "fs",
	Version:      moduleVersion(),
	Capabilities: []string{"read", "write"},
	HostCalls: []string{"fs.open", "fs.stat", "fs.readdir", "fs.read", "fs.send", "fs.receive",
		"fs.write_at", "fs.mkdirs", "fs.rename", "fs.walk", "fs.remove",
		"store.get", "store.put", "store.cas", "store.delete"},
	Methods: []sdk.MethodSpec{
		{Name: "node.fs.list", Version: 1, Capability: "read", Scope: protocol.ScopeAdmin, Retry: protocol.RetryRead,
			DeadlineMs: protocol.DefaultTimeoutMs,
			Params:     sdk.Params(map[string]*sdk.Schema{"path": fsPath, "showHidden": sdk.Boolean()}, "path")},
		{Name: "node.fs.stat", Version: 1, Capability: "read", Scope: protocol.ScopeAdmin, Retry: protocol.RetryRead,
			DeadlineMs: protocol.DefaultTimeoutMs,
			Params:     sdk.Params(map[string]*sdk.Schema{"path": fsPath}, "path")},
		{Name: "node.fs.read", Version: 1, Capability: "read", Scope: protocol.ScopeAdmin, Retry: protocol.RetryRead,
			DeadlineMs: protocol.DefaultTimeoutMs,
			Params: sdk.Params(map[string]*sdk.Schema{"path": fsPath, "offset": fsOffset,
				"length": sdk.Integer(1, protocol.FSMaxReadLength)}, "path")},
		{Name: "node.fs.write", Version: 1, Capability: "write", Scope: protocol.ScopeAdmin, Retry: protocol.RetryMutation,
			DeadlineMs: protocol.DefaultTimeoutMs,
			Params: sdk.Params(map[string]*sdk.Schema{"path": fsPath, "dataBase64": fsData, "offset": fsOffset,
				"truncate": sdk.Boolean(), "mkdirs": sdk.Boolean(), "expectedModifiedAtMs": fsOffset}, "path", "dataBase64"),
			InputBlobs: map[string]sdk.BlobSpec{"dataBase64": {Encoding: "base64", MaxBytes: protocol.FSMaxWriteBytes}}},
		{Name: "node.fs.mkdir", Version: 1, Capability: "write", Scope: protocol.ScopeAdmin, Retry: protocol.RetryMutation,
			DeadlineMs: protocol.DefaultTimeoutMs,
			Params:     sdk.Params(map[string]*sdk.Schema{"path": fsPath}, "path")},
		{Name: "node.fs.move", Version: 1, Capability: "write", Scope: protocol.ScopeAdmin, Retry: protocol.RetryMutation,
			DeadlineMs: protocol.DefaultTimeoutMs,
			Params: sdk.Params(map[string]*sdk.Schema{"path": fsPath, "destination": fsPath,
				"expectedModifiedAtMs": fsOffset, "overwrite": sdk.Boolean()}, "path", "destination", "expectedModifiedAtMs")},
		{Name: "node.fs.delete.preview", Version: 1, Capability: "write", Scope: protocol.ScopeAdmin, Retry: protocol.RetryMutation,
			DeadlineMs: protocol.DefaultTimeoutMs,
			Params:     sdk.Params(map[string]*sdk.Schema{"path": fsPath, "recursive": sdk.Boolean()}, "path")},
		{Name: "node.fs.delete", Version: 1, Capability: "write", Scope: protocol.ScopeAdmin, Retry: protocol.RetryMutation,
			DeadlineMs: protocol.DefaultTimeoutMs,
			Params: sdk.Params(map[string]*sdk.Schema{"path": fsPath, "confirm": fsPath,
				"confirmationToken": sdk.String(1, protocol.MaxConfirmationTokenBytes)}, "path", "confirm", "confirmationToken")},
		// Bulk transfers (docs/FS.md, "Transfers"): the bytes take a data
		// connection; the controller adds dataTicket.
		{Name: protocol.MethodFSTransferGet, Version: 1, Capability: "read", Scope: protocol.ScopeAdmin, Retry: protocol.RetryRead,
			DeadlineMs: protocol.TransferDeadlineMs,
			Params: sdk.Params(map[string]*sdk.Schema{"path": fsPath, "transferKey": fsSecret, "offset": fsOffset,
				"prefixSha256": fsSecret, "tree": sdk.Boolean(), "dataTicket": fsSecret}, "path", "transferKey")},
		{Name: protocol.MethodFSTransferPut, Version: 1, Capability: "write", Scope: protocol.ScopeAdmin, Retry: protocol.RetryMutation,
			DeadlineMs: protocol.TransferDeadlineMs,
			Params: sdk.Params(map[string]*sdk.Schema{"path": fsPath, "transferKey": fsSecret, "size": fsOffset,
				"mode": sdk.Integer(0, 0o1777), "mtimeMs": sdk.Integer(-protocol.FSMaxOffset, protocol.FSMaxOffset), "expectedModifiedAtMs": fsOffset,
				"overwrite": sdk.Boolean(), "mkdirs": sdk.Boolean(), "resume": sdk.Boolean(), "tree": sdk.Boolean(),
				"dataTicket": fsSecret}, "path", "transferKey")},
	},
}
