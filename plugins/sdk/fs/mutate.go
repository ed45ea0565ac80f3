package fs

import (
	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
)

// The fs mutation primitives (docs/HOSTCALLS.md; contract/fs_mut.go). A
// refused expectation is a *protocol.Error CONFLICT whose details.code is
// contract.FSPreconditionFailed and whose details.field says which
// expectation failed; the module turns it into the spec's error, keeping
// its retrySafe and mutationMayHaveApplied.

// WriteAt writes the bytes of input blob args.Blob at args.Offset of the
// regular file args.Path if it is what args.Expect says (fs.write_at).
func WriteAt(args contract.FSWriteAtArgs) (contract.FSWriteAtResult, error) {
	return sdk.Invoke(fsWriteAt, contract.FSWriteAt, args)
}

// Mkdirs creates directory path and its missing parents (fs.mkdirs).
func Mkdirs(path string) (contract.FSMkdirsResult, error) {
	return sdk.Invoke(fsMkdirs, contract.FSMkdirs, contract.FSMkdirsArgs{Path: path})
}

// Rename moves args.Path to args.Destination if the captured source is
// what args.Expect says (fs.rename).
func Rename(args contract.FSRenameArgs) (contract.FSRenameResult, error) {
	return sdk.Invoke(fsRename, contract.FSRename, args)
}

// Walk counts and digests the tree at args.Path within args' limits
// (fs.walk).
func Walk(args contract.FSWalkArgs) (contract.FSWalkResult, error) {
	return sdk.Invoke(fsWalk, contract.FSWalk, args)
}

// Remove removes the entry at args.Path (its tree with Recursive) only if
// it is still inode (Dev, Ino) with TreeDigest (fs.remove).
func Remove(args contract.FSRemoveArgs) (contract.FSRemoveResult, error) {
	return sdk.Invoke(fsRemove, contract.FSRemove, args)
}
