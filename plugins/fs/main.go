//go:build wasip1

// Command fs is the module of the fs family: node.fs.list, stat, read,
// write, mkdir, move, delete.preview and delete (spec "File operations").
// It validates each request with the same code the controller uses
// (protocol/fs.go), makes the host calls of hostcalls/fs, which own every
// effect and its confinement, and shapes the spec's payloads (adding the
// name-derived MIME type). File bytes never enter this module: a write's
// dataBase64 arrives as a host-side blob, and a read's chunk leaves as one.
// node.fs.stat, list and read are shaped here (read.go, package shape:
// MIME table, payload bytes) from the raw figures of the read primitives
// (fs.open, fs.readdir, fs.statat, fs.pread); delete previews are still
// built by the host as a blob this module returns unread.
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
	if err := req.Decode(v); err != nil {
		return err
	}
	if err := check(); err != nil {
		return err
	}
	return nil
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

func write(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.FSWriteParams
	if err := decode(req, &p, p.Check); err != nil {
		return nil, err
	}
	blob, ok := req.Blobs["dataBase64"]
	if !ok || p.DataBase64 != nil {
		// The host decodes dataBase64 into a blob before this module runs.
		return nil, protocol.InvalidParams("dataBase64", "dataBase64 is required")
	}
	if blob.Size > protocol.FSMaxWriteBytes {
		return nil, protocol.InvalidParams("dataBase64", "dataBase64 decodes to more than 1048576 bytes")
	}
	args := contract.FSWriteArgs{Path: p.Path, Blob: blob.ID, Truncate: true, Mkdirs: p.Mkdirs,
		ExpectedModifiedAtMs: p.ExpectedModifiedAtMs}
	if p.Offset != nil {
		args.Offset = *p.Offset
	}
	if p.Truncate != nil {
		args.Truncate = *p.Truncate
	}
	r, err := fs.Write(args)
	if err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: r}, nil
}

func mkdir(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.FSMkdirParams
	if err := decode(req, &p, func() *protocol.Error { return protocol.ValidateFSMkdir(req.Params) }); err != nil {
		return nil, err
	}
	r, err := fs.Mkdir(p.Path)
	if err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: r}, nil
}

func move(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.FSMoveParams
	if err := decode(req, &p, p.Check); err != nil {
		return nil, err
	}
	r, err := fs.Move(p.Path, p.Destination, *p.ExpectedModifiedAtMs, p.Overwrite)
	if err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: r}, nil
}

func deletePreview(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.FSDeletePreviewParams
	if err := decode(req, &p, func() *protocol.Error { return protocol.ValidateFSDeletePreview(req.Params) }); err != nil {
		return nil, err
	}
	return payloadResult(fs.DeletePreviewPayload(p.Path, p.Recursive))
}

func deleteEntry(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.FSDeleteParams
	if err := decode(req, &p, p.Check); err != nil {
		return nil, err
	}
	r, err := fs.Delete(p.Path, p.Confirm, p.ConfirmationToken)
	if err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: r}, nil
}

func main() {}

func transferGet(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.FSTransferGetParams
	if err := protocol.DecodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	p.NodeID = ""
	r, err := fs.Send(p)
	if err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: r}, nil
}

func transferPut(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.FSTransferPutParams
	if err := protocol.DecodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	p.NodeID = ""
	r, err := fs.Receive(p)
	if err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: r}, nil
}
