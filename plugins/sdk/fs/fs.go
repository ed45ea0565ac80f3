// Package fs is the typed guest wrapper of the fs host calls
// (docs/HOSTCALLS.md): one function per call, with the argument and result
// types of lemon/hostcalls/contract that the host's table decodes and
// encodes. Paths are the caller's strings, resolved by the node against
// its allowed roots. A module calling a function must list the call in
// its manifest's HostCalls and hold its capability ("read" or "write").
// Errors are *protocol.Error values.
package fs

import (
	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
)

// Read reads at most length bytes of path from offset (fs.read: Open and
// PRead in one call, no handle kept); the bytes are in the blob the result
// names (put it in sdk.Result.Blobs).
func Read(path string, offset, length int64) (contract.FSReadResult, error) {
	return sdk.Invoke(fsRead, contract.FSRead, contract.FSReadArgs{Path: path, Offset: offset, Length: length})
}

// Write writes the bytes of input blob args.Blob to args.Path (fs.write).
func Write(args contract.FSWriteArgs) (contract.FSWriteResult, error) {
	return sdk.Invoke(fsWrite, contract.FSWrite, args)
}

// Mkdir creates directory path, parents included (fs.mkdir).
func Mkdir(path string) (contract.FSMkdirResult, error) {
	return sdk.Invoke(fsMkdir, contract.FSMkdir, contract.FSPathArgs{Path: path})
}

// Move moves path to destination if its mtime is still
// expectedModifiedAtMs (ms since the epoch); overwrite replaces an
// existing destination (fs.move).
func Move(path, destination string, expectedModifiedAtMs int64, overwrite bool) (contract.FSMoveResult, error) {
	return sdk.Invoke(fsMove, contract.FSMove, contract.FSMoveArgs{Path: path, Destination: destination,
		ExpectedModifiedAtMs: &expectedModifiedAtMs, Overwrite: overwrite})
}

// DeletePreview counts what deleting path would remove and returns the
// confirmation token Delete needs (fs.delete_preview).
func DeletePreview(path string, recursive bool) (contract.FSDeletePreviewResult, error) {
	return sdk.Invoke(fsDeletePreview, contract.FSDeletePreview, contract.FSDeletePreviewArgs{Path: path, Recursive: recursive})
}

// DeletePreviewPayload is DeletePreview as a blob holding the whole
// node.fs.delete.preview payload (fs.delete_preview_payload).
func DeletePreviewPayload(path string, recursive bool) (contract.PayloadResult, error) {
	return sdk.Invoke(fsDeletePreviewPayload, contract.FSDeletePreviewPayload, contract.FSDeletePreviewArgs{Path: path, Recursive: recursive})
}

// Delete deletes path if confirmationToken (from a preview) still matches
// (fs.delete).
func Delete(path, confirm, confirmationToken string) (contract.FSDeleteResult, error) {
	return sdk.Invoke(fsDelete, contract.FSDelete, contract.FSDeleteArgs{Path: path, Confirm: confirm, ConfirmationToken: confirmationToken})
}

// Send streams path over the data connection of args.DataTicket (fs.send):
// the bytes never enter the module; the result carries their sha256.
func Send(args contract.FSSendArgs) (contract.FSTransferResult, error) {
	return sdk.Invoke(fsSend, contract.FSSend, args)
}

// Receive writes args.Size bytes from the data connection of
// args.DataTicket to args.Path through a part file (fs.receive).
func Receive(args contract.FSReceiveArgs) (contract.FSTransferResult, error) {
	return sdk.Invoke(fsReceive, contract.FSReceive, args)
}
