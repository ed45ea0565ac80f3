//go:build wasip1

package main

import (
	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
	"lemon/plugins/sdk/fs"
	"lemon/protocol"
)

// The bulk transfer methods (docs/FS.md, "Transfers"): node.fs.transfer.get
// and .put. This module validates their params, maps them to the raw args
// of the fs.send and fs.receive primitives (what a put expects of the
// final name: absent, or the revision expectedModifiedAtMs, or anything
// with overwrite), turns a refused expectation into the spec's error and
// shapes the payload. The host streams the bytes over the data connection
// (they never enter this module), checks their sha256 and compares the
// expectation atomically with the final rename.

// transferGet implements node.fs.transfer.get.
func transferGet(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.FSTransferGetParams
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	switch {
	case p.Offset < 0 || p.Offset > protocol.FSMaxOffset:
		return nil, protocol.InvalidParams("offset", "offset must be an integer from 0 to 9007199254740991")
	case !protocol.ValidTransferSecret(p.DataTicket):
		return nil, protocol.InvalidParams("dataTicket", "dataTicket must be 64 lowercase hex digits")
	case p.Tree && p.Offset != 0:
		return nil, protocol.InvalidParams("offset", "a tree transfer has no offset")
	case !p.Tree && p.Offset > 0 && !protocol.ValidTransferSecret(p.PrefixSHA256):
		return nil, protocol.InvalidParams("prefixSha256", "prefixSha256 (64 lowercase hex digits) is required with an offset")
	}
	r, err := fs.Send(contract.FSSendArgs{Path: p.Path, Offset: p.Offset, PrefixSHA256: p.PrefixSHA256, Tree: p.Tree,
		DataTicket: p.DataTicket})
	if err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: transferPayload(r)}, nil
}

// transferPut implements node.fs.transfer.put. expectedModifiedAtMs
// (nonzero): the file must exist with that mtimeMs at the final rename
// and is replaced (revision_conflict otherwise); else without overwrite
// the name must be free, before any byte moves and at the rename
// (already_exists otherwise); with overwrite an existing file is
// replaced. A tree put replaces files only with overwrite.
func transferPut(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.FSTransferPutParams
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	args := contract.FSReceiveArgs{Path: p.Path, Size: p.Size, Mode: p.Mode, MtimeMs: p.MtimeMs, Mkdirs: p.Mkdirs,
		Resume: p.Resume, Tree: p.Tree, DataTicket: p.DataTicket}
	if p.Tree {
		if p.Size != 0 || p.Mode != 0 || p.MtimeMs != 0 || p.ExpectedModifiedAtMs != 0 || p.Resume {
			return nil, protocol.InvalidParams("tree", "a tree put takes no size, mode, mtimeMs, expectedModifiedAtMs or resume")
		}
		if !protocol.ValidTransferSecret(p.DataTicket) {
			return nil, protocol.InvalidParams("dataTicket", "dataTicket must be 64 lowercase hex digits")
		}
		args.Replace = p.Overwrite
		return receive(args, protocol.DomainAlreadyExists)
	}
	switch {
	case p.Size < 0 || p.Size > protocol.FSMaxOffset:
		return nil, protocol.InvalidParams("size", "size must be an integer from 0 to 9007199254740991")
	case !protocol.ValidTransferMode(p.Mode):
		return nil, protocol.InvalidParams("mode", "mode must be permission bits, 0 to 0o1777 (no setuid or setgid)")
	case !protocol.ValidMtimeMs(p.MtimeMs):
		return nil, protocol.InvalidParams("mtimeMs", "mtimeMs must be an integer from -9007199254740991 to 9007199254740991")
	case p.ExpectedModifiedAtMs < 0 || p.ExpectedModifiedAtMs > protocol.FSMaxOffset:
		return nil, protocol.InvalidParams("expectedModifiedAtMs", "expectedModifiedAtMs must be an integer from 0 to 9007199254740991")
	case !protocol.ValidTransferSecret(p.DataTicket):
		return nil, protocol.InvalidParams("dataTicket", "dataTicket must be 64 lowercase hex digits")
	}
	if exp := p.ExpectedModifiedAtMs; exp != 0 {
		lo, hi, ok := msRange(exp)
		if !ok {
			lo, hi = 1, 0 // matches no file
		}
		args.Replace, args.Expect = true, contract.FSExpect{MtimeNsMin: &lo, MtimeNsMax: &hi}
		return receive(args, protocol.DomainRevisionConflict)
	}
	if p.Overwrite {
		args.Replace = true
	} else {
		args.Expect.Absent = true
	}
	return receive(args, protocol.DomainAlreadyExists)
}

// receive calls fs.receive; a refused expectation becomes the spec error
// domain refused, keeping the host's outcome flags (after the transfer a
// part file exists: mutationMayHaveApplied).
func receive(args contract.FSReceiveArgs, refused string) (*sdk.Result, error) {
	r, err := fs.Receive(args)
	if err != nil {
		if _, ok := precondition(err); ok {
			return nil, specError(err, refused)
		}
		return nil, err
	}
	return &sdk.Result{Payload: transferPayload(r)}, nil
}

// transferPayload shapes the payload of both transfer methods.
func transferPayload(r contract.FSTransferResult) protocol.FSTransferResult {
	return protocol.FSTransferResult{Path: r.Path, Size: r.Size, SHA256: r.SHA256, Mode: r.Mode, MtimeMs: r.MtimeMs,
		Offset: r.Offset, Files: r.Files}
}
