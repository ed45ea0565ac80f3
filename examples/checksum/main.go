//go:build wasip1

// Command checksum is an example method family written as a team outside
// lemon would write one: only the plugin SDK (lemon/plugins/sdk and its
// wrapper packages), no //go:wasmimport of its own, and not part of the
// built-in module set (build.sh builds plugins/*; this lives under
// examples/). docs/PLUGINS.md "An example family: checksum" walks it.
//
// Its one method, node.checksum.sha256 {nodeId, path} -> {sha256, size},
// hashes a regular file under the node's allowed roots: sha256 is the
// SHA-256 of its bytes in lowercase hex, size their number in bytes. The
// file is read with the fs.read host call, 1 MiB at a time, and every
// chunk is fed to a SHA-256 kept on the host (blob.Hash), so the file's
// bytes never enter the module or any JSON. Errors of fs.read (not_found,
// not_regular_file, path_not_allowed, invalid_path, ...) pass through
// unchanged.
package main

import (
	"lemon/hostcalls/guestcall"
	"lemon/plugins/sdk"
	"lemon/plugins/sdk/blob"
	"lemon/plugins/sdk/fs"
	"lemon/protocol"
)

// manifest is the family's whole declaration (docs/PLUGINS.md "Declaring
// a method"). The method needs the family's own capability, checksum; its
// host call fs.read needs read, so both are declared and a node's ceiling
// must allow both. It reads file content, as node.fs.read does, so it
// needs operator.admin; it never changes the node, so its retry class is
// read.
var manifest = sdk.Manifest{
	Family:       "checksum",
	Version:      "1.0.0",
	Capabilities: []string{"checksum", "read"},
	// The calls this module's wrappers import: fs.Read, Hash.Write, Hash.Sum.
	HostCalls: []string{"fs.read", guestcall.HashUpdate, guestcall.HashSum},
	Methods: []sdk.MethodSpec{{
		Name:       "node.checksum.sha256",
		Version:    1,
		Capability: "checksum",
		// Its host call fs.read needs read: a call carries both.
		Uses:       []string{"read"},
		Scope:      protocol.ScopeAdmin,
		Retry:      protocol.RetryRead,
		DeadlineMs: deadlineMs,
		// path is bounded as node.fs.read's is (1 to 4,096 bytes); the
		// node resolves it against its allowed roots.
		Params: sdk.Params(map[string]*sdk.Schema{"path": sdk.String(1, protocol.FSMaxPathBytes)}, "path"),
	}},
}

// deadlineMs is the method's broker deadline: 2 minutes, room for a file of
// a few GiB at the host's hashing speed.
const deadlineMs = 120_000

func init() {
	sdk.Serve(manifest, map[string]sdk.Handler{"node.checksum.sha256": sha256File})
}

type sha256Params struct {
	NodeID string  `json:"nodeId"`
	Path   *string `json:"path"`
}

// sha256Result is the payload: SHA256 in lowercase hex, Size in bytes.
type sha256Result struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// sha256File reads path chunk by chunk until fs.read reports eof, hashing
// each chunk on the host and freeing it at once. It checks its params
// again: the module may run under a host that does not apply schemas.
func sha256File(req *sdk.Request) (*sdk.Result, error) {
	var p sha256Params
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	if err := protocol.RequireNodeID(p.NodeID); err != nil {
		return nil, err
	}
	if p.Path == nil {
		return nil, protocol.InvalidParams("path", "path is required")
	}
	var h blob.Hash
	for off := int64(0); ; {
		chunk, err := fs.Read(*p.Path, off, protocol.FSMaxReadLength)
		if err != nil {
			return nil, err
		}
		if err := h.Write(chunk.Blob, true); err != nil {
			return nil, err
		}
		off += chunk.Length
		if chunk.EOF || chunk.Length == 0 {
			break
		}
	}
	d, err := h.Sum()
	if err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: sha256Result{SHA256: d.SHA256, Size: d.Size}}, nil
}

func main() {}
