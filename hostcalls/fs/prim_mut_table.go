package fs

import (
	"context"

	"lemon/hostcalls"
	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// The errors of the fs mutation primitives, as data for docs/HOSTCALLS.md.
var (
	errPreconditionSpec = func(when string) hostcalls.ErrorSpec {
		return hostcalls.Err(errPrecondition(""), when)
	}
	writeAtErrors = append(statErrors[:len(statErrors):len(statErrors)],
		hostcalls.Err(errFileLimit, "offset + the data's length is more than the execution context's max_file_bytes"),
		hostcalls.Err(protocol.InvalidParams("blob", ""), "blob names no input blob, or holds more than 1048576 bytes"),
		hostcalls.Err(protocol.InvalidParams("expect", ""), "expect.absent together with an mtime or an identity"),
		hostcalls.Err(protocol.FSError(protocol.DomainNotRegularFile), "path is not a regular file"),
		errPreconditionSpec("the file is not what expect says (details.field absent, present, mtime or identity); nothing was written"))
	mkdirsErrors = append(pathErrors[:len(pathErrors):len(pathErrors)],
		hostcalls.Err(protocol.FSError(protocol.DomainNotFound), "a parent vanished while it was created"),
		hostcalls.Err(protocol.FSError(protocol.DomainNotDirectory), "a parent is not a directory"))
	renameErrors = append(statErrors[:len(statErrors):len(statErrors)],
		hostcalls.Err(protocol.InvalidParams("destination", ""), "destination is inside the source"),
		errPreconditionSpec("the captured source is not what expect says (details.field identity or mtime), or the destination exists (destination); nothing moved"),
		hostcalls.Err(protocol.FSError(protocol.DomainCrossDevice), "destination is on another filesystem"),
		hostcalls.Err(protocol.FSError(protocol.DomainAtomicMoveUnavailable), "the filesystem cannot move atomically without replacing"))
	// writeErrors are the write errors fs.receive shares (bulk.go): it
	// keeps its own compare-and-swap on expectedModifiedAtMs.
	writeErrors = append(statErrors[:len(statErrors):len(statErrors)],
		hostcalls.Err(errFileLimit, "offset + the data's length is more than the execution context's max_file_bytes"),
		hostcalls.Err(protocol.InvalidParams("dataBase64", ""), "blob names no input blob, or holds more than 1048576 bytes"),
		hostcalls.Err(protocol.FSError(protocol.DomainNotRegularFile), "path is not a regular file"),
		hostcalls.Err(protocol.FSError(protocol.DomainRevisionConflict), "expectedModifiedAtMs does not match the file"))
	walkErrors = append(statErrors[:len(statErrors):len(statErrors)],
		hostcalls.Err(protocol.InvalidParams("maxEntries", ""), "a limit is out of its range (maxEntries, maxDepth, maxBytes, entryOverhead)"))
	removeErrors = append(statErrors[:len(statErrors):len(statErrors)],
		hostcalls.Err(protocol.InvalidParams("maxEntries", ""), "a limit is out of its range (maxEntries, maxDepth, maxBytes, entryOverhead)"),
		hostcalls.Err(protocol.FSError(protocol.DomainAtomicMoveUnavailable), "the filesystem cannot capture the entry atomically"),
		errPreconditionSpec("the entry is gone (details.field present) or is not inode (dev, ino) with treeDigest (identity); with mutationMayHaveApplied when it changed during the removal"))
)

// errFileLimit refuses a write that would end past the execution
// context's max_file_bytes.
var errFileLimit = protocol.DomainError(protocol.CodeForbidden, protocol.DomainLimitExceeded,
	"the write would make the file larger than the execution context's max_file_bytes").WithRetry(false, false)

func (fs *FS) hcWriteAt(ctx context.Context, call hostcalls.Call, a contract.FSWriteAtArgs) (contract.FSWriteAtResult, error) {
	f, release, err := fs.For(call)
	if err != nil {
		return contract.FSWriteAtResult{}, protocol.AsError(err)
	}
	defer release()
	data, ok := call.Blob(a.Blob)
	if !ok {
		return contract.FSWriteAtResult{}, protocol.InvalidParams("blob", "blob names no input blob")
	}
	if len(data) > protocol.FSMaxWriteBytes {
		return contract.FSWriteAtResult{}, protocol.InvalidParams("blob", "the blob holds more than 1048576 bytes")
	}
	// The context's max_file_bytes bounds where a write may end: a file
	// never grows past it through this call (docs/FS.md, "Workspaces").
	if limit := call.Invocation().Authority.MaxFileBytes; limit > 0 && (a.Offset < 0 || a.Offset > limit-int64(len(data))) {
		return contract.FSWriteAtResult{}, errFileLimit
	}
	return run(ctx, f, "write", true, func() (*contract.FSWriteAtResult, error) { return f.WriteAt(a, data) })
}

func (fs *FS) hcMkdirs(ctx context.Context, call hostcalls.Call, a contract.FSMkdirsArgs) (contract.FSMkdirsResult, error) {
	f, release, err := fs.For(call)
	if err != nil {
		return contract.FSMkdirsResult{}, protocol.AsError(err)
	}
	defer release()
	return run(ctx, f, "mkdir", true, func() (*contract.FSMkdirsResult, error) { return f.Mkdirs(a.Path) })
}

func (fs *FS) hcRename(ctx context.Context, call hostcalls.Call, a contract.FSRenameArgs) (contract.FSRenameResult, error) {
	f, release, err := fs.For(call)
	if err != nil {
		return contract.FSRenameResult{}, protocol.AsError(err)
	}
	defer release()
	return run(ctx, f, "move", true, func() (*contract.FSRenameResult, error) { return f.Rename(a) })
}

func (fs *FS) hcWalk(ctx context.Context, call hostcalls.Call, a contract.FSWalkArgs) (contract.FSWalkResult, error) {
	f, release, err := fs.For(call)
	if err != nil {
		return contract.FSWalkResult{}, protocol.AsError(err)
	}
	defer release()
	return run(ctx, f, "walk", false, func() (*contract.FSWalkResult, error) { return f.Walk(a) })
}

func (fs *FS) hcRemove(ctx context.Context, call hostcalls.Call, a contract.FSRemoveArgs) (contract.FSRemoveResult, error) {
	f, release, err := fs.For(call)
	if err != nil {
		return contract.FSRemoveResult{}, protocol.AsError(err)
	}
	defer release()
	return run(ctx, f, "remove", true, func() (*contract.FSRemoveResult, error) { return f.Remove(a) })
}
