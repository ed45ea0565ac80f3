package fs

import (
	"context"
	"strings"

	"lemon/hostcalls"
	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// Table returns the fs host calls (docs/HOSTCALLS.md). Their argument and
// result types are lemon/hostcalls/contract's FS* types, shared with the
// guest SDK (plugins/sdk/fs).
//
// Reads need capability "read"; everything that can lead to a change,
// delete previews included, needs "write".
//
// The _payload variants build the method's whole payload on the host
// (MIME types included) as an invocation blob that the module returns as
// sdk.Result.PayloadBlob without reading it: guest-side JSON costs about
// 1 µs a byte, and a 500-entry listing is ~100 KB (payload.go). fs modules
// from 1.1.0 use them; fs.list and fs.stat stay for modules built before,
// which a controller may still pin. The mutation primitives (fs.write_at,
// fs.mkdirs, fs.rename, fs.walk, fs.remove) are in prim_mut*.go.
func (f *FS) Table() hostcalls.Table {
	read, write := hostcalls.CapRead, hostcalls.CapWrite
	return hostcalls.Table{
		hostcalls.Define(contract.FSList, read, hostcalls.AuditRead, f.hcList, listErrors...),
		hostcalls.Define(contract.FSListPayload, read, hostcalls.AuditRead, f.hcListPayload, listErrors...),
		hostcalls.Define(contract.FSStatCall, read, hostcalls.AuditMeta, f.hcStat, statErrors...),
		hostcalls.Define(contract.FSStatPayload, read, hostcalls.AuditMeta, f.hcStatPayload, statErrors...),
		hostcalls.Define(contract.FSRead, read, hostcalls.AuditRead, f.hcRead, readErrors...),
		hostcalls.Define(contract.FSWriteAt, write, hostcalls.AuditMutation, f.hcWriteAt, writeAtErrors...),
		hostcalls.Define(contract.FSMkdirs, write, hostcalls.AuditMutation, f.hcMkdirs, mkdirsErrors...),
		hostcalls.Define(contract.FSRename, write, hostcalls.AuditMutation, f.hcRename, renameErrors...),
		hostcalls.Define(contract.FSWalk, write, hostcalls.AuditRead, f.hcWalk, walkErrors...),
		hostcalls.Define(contract.FSRemove, write, hostcalls.AuditMutation, f.hcRemove, removeErrors...),
		hostcalls.Define(contract.FSSend, read, hostcalls.AuditRead, f.hcSend, sendErrors...),
		hostcalls.Define(contract.FSReceive, write, hostcalls.AuditMutation, f.hcReceive, receiveErrors...),
	}
}

// The errors of the fs host calls, as data for docs/HOSTCALLS.md.
var (
	pathErrors = []hostcalls.ErrorSpec{
		hostcalls.Err(protocol.FSError(protocol.DomainInvalidPath), "path is empty, too long, not UTF-8 or has NUL"),
		hostcalls.Err(protocol.FSError(protocol.DomainNameTooLong), "a path component is too long"),
		hostcalls.Err(protocol.FSError(protocol.DomainPathNotAllowed), "path resolves outside the allowed roots"),
		hostcalls.Err(protocol.FSError(protocol.DomainPermissionDenied), "the OS refuses access"),
		hostcalls.Err(protocol.FSError(protocol.DomainFilesystemBusy), "the family is closing (retry safe)"),
		hostcalls.Err(protocol.FSOutcomeUnknown(false), "the request deadline passed during the operation"),
		hostcalls.Err(protocol.FSError(protocol.DomainFilesystemError), "any other OS failure"),
	}
	statErrors = append(pathErrors[:len(pathErrors):len(pathErrors)],
		hostcalls.Err(protocol.FSError(protocol.DomainNotFound), "path does not exist"))
	listErrors = append(statErrors[:len(statErrors):len(statErrors)],
		hostcalls.Err(protocol.FSError(protocol.DomainNotDirectory), "path is not a directory"))
	readErrors = append(statErrors[:len(statErrors):len(statErrors)],
		hostcalls.Err(protocol.InvalidParams("offset", ""), "offset is not 0 to 9007199254740991"),
		hostcalls.Err(protocol.InvalidParams("length", ""), "length is not 1 to 1048576"),
		hostcalls.Err(protocol.FSError(protocol.DomainNotRegularFile), "path is not a regular file"))
)

// run runs fn through f.do and returns its result by value; an error is
// a *protocol.Error.
func run[R any](ctx context.Context, f *FS, op string, mutation bool, fn func() (*R, error)) (R, error) {
	var zero R
	v, err := f.do(ctx, op, mutation, func() (any, error) { return fn() })
	if err != nil {
		return zero, protocol.AsError(err)
	}
	r, ok := v.(*R)
	if !ok || r == nil {
		return zero, protocol.FSError(protocol.DomainFilesystemError)
	}
	return *r, nil
}

func (fs *FS) hcList(ctx context.Context, call hostcalls.Call, a contract.FSListArgs) (contract.FSListResult, error) {
	f, release, err := fs.For(call)
	if err != nil {
		return contract.FSListResult{}, protocol.AsError(err)
	}
	defer release()
	return run(ctx, f, "list", false, func() (*contract.FSListResult, error) {
		r, err := f.List(a.Path, a.ShowHidden)
		if err != nil {
			return nil, err
		}
		return legacyList(r), nil
	})
}

// legacyList is the fs.list result as fs modules before 1.1.0 decode it:
// they take each entry's MIME type from a per-entry path, so this host
// call keeps that field for them. node.fs.list payloads built by
// fs.list_payload have no per-entry path (protocol.FSListEntry).
func legacyList(r *protocol.FSListResult) *contract.FSListResult {
	out := &contract.FSListResult{Path: r.Path, Entries: make([]contract.FSListEntry, len(r.Entries)), Limit: r.Limit, Truncated: r.Truncated}
	for i, e := range r.Entries {
		out.Entries[i] = contract.FSListEntry{Name: e.Name, Error: e.Error}
		if s := e.FSEntryStat; s != nil {
			out.Entries[i].FSStat = &protocol.FSStat{Path: strings.TrimSuffix(r.Path, "/") + "/" + e.Name,
				Type: s.Type, Size: s.Size, MtimeMs: s.MtimeMs, Mode: s.Mode, Readable: s.Readable, Writable: s.Writable}
		}
	}
	return out
}

func (fs *FS) hcListPayload(ctx context.Context, call hostcalls.Call, a contract.FSListArgs) (contract.PayloadResult, error) {
	f, release, err := fs.For(call)
	if err != nil {
		return contract.PayloadResult{}, protocol.AsError(err)
	}
	defer release()
	v, err := f.do(ctx, "list", false, func() (any, error) { return f.ListPayload(a.Path, a.ShowHidden) })
	return payloadBlob(call, v, err)
}

// payloadBlob stores a payload built by fn as an invocation blob and
// answers {"payloadBlob": id}.
func payloadBlob(call hostcalls.Call, v any, err error) (contract.PayloadResult, error) {
	if err != nil {
		return contract.PayloadResult{}, protocol.AsError(err)
	}
	b, ok := v.([]byte)
	if !ok {
		return contract.PayloadResult{}, protocol.FSError(protocol.DomainFilesystemError)
	}
	return contract.PayloadResult{PayloadBlob: call.PutBlob(b)}, nil
}

func (fs *FS) hcStat(ctx context.Context, call hostcalls.Call, a contract.FSPathArgs) (contract.FSStat, error) {
	f, release, err := fs.For(call)
	if err != nil {
		return contract.FSStat{}, protocol.AsError(err)
	}
	defer release()
	return run(ctx, f, "stat", false, func() (*protocol.FSStat, error) { return f.Stat(a.Path) })
}

func (fs *FS) hcStatPayload(ctx context.Context, call hostcalls.Call, a contract.FSPathArgs) (contract.PayloadResult, error) {
	f, release, err := fs.For(call)
	if err != nil {
		return contract.PayloadResult{}, protocol.AsError(err)
	}
	defer release()
	v, err := f.do(ctx, "stat", false, func() (any, error) { return f.StatPayload(a.Path) })
	return payloadBlob(call, v, err)
}

func (fs *FS) hcRead(ctx context.Context, call hostcalls.Call, a contract.FSReadArgs) (contract.FSReadResult, error) {
	f, release, err := fs.For(call)
	if err != nil {
		return contract.FSReadResult{}, protocol.AsError(err)
	}
	defer release()
	length := a.Length
	// The context's max_file_bytes also bounds what one read returns: a
	// longer read is a short chunk, which the spec allows.
	if limit := call.Invocation().Authority.MaxFileBytes; limit > 0 && length > limit {
		length = limit
	}
	return run(ctx, f, "read", false, func() (*protocol.FSReadCall, error) {
		return f.read(a.Path, a.Offset, length, call.Invocation().MaxResultBytes, call.PutBlob)
	})
}
