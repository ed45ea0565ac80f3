//go:build wasip1

package main

import (
	"encoding/json"
	"strconv"

	"lemon/hostcalls/contract"
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

// moduleVersion is the version in the manifest: 1.2.0 unless overridden.
func moduleVersion() string {
	if versionOverride != "" {
		return versionOverride
	}
	return "1.2.0"
}

// checkNodePath is protocol.ValidateFSStat's (and ValidateFSList's)
// check on params already decoded strictly: no second decode.
func checkNodePath(nodeID, path string) *protocol.Error {
	if err := protocol.RequireNodeID(nodeID); err != nil {
		return err
	}
	return protocol.ValidateFSPath("path", path)
}

// stat serves node.fs.stat: fs.open's raw stat, shaped with the MIME type
// of the canonical path's last component.
func stat(req *sdk.Request) (*sdk.Result, error) {
	var p protocol.FSStatParams
	if err := decode(req, &p, func() *protocol.Error { return checkNodePath(p.NodeID, p.Path) }); err != nil {
		return nil, err
	}
	h, err := fs.Open(p.Path, false)
	if err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: json.RawMessage(shape.StatPayload(h.Path, &h.Stat))}, nil
}

// list serves node.fs.list: every name of the directory through
// fs.readdir (bounded batches), the 500 smallest visible ones in byte
// order kept (shape.Lister), then one fs.statat of those that are UTF-8.
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
	l := shape.Lister{ShowHidden: p.ShowHidden}
	for {
		batch, err := fs.ReadDir(h.Handle, 0)
		if err != nil {
			return nil, err
		}
		eof, err := contract.ParseFSReadDir(batch, func(e contract.FSDirEntry) { l.Add(e.Name) })
		if err != nil {
			return nil, protocol.FSError(protocol.DomainFilesystemError)
		}
		if eof {
			break
		}
	}
	names, truncated := l.Names()
	toStat := shape.ToStat(names)
	stats := make([]*contract.FSRawStat, 0, len(toStat))
	errs := make([]string, 0, len(toStat))
	all := make([]contract.FSRawStat, len(toStat))
	if len(toStat) > 0 {
		raw, err := fs.StatAt(h.Handle, toStat)
		if err != nil {
			return nil, err
		}
		err = contract.ParseFSStatAt(raw, func(st *contract.FSRawStat, code string) {
			if st != nil && len(stats) < len(all) {
				all[len(stats)] = *st
				st = &all[len(stats)]
			}
			stats = append(stats, st)
			errs = append(errs, code)
		})
		if err != nil || len(stats) != len(toStat) {
			return nil, protocol.FSError(protocol.DomainFilesystemError)
		}
	}
	return &sdk.Result{Payload: json.RawMessage(shape.ListPayload(h.Path, names, truncated, stats, errs))}, nil
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
