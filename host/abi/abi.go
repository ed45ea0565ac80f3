// Package abi holds the shapes of the module ABI (docs/ABI.md) shared by
// the host and the guest SDK: the manifest (JSON), and the invocation and
// result envelopes (a compact binary layout, envelope.go). It depends on
// the standard library and lemon/protocol and lemon/hostcalls only, so it
// compiles for wasip1 too.
package abi

import (
	"encoding/json"

	"lemon/hostcalls"
	"lemon/protocol"
)

// Version is the ABI version this package describes. Version 2 replaced
// version 1's JSON envelopes with binary ones; version 3 made the results
// of hostcalls.Define'd host calls binary too (docs/ABI.md, "Host-call
// results"). The host refuses a module built for another version at load.
const Version = 3

// Manifest is what lemon_describe returns.
type Manifest struct {
	ABI          int          `json:"abi"`
	Family       string       `json:"family"`
	Version      string       `json:"version"`
	Capabilities []string     `json:"capabilities"`
	HostCalls    []string     `json:"hostcalls"`
	Methods      []MethodSpec `json:"methods"`
}

// MethodSpec declares one method a module serves: the single declaration
// routing, validation, scopes and retry classes derive from
// (docs/PLUGINS.md, "Declaring a method").
//   - Capability is what the node's ceiling must allow.
//   - Uses names the further capabilities the method's host calls need
//     (each one of the manifest's Capabilities): a call carries
//     {Capability} ∪ Uses, intersected with the operator's capabilities
//     (docs/POLICY.md, "Execution context"), and a policy selector
//     capability:X matches a method whose Capability or Uses names X.
//   - Scope is the operator scope a caller needs: protocol.ScopeRead,
//     ScopeWrite or ScopeAdmin; "" means ScopeAdmin.
//   - Retry is protocol.RetryRead or RetryMutation; "" means RetryMutation.
//   - Params is the params schema; nil accepts any JSON object (only the
//     protocol's size, depth and item limits apply).
//   - InputBlobs are the request fields the host turns into blobs.
//   - DeadlineMs is the broker deadline in ms; 0 means the protocol default.
type MethodSpec struct {
	Name       string              `json:"name"`
	Version    int                 `json:"version"`
	Capability string              `json:"capability"`
	Uses       []string            `json:"uses,omitempty"`
	Scope      string              `json:"scope,omitempty"`
	Retry      string              `json:"retry,omitempty"`
	Params     *protocol.Schema    `json:"params,omitempty"`
	InputBlobs map[string]BlobSpec `json:"inputBlobs,omitempty"`
	DeadlineMs int                 `json:"deadlineMs,omitempty"`
}

// BlobSpec: Encoding "base64" (strict standard base64) or "string" (the
// JSON string's UTF-8 bytes); MaxBytes bounds the decoded size in bytes.
// Secret marks the field's bytes as a secret: no host call hands them to
// a guest (blob.read, blob.sha256 refuse them FORBIDDEN), only host calls
// declared to consume secrets (vault.set) read them, and the module
// cannot return them as an output blob. Input blobs of a method needing
// capability "secrets" are secret whether or not the flag is set.
type BlobSpec struct {
	Encoding string `json:"encoding"`
	MaxBytes int    `json:"maxBytes"`
	Secret   bool   `json:"secret,omitempty"`
}

// Blob is a handle to host-side bytes and their size in bytes.
type Blob struct {
	ID   uint32 `json:"id"`
	Size int    `json:"size"`
}

// Resume is set when the host re-invokes a suspended method.
type Resume struct {
	Handle uint32          `json:"handle"`
	State  json.RawMessage `json:"state,omitempty"`
}

// Input is what lemon_invoke receives (AppendInput, DecodeInput).
type Input struct {
	Method     string               `json:"method"`
	Params     json.RawMessage      `json:"params"`
	Blobs      map[string]Blob      `json:"blobs,omitempty"`
	Invocation hostcalls.Invocation `json:"invocation"`
	Resume     *Resume              `json:"resume,omitempty"`
}

// Suspend asks the host to wait on Handle without holding the instance.
type Suspend struct {
	Handle uint32          `json:"handle"`
	State  json.RawMessage `json:"state,omitempty"`
}

// Output is what lemon_invoke returns (AppendOK, AppendError,
// AppendSuspend, DecodeOutput).
type Output struct {
	OK      bool            `json:"ok"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// PayloadBlob, when non-zero, names a blob holding the payload's JSON
	// object (made by a host call); it replaces Payload, so large host
	// results reach the caller without crossing guest JSON.
	PayloadBlob uint32            `json:"payloadBlob,omitempty"`
	Blobs       map[string]uint32 `json:"blobs,omitempty"`
	Error       *protocol.Error   `json:"error,omitempty"`
	Suspend     *Suspend          `json:"suspend,omitempty"`
}
