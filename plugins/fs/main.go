//go:build wasip1

// Command fs is the module of the fs family: node.fs.list, stat, read,
// write, mkdir, move, delete.preview and delete (spec "File operations").
// It validates each request with the same code the controller uses
// (protocol/fs.go), makes the host calls of hostcalls/fs, which own every
// effect and its confinement, and shapes the spec's payloads (adding the
// name-derived MIME type). node.fs.stat, list and read are shaped here
// (read.go; package shape: MIME table, payload bytes) from the raw figures
// of the read primitives (fs.open, fs.readdir with stat records, fs.read). The
// mutation decisions are this module's too (mutate*.go): revisions, move
// rules, delete preview tokens and their limits (state in its volatile
// store), enforced by the mutation primitives' atomic compares (fs.write_at,
// fs.mkdirs, fs.rename, fs.walk, fs.remove). File bytes never enter this
// module: a write's dataBase64 arrives as a host-side blob, and a read's
// chunk leaves as one.
package main

import (
	"lemon/plugins/sdk"
	"lemon/protocol"
)

func init() {
	sdk.Serve(manifest, map[string]sdk.Handler{
		"node.fs.list":               list,
		"node.fs.stat":               stat,
		"node.fs.read":               read,
		"node.fs.write":              write,
		"node.fs.mkdir":              mkdir,
		"node.fs.move":               move,
		"node.fs.delete.preview":     deletePreview,
		"node.fs.delete":             deleteEntry,
		protocol.MethodFSTransferGet: transferGet,
		protocol.MethodFSTransferPut: transferPut,
	})
}

// decode strictly decodes params into v and runs check; the error is
// always a bounded *protocol.Error.
func decode(req *sdk.Request, v any, check func() *protocol.Error) error {
	if err := req.Decode(v); err != nil {
		return err
	}
	if err := check(); err != nil {
		return err
	}
	return nil
}

func main() {}
