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

// List lists directory path (fs.list): at most 500 entries in byte order,
// hidden ones only with showHidden. Entries carry no MIME type.
func List(path string, showHidden bool) (contract.FSListResult, error) {
	return sdk.Invoke(fsList, contract.FSList, contract.FSListArgs{Path: path, ShowHidden: showHidden})
}

// ListPayload lists path as List does, into a blob holding the whole
// node.fs.list payload (fs.list_payload); return its id unread as
// sdk.Result.PayloadBlob.
func ListPayload(path string, showHidden bool) (contract.PayloadResult, error) {
	return sdk.Invoke(fsListPayload, contract.FSListPayload, contract.FSListArgs{Path: path, ShowHidden: showHidden})
}

// Stat returns the metadata of path (fs.stat), without a MIME type.
func Stat(path string) (contract.FSStat, error) {
	return sdk.Invoke(fsStat, contract.FSStatCall, contract.FSPathArgs{Path: path})
}

// StatPayload is Stat as a blob holding the whole node.fs.stat payload
// (fs.stat_payload).
func StatPayload(path string) (contract.PayloadResult, error) {
	return sdk.Invoke(fsStatPayload, contract.FSStatPayload, contract.FSPathArgs{Path: path})
}

// Read reads at most length bytes of path from offset (fs.read); the bytes
// are in the blob the result names (put it in sdk.Result.Blobs).
func Read(path string, offset, length int64) (contract.FSReadResult, error) {
	return sdk.Invoke(fsRead, contract.FSRead, contract.FSReadArgs{Path: path, Offset: offset, Length: length})
}

// Send streams path over the data connection of args.DataTicket (fs.send):
// the bytes never enter the module; the result carries their sha256.
func Send(args contract.FSSendArgs) (contract.FSTransferResult, error) {
	return sdk.Invoke(fsSend, contract.FSSend, args)
}

// Receive writes args.Size bytes from the data connection of
// args.DataTicket to args.Path through a part file and renames it into
// place if the entry there is what args.Replace and args.Expect allow
// (fs.receive); a refusal is CONFLICT precondition_failed with
// details.field.
func Receive(args contract.FSReceiveArgs) (contract.FSTransferResult, error) {
	return sdk.Invoke(fsReceive, contract.FSReceive, args)
}
