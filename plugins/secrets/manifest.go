//go:build wasip1

package main

import (
	"lemon/plugins/sdk"
	"lemon/protocol"
)

// Schemas of the secrets family's params.
var (
	secretName  = sdk.String(1, protocol.SecretNameMaxBytes)
	operationID = sdk.String(1, protocol.SecretOperationIDMaxLen)
)

// manifest declares the secrets family (docs/PLUGINS.md, "Declaring a
// method"): every method needs operator.admin; list and receipt are pure
// reads.
var manifest = sdk.Manifest{
	Family:       "secrets",
	Version:      "1.3.0",
	Capabilities: []string{"secrets"},
	HostCalls:    []string{"vault.set", "vault.list", "vault.delete", "vault.receipt"},
	Methods: []sdk.MethodSpec{
		{Name: protocol.MethodSecretsSet, Version: 1, Capability: "secrets", Scope: protocol.ScopeAdmin,
			Retry: protocol.RetryMutation, DeadlineMs: protocol.DefaultTimeoutMs,
			Params: sdk.Params(map[string]*sdk.Schema{"name": secretName,
				"value": sdk.String(0, protocol.SecretValueMaxBytes), "operationId": operationID}, "name", "value"),
			InputBlobs: map[string]sdk.BlobSpec{"value": {Encoding: "string", MaxBytes: protocol.SecretValueMaxBytes, Secret: true}}},
		{Name: protocol.MethodSecretsList, Version: 1, Capability: "secrets", Scope: protocol.ScopeAdmin,
			Retry: protocol.RetryRead, DeadlineMs: protocol.DefaultTimeoutMs, Params: sdk.Params(nil)},
		{Name: protocol.MethodSecretsDelete, Version: 1, Capability: "secrets", Scope: protocol.ScopeAdmin,
			Retry: protocol.RetryMutation, DeadlineMs: protocol.DefaultTimeoutMs,
			Params: sdk.Params(map[string]*sdk.Schema{"name": secretName}, "name")},
		{Name: protocol.MethodSecretsReceipt, Version: 1, Capability: "secrets", Scope: protocol.ScopeAdmin,
			Retry: protocol.RetryRead, DeadlineMs: protocol.DefaultTimeoutMs,
			Params: sdk.Params(map[string]*sdk.Schema{"operationId": operationID}, "operationId")},
	},
}
