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
