//go:build wasip1

package main

import (
	"encoding/json"
	"strconv"

	"lemon/plugins/fs/shape"
	"lemon/plugins/sdk"
	"lemon/plugins/sdk/fs"
	"lemon/protocol"
)

// versionOverride, when set at build time (-ldflags '-X
// main.versionOverride=...'), replaces the manifest's module version, to
// ship a changed module (such as one with another MIME table,
// shape.Overrides) under a version of its own.
var versionOverride string

// moduleVersion is the version in the manifest: 1.3.0 unless overridden.
func moduleVersion() string {
	if versionOverride != "" {
		return versionOverride
	}
	return "1.3.0"
}

// checkNodePath is protocol.ValidateFSStat's (and ValidateFSList's)
// check on params already decoded strictly: no second decode.
func checkNodePath(nodeID, path string) *protocol.Error {
	if err := protocol.RequireNodeID(nodeID); err != nil {
		return err
	}
	return protocol.ValidateFSPath("path", path)
}

var statKeys = [2]string{"nodeId", "path"}

// stat serves node.fs.stat: fs.stat's raw stat (no descriptor, no
// handle), shaped with the MIME type of the canonical path's last
// component.
func stat(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.FSStatParams
	// Plain params ({"nodeId":"…","path":"…"}, ASCII, no escapes) take
	// the fast path; anything else the strict decode.
	var vals [2]string
	if _, ok := sdk.PlainStrings(req.Params, statKeys[:], vals[:]); ok {
		p.NodeID, p.Path = vals[0], vals[1]
	} else if err := req.Decode(&p); err != nil {
		return nil, err
	}
	if err := checkNodePath(p.NodeID, p.Path); err != nil {
		return nil, err
	}
	st, err := fs.Stat(p.Path, false)
	if err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: json.RawMessage(shape.StatPayload(st.Path, &st.Stat))}, nil
}

// list serves node.fs.list: one fs.readdir gives the 500 smallest visible
// names in byte order, each with its lstat record, and whether more
// exist; shape.ListPayloadFromReadDir writes the payload from it in one
// pass (names that are not UTF-8 listed as invalid_path).
func list(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.FSListParams
	if err := decode(req, &p, func() *protocol.Error { return checkNodePath(p.NodeID, p.Path) }); err != nil {
		return nil, err
	}
	h, err := fs.Open(p.Path, false)
	if err != nil {
		return nil, err
	}
	if !shape.IsDir(h.Stat.Mode) {
		return nil, protocol.FSError(protocol.DomainNotDirectory)
	}
	raw, err := fs.ReadDirSmallest(h.Handle, protocol.FSListLimit, !p.ShowHidden, true)
	if err != nil {
		return nil, err
	}
	out, err := shape.ListPayloadFromReadDir(h.Path, raw)
	if err != nil {
		return nil, protocol.FSError(protocol.DomainFilesystemError)
	}
	return &sdk.Result{Payload: json.RawMessage(out)}, nil
}

// read serves node.fs.read: fs.read (fs.open and fs.pread in one host
// call) reads the chunk into a blob the host writes into dataBase64 as
// base64; the bytes never enter this module.
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
	// {path, offset, length, size, mime, eof}; the host adds dataBase64.
	b := make([]byte, 0, 128+len(r.Path))
	b = append(b, `{"path":`...)
	b = shape.AppendString(b, r.Path)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, r.Offset, 10)
	b = append(b, `,"length":`...)
	b = strconv.AppendInt(b, r.Length, 10)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, r.Size, 10)
	b = append(b, `,"mime":`...)
	b = shape.AppendString(b, shape.MIME(r.Path))
	b = append(b, `,"eof":`...)
	b = strconv.AppendBool(b, r.EOF)
	b = append(b, '}')
	return &sdk.Result{Payload: json.RawMessage(b), Blobs: map[string]uint32{"dataBase64": r.Blob}}, nil
}
