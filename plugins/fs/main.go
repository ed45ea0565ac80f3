//go:build wasip1

// Command fs is the module of the fs family: node.fs.list, stat, read,
// write, mkdir, move, delete.preview and delete (spec "File operations").
// It validates each request with the same code the controller uses
// (protocol/fs.go), makes the host calls of hostcalls/fs, which own every
// effect and its confinement, and shapes the spec's payloads (adding the
// name-derived MIME type). The mutation decisions are this module's
// (mutate*.go): revisions, move rules, delete preview tokens and their
// limits (state in its volatile store). File bytes never enter this
// module: a write's dataBase64 arrives as a host-side blob, and a read's
// chunk leaves as one. Listings and stats never enter it either: the host
// builds those payloads (MIME types included, from the same protocol
// table) as a blob this module returns unread, because JSON costs a wasm
// guest about 1 µs a byte and a 500-entry listing is ~100 KB.
package main

import (
	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
	"lemon/plugins/sdk/fs"
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
	if err := protocol.DecodeParams(req.Params, v); err != nil {
		return err
	}
	if err := check(); err != nil {
		return err
	}
	return nil
}

func list(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.FSListParams
	if err := decode(req, &p, func() *protocol.Error { return protocol.ValidateFSList(req.Params) }); err != nil {
		return nil, err
	}
	return payloadResult(fs.ListPayload(p.Path, p.ShowHidden))
}

// payloadResult returns the blob of a _payload host call, which holds the
// method's whole payload object, as the result.
func payloadResult(c contract.PayloadResult, err error) (*sdk.Result, error) {
	if err != nil {
		return nil, err
	}
	if c.PayloadBlob == 0 {
		return nil, protocol.Errorf(protocol.CodeInternal, "host returned no payload")
	}
	return &sdk.Result{PayloadBlob: c.PayloadBlob}, nil
}

func stat(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.FSStatParams
	if err := decode(req, &p, func() *protocol.Error { return protocol.ValidateFSStat(req.Params) }); err != nil {
		return nil, err
	}
	return payloadResult(fs.StatPayload(p.Path))
}

func read(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.FSReadParams
	if err := decode(req, &p, p.Check); err != nil {
		return nil, err
	}
	offset, length := int64(0), int64(protocol.FSMaxReadLength)
	if p.Offset != nil {
		offset = *p.Offset
	}
	if p.Length != nil {
		length = *p.Length
	}
	r, err := fs.Read(p.Path, offset, length)
	if err != nil {
		return nil, err
	}
	out := r.FSReadResult
	out.Mime = protocol.MIMEFromName(out.Path)
	return &sdk.Result{Payload: out, Blobs: map[string]uint32{"dataBase64": r.Blob}}, nil
}

func main() {}
