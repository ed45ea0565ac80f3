package fs

import (
	"context"

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
// The read primitives (fs.open, fs.readdir, fs.statat, fs.pread,
// fs.close; prim_read.go) hand out raw figures on handles: the module
// shapes node.fs.stat, list and read payloads from them. The mutation
// primitives (fs.write_at, fs.mkdirs, fs.rename, fs.walk, fs.remove;
// prim_mut*.go) compare what the module asks atomically with the effect:
// the module holds the CAS decisions, move rules and preview tokens.
func (f *FS) Table() hostcalls.Table {
	read, write := hostcalls.CapRead, hostcalls.CapWrite
	return append(f.readTable(), hostcalls.Table{
		hostcalls.Define(contract.FSRead, read, hostcalls.AuditRead, f.hcRead, readErrors...),
		hostcalls.Define(contract.FSWriteAt, write, hostcalls.AuditMutation, f.hcWriteAt, writeAtErrors...),
		hostcalls.Define(contract.FSMkdirs, write, hostcalls.AuditMutation, f.hcMkdirs, mkdirsErrors...),
		hostcalls.Define(contract.FSRename, write, hostcalls.AuditMutation, f.hcRename, renameErrors...),
		hostcalls.Define(contract.FSWalk, write, hostcalls.AuditRead, f.hcWalk, walkErrors...),
		hostcalls.Define(contract.FSRemove, write, hostcalls.AuditMutation, f.hcRemove, removeErrors...),
		hostcalls.Define(contract.FSSend, read, hostcalls.AuditRead, f.hcSend, sendErrors...),
		hostcalls.Define(contract.FSReceive, write, hostcalls.AuditMutation, f.hcReceive, receiveErrors...),
	}...)
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
	return run(ctx, f, "read", false, func() (*contract.FSReadResult, error) {
		return f.read(a.Path, a.Offset, length, call.Invocation().MaxResultBytes, call.PutBlob)
	})
}
