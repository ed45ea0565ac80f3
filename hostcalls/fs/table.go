package fs

import (
	"context"
	"encoding/json"
	"strings"

	"lemon/hostcalls"
	"lemon/protocol"
)

// Interface guard: the table entries are hostcalls.Func values.
var _ hostcalls.Func = (*FS)(nil).hcStat

// Host-call argument shapes (JSON, decoded strictly). Paths are the
// caller's strings; the host re-validates everything the module checked.
type (
	pathArgs struct {
		Path string `json:"path"`
	}
	listArgs struct {
		Path       string `json:"path"`
		ShowHidden bool   `json:"showHidden"`
	}
	readArgs struct {
		Path   string `json:"path"`
		Offset int64  `json:"offset"`
		Length int64  `json:"length"`
	}
	moveArgs struct {
		Path                 string `json:"path"`
		Destination          string `json:"destination"`
		ExpectedModifiedAtMs *int64 `json:"expectedModifiedAtMs"`
		Overwrite            bool   `json:"overwrite"`
	}
	previewArgs struct {
		Path      string `json:"path"`
		Recursive bool   `json:"recursive"`
	}
	deleteArgs struct {
		Path              string `json:"path"`
		Confirm           string `json:"confirm"`
		ConfirmationToken string `json:"confirmationToken"`
	}
)

// Table returns the fs host calls (docs/ABI.md), one entry per operation:
//
//	fs.list           {path, showHidden}                 -> protocol.FSListResult (no mime; each entry also has its path)
//	fs.list_payload   {path, showHidden}                 -> {payloadBlob}: blob = node.fs.list payload JSON
//	fs.stat           {path}                             -> protocol.FSStat (no mime)
//	fs.stat_payload   {path}                             -> {payloadBlob}: blob = node.fs.stat payload JSON
//	fs.read           {path, offset, length}             -> protocol.FSReadCall (bytes in blob)
//	fs.write          protocol.FSWriteCall (data in blob) -> protocol.FSWriteResult
//	fs.mkdir          {path}                             -> protocol.FSMkdirResult
//	fs.move           {path, destination, expectedModifiedAtMs, overwrite} -> protocol.FSMoveResult
//	fs.delete_preview {path, recursive}                  -> protocol.FSDeletePreviewResult (no mime)
//	fs.delete_preview_payload {path, recursive}          -> {payloadBlob}: blob = node.fs.delete.preview payload JSON
//	fs.delete         {path, confirm, confirmationToken} -> protocol.FSDeleteResult
//
// Reads need capability "read"; everything that can lead to a change,
// delete previews included, needs "write".
//
// The _payload variants build the method's whole payload on the host
// (MIME types included) as an invocation blob that the module returns as
// sdk.Result.PayloadBlob without reading it: guest-side JSON costs about
// 1 µs a byte, and a 500-entry listing is ~100 KB (payload.go). fs modules
// from 1.1.0 use them; fs.list, fs.stat and fs.delete_preview stay for
// modules built before, which a controller may still pin.
func (f *FS) Table() hostcalls.Table {
	return hostcalls.Table{
		{Name: "fs.list", Params: []string{"path", "showHidden"}, Capability: hostcalls.CapRead, Audit: hostcalls.AuditRead, Func: f.hcList},
		{Name: "fs.list_payload", Params: []string{"path", "showHidden"}, Capability: hostcalls.CapRead, Audit: hostcalls.AuditRead, Func: f.hcListPayload},
		{Name: "fs.stat", Params: []string{"path"}, Capability: hostcalls.CapRead, Audit: hostcalls.AuditMeta, Func: f.hcStat},
		{Name: "fs.stat_payload", Params: []string{"path"}, Capability: hostcalls.CapRead, Audit: hostcalls.AuditMeta, Func: f.hcStatPayload},
		{Name: "fs.read", Params: []string{"path", "offset", "length"}, Capability: hostcalls.CapRead, Audit: hostcalls.AuditRead, Func: f.hcRead},
		{Name: "fs.write", Params: []string{"path", "blob", "offset", "truncate", "mkdirs", "expectedModifiedAtMs"}, Capability: hostcalls.CapWrite, Audit: hostcalls.AuditMutation, Func: f.hcWrite},
		{Name: "fs.mkdir", Params: []string{"path"}, Capability: hostcalls.CapWrite, Audit: hostcalls.AuditMutation, Func: f.hcMkdir},
		{Name: "fs.move", Params: []string{"path", "destination", "expectedModifiedAtMs", "overwrite"}, Capability: hostcalls.CapWrite, Audit: hostcalls.AuditMutation, Func: f.hcMove},
		{Name: "fs.delete_preview", Params: []string{"path", "recursive"}, Capability: hostcalls.CapWrite, Audit: hostcalls.AuditRead, Func: f.hcPreview},
		{Name: "fs.delete_preview_payload", Params: []string{"path", "recursive"}, Capability: hostcalls.CapWrite, Audit: hostcalls.AuditRead, Func: f.hcPreviewPayload},
		{Name: "fs.delete", Params: []string{"path", "confirm", "confirmationToken"}, Capability: hostcalls.CapWrite, Audit: hostcalls.AuditMutation, Func: f.hcDelete},
	}
}

func encode(v any, err error) ([]byte, error) {
	if err != nil {
		return nil, protocol.AsError(err)
	}
	return json.Marshal(v)
}

func decode(args []byte, v any) error {
	if err := protocol.DecodeParams(args, v); err != nil {
		return err
	}
	return nil
}

func (f *FS) hcList(ctx context.Context, _ hostcalls.Call, args []byte) ([]byte, error) {
	var a listArgs
	if err := decode(args, &a); err != nil {
		return nil, err
	}
	return encode(f.do(ctx, "list", false, func() (any, error) {
		r, err := f.List(a.Path, a.ShowHidden)
		if err != nil {
			return nil, err
		}
		return legacyList(r), nil
	}))
}

// legacyListResult is the fs.list result as fs modules before 1.1.0
// decode it: they take each entry's MIME type from a per-entry path, so
// this host call keeps that field for them. node.fs.list payloads built
// by fs.list_payload have no per-entry path (protocol.FSListEntry).
type legacyListResult struct {
	Path      string            `json:"path"`
	Entries   []legacyListEntry `json:"entries"`
	Limit     int               `json:"limit"`
	Truncated bool              `json:"truncated"`
}

type legacyListEntry struct {
	Name  string `json:"name"`
	Error string `json:"error,omitempty"`
	*protocol.FSStat
}

func legacyList(r *protocol.FSListResult) *legacyListResult {
	out := &legacyListResult{Path: r.Path, Entries: make([]legacyListEntry, len(r.Entries)), Limit: r.Limit, Truncated: r.Truncated}
	for i, e := range r.Entries {
		out.Entries[i] = legacyListEntry{Name: e.Name, Error: e.Error}
		if s := e.FSEntryStat; s != nil {
			out.Entries[i].FSStat = &protocol.FSStat{Path: strings.TrimSuffix(r.Path, "/") + "/" + e.Name,
				Type: s.Type, Size: s.Size, MtimeMs: s.MtimeMs, Mode: s.Mode, Readable: s.Readable, Writable: s.Writable}
		}
	}
	return out
}

func (f *FS) hcListPayload(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	var a listArgs
	if err := decode(args, &a); err != nil {
		return nil, err
	}
	v, err := f.do(ctx, "list", false, func() (any, error) { return f.ListPayload(a.Path, a.ShowHidden) })
	return payloadBlob(call, v, err)
}

// payloadBlob stores a payload built by fn as an invocation blob and
// answers {"payloadBlob": id}.
func payloadBlob(call hostcalls.Call, v any, err error) ([]byte, error) {
	if err != nil {
		return nil, protocol.AsError(err)
	}
	b, ok := v.([]byte)
	if !ok {
		return nil, protocol.FSError(protocol.DomainFilesystemError)
	}
	return json.Marshal(payloadCall{PayloadBlob: call.PutBlob(b)})
}

// payloadCall is the result of the _payload host calls.
type payloadCall struct {
	PayloadBlob uint32 `json:"payloadBlob"`
}

func (f *FS) hcStat(ctx context.Context, _ hostcalls.Call, args []byte) ([]byte, error) {
	var a pathArgs
	if err := decode(args, &a); err != nil {
		return nil, err
	}
	return encode(f.do(ctx, "stat", false, func() (any, error) { return f.Stat(a.Path) }))
}

func (f *FS) hcStatPayload(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	var a pathArgs
	if err := decode(args, &a); err != nil {
		return nil, err
	}
	v, err := f.do(ctx, "stat", false, func() (any, error) { return f.StatPayload(a.Path) })
	return payloadBlob(call, v, err)
}

func (f *FS) hcRead(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	var a readArgs
	if err := decode(args, &a); err != nil {
		return nil, err
	}
	return encode(f.do(ctx, "read", false, func() (any, error) {
		return f.read(a.Path, a.Offset, a.Length, call.Invocation().MaxResultBytes, call.PutBlob)
	}))
}

func (f *FS) hcWrite(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	var a protocol.FSWriteCall
	if err := decode(args, &a); err != nil {
		return nil, err
	}
	data, ok := call.Blob(a.Blob)
	if !ok {
		return nil, protocol.InvalidParams("dataBase64", "dataBase64 is required")
	}
	if len(data) > protocol.FSMaxWriteBytes {
		return nil, protocol.InvalidParams("dataBase64", "dataBase64 decodes to more than 1048576 bytes")
	}
	return encode(f.do(ctx, "write", true, func() (any, error) { return f.Write(a, data) }))
}

func (f *FS) hcMkdir(ctx context.Context, _ hostcalls.Call, args []byte) ([]byte, error) {
	var a pathArgs
	if err := decode(args, &a); err != nil {
		return nil, err
	}
	return encode(f.do(ctx, "mkdir", true, func() (any, error) { return f.Mkdir(a.Path) }))
}

func (f *FS) hcMove(ctx context.Context, _ hostcalls.Call, args []byte) ([]byte, error) {
	var a moveArgs
	if err := decode(args, &a); err != nil {
		return nil, err
	}
	if a.ExpectedModifiedAtMs == nil {
		return nil, protocol.InvalidParams("expectedModifiedAtMs", "expectedModifiedAtMs is required")
	}
	return encode(f.do(ctx, "move", true, func() (any, error) {
		return f.Move(a.Path, a.Destination, *a.ExpectedModifiedAtMs, a.Overwrite)
	}))
}

func (f *FS) hcPreview(ctx context.Context, _ hostcalls.Call, args []byte) ([]byte, error) {
	var a previewArgs
	if err := decode(args, &a); err != nil {
		return nil, err
	}
	return encode(f.do(ctx, "delete_preview", false, func() (any, error) { return f.Preview(a.Path, a.Recursive) }))
}

func (f *FS) hcPreviewPayload(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	var a previewArgs
	if err := decode(args, &a); err != nil {
		return nil, err
	}
	v, err := f.do(ctx, "delete_preview", false, func() (any, error) { return f.PreviewPayload(a.Path, a.Recursive) })
	return payloadBlob(call, v, err)
}

func (f *FS) hcDelete(ctx context.Context, _ hostcalls.Call, args []byte) ([]byte, error) {
	var a deleteArgs
	if err := decode(args, &a); err != nil {
		return nil, err
	}
	if a.ConfirmationToken == "" || len(a.ConfirmationToken) > protocol.MaxConfirmationTokenBytes {
		return nil, protocol.InvalidParams("confirmationToken", "confirmationToken is required")
	}
	return encode(f.do(ctx, "delete", true, func() (any, error) { return f.Delete(a.Path, a.Confirm, a.ConfirmationToken) }))
}
