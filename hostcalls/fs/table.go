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
// shapes node.fs.stat, list and read payloads from them.
func (f *FS) Table() hostcalls.Table {
	read, write := hostcalls.CapRead, hostcalls.CapWrite
	return append(f.readTable(), hostcalls.Table{
		hostcalls.Define(contract.FSRead, read, hostcalls.AuditRead, f.hcRead, readErrors...),
		hostcalls.Define(contract.FSWrite, write, hostcalls.AuditMutation, f.hcWrite, writeErrors...),
		hostcalls.Define(contract.FSMkdir, write, hostcalls.AuditMutation, f.hcMkdir, mkdirErrors...),
		hostcalls.Define(contract.FSMove, write, hostcalls.AuditMutation, f.hcMove, moveErrors...),
		hostcalls.Define(contract.FSDeletePreview, write, hostcalls.AuditRead, f.hcPreview, previewErrors...),
		hostcalls.Define(contract.FSDeletePreviewPayload, write, hostcalls.AuditRead, f.hcPreviewPayload, previewErrors...),
		hostcalls.Define(contract.FSDelete, write, hostcalls.AuditMutation, f.hcDelete, deleteErrors...),
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
	writeErrors = append(statErrors[:len(statErrors):len(statErrors)],
		hostcalls.Err(errFileLimit, "offset + the data's length is more than the execution context's max_file_bytes"),
		hostcalls.Err(protocol.InvalidParams("dataBase64", ""), "blob names no input blob, or holds more than 1048576 bytes"),
		hostcalls.Err(protocol.FSError(protocol.DomainNotRegularFile), "path is not a regular file"),
		hostcalls.Err(protocol.FSError(protocol.DomainRevisionConflict), "expectedModifiedAtMs does not match the file"))
	mkdirErrors = append(pathErrors[:len(pathErrors):len(pathErrors)],
		hostcalls.Err(protocol.FSError(protocol.DomainAlreadyExists), "something other than a directory exists at path"),
		hostcalls.Err(protocol.FSError(protocol.DomainNotDirectory), "a parent is not a directory"))
	moveErrors = append(statErrors[:len(statErrors):len(statErrors)],
		hostcalls.Err(protocol.InvalidParams("expectedModifiedAtMs", ""), "expectedModifiedAtMs is missing"),
		hostcalls.Err(protocol.FSError(protocol.DomainRevisionConflict), "path's mtime is not expectedModifiedAtMs"),
		hostcalls.Err(protocol.FSError(protocol.DomainAlreadyExists), "destination exists and overwrite is false"),
		hostcalls.Err(protocol.FSError(protocol.DomainCrossDevice), "destination is on another filesystem"),
		hostcalls.Err(protocol.FSError(protocol.DomainAtomicMoveUnavailable), "the filesystem cannot move atomically without replacing"))
	previewErrors = append(statErrors[:len(statErrors):len(statErrors)],
		hostcalls.Err(protocol.FSError(protocol.DomainDirectoryNotEmpty), "path is a non-empty directory and recursive is false"),
		hostcalls.Err(protocol.FSError(protocol.DomainPreviewTooLarge), "the tree holds more entries than a preview may count"))
	deleteErrors = append(statErrors[:len(statErrors):len(statErrors)],
		hostcalls.Err(protocol.InvalidParams("confirmationToken", ""), "confirmationToken is missing or too long"),
		hostcalls.Err(protocol.FSError(protocol.DomainConfirmationMismatch), "confirm does not name path"),
		hostcalls.Err(protocol.FSError(protocol.DomainStalePreview), "the tree changed since the preview"))
)

// errFileLimit refuses a write that would end past the execution
// context's max_file_bytes.
var errFileLimit = protocol.DomainError(protocol.CodeForbidden, protocol.DomainLimitExceeded,
	"the write would make the file larger than the execution context's max_file_bytes").WithRetry(false, false)

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

func (fs *FS) hcWrite(ctx context.Context, call hostcalls.Call, a contract.FSWriteArgs) (contract.FSWriteResult, error) {
	f, release, err := fs.For(call)
	if err != nil {
		return contract.FSWriteResult{}, protocol.AsError(err)
	}
	defer release()
	data, ok := call.Blob(a.Blob)
	if !ok {
		return contract.FSWriteResult{}, protocol.InvalidParams("dataBase64", "dataBase64 is required")
	}
	if len(data) > protocol.FSMaxWriteBytes {
		return contract.FSWriteResult{}, protocol.InvalidParams("dataBase64", "dataBase64 decodes to more than 1048576 bytes")
	}
	// The context's max_file_bytes bounds where a write may end: a file
	// never grows past it through this call (docs/FS.md, "Workspaces").
	if limit := call.Invocation().Authority.MaxFileBytes; limit > 0 && (a.Offset < 0 || a.Offset > limit-int64(len(data))) {
		return contract.FSWriteResult{}, errFileLimit
	}
	return run(ctx, f, "write", true, func() (*protocol.FSWriteResult, error) { return f.Write(a, data) })
}

func (fs *FS) hcMkdir(ctx context.Context, call hostcalls.Call, a contract.FSPathArgs) (contract.FSMkdirResult, error) {
	f, release, err := fs.For(call)
	if err != nil {
		return contract.FSMkdirResult{}, protocol.AsError(err)
	}
	defer release()
	return run(ctx, f, "mkdir", true, func() (*protocol.FSMkdirResult, error) { return f.Mkdir(a.Path) })
}

func (fs *FS) hcMove(ctx context.Context, call hostcalls.Call, a contract.FSMoveArgs) (contract.FSMoveResult, error) {
	f, release, err := fs.For(call)
	if err != nil {
		return contract.FSMoveResult{}, protocol.AsError(err)
	}
	defer release()
	if a.ExpectedModifiedAtMs == nil {
		return contract.FSMoveResult{}, protocol.InvalidParams("expectedModifiedAtMs", "expectedModifiedAtMs is required")
	}
	return run(ctx, f, "move", true, func() (*protocol.FSMoveResult, error) {
		return f.Move(a.Path, a.Destination, *a.ExpectedModifiedAtMs, a.Overwrite)
	})
}

func (fs *FS) hcPreview(ctx context.Context, call hostcalls.Call, a contract.FSDeletePreviewArgs) (contract.FSDeletePreviewResult, error) {
	f, release, err := fs.For(call)
	if err != nil {
		return contract.FSDeletePreviewResult{}, protocol.AsError(err)
	}
	defer release()
	return run(ctx, f, "delete_preview", false, func() (*protocol.FSDeletePreviewResult, error) { return f.Preview(a.Path, a.Recursive) })
}

func (fs *FS) hcPreviewPayload(ctx context.Context, call hostcalls.Call, a contract.FSDeletePreviewArgs) (contract.PayloadResult, error) {
	f, release, err := fs.For(call)
	if err != nil {
		return contract.PayloadResult{}, protocol.AsError(err)
	}
	defer release()
	v, err := f.do(ctx, "delete_preview", false, func() (any, error) { return f.PreviewPayload(a.Path, a.Recursive) })
	return payloadBlob(call, v, err)
}

func (fs *FS) hcDelete(ctx context.Context, call hostcalls.Call, a contract.FSDeleteArgs) (contract.FSDeleteResult, error) {
	f, release, err := fs.For(call)
	if err != nil {
		return contract.FSDeleteResult{}, protocol.AsError(err)
	}
	defer release()
	if a.ConfirmationToken == "" || len(a.ConfirmationToken) > protocol.MaxConfirmationTokenBytes {
		return contract.FSDeleteResult{}, protocol.InvalidParams("confirmationToken", "confirmationToken is required")
	}
	return run(ctx, f, "delete", true, func() (*protocol.FSDeleteResult, error) { return f.Delete(a.Path, a.Confirm, a.ConfirmationToken) })
}
