// Package blob reads and hashes an invocation's non-secret blobs (input
// blobs, fs.read chunks, process output) through the blob.* host calls
// (docs/PLUGINS.md, "Logging, panics, blobs and settings"). Secret blobs
// (a vault value) are refused FORBIDDEN: their bytes never reach a module.
//
// A module that uses it lists the calls it makes in its manifest
// (HostCalls below lists them all).
package blob

import (
	"lemon/hostcalls/contract"
	"lemon/hostcalls/guestcall"
	"lemon/plugins/sdk"
)

// HostCalls are every import of this package, for sdk.Manifest.HostCalls.
var HostCalls = []string{guestcall.BlobRead, guestcall.BlobSHA256,
	guestcall.HashUpdate, guestcall.HashSum, guestcall.BlobFree}

// Digest is a SHA-256 in lowercase hex and the bytes it covers.
type Digest = guestcall.Digest

// Read returns up to length bytes (1..guestcall.MaxBlobRead) of blob id
// from offset (0..size); fewer at the end, none at offset == size.
func Read(id uint32, offset, length int64) ([]byte, error) {
	return sdk.CallRaw(blobRead, guestcall.BlobReadArgs{Blob: id, Offset: offset, Length: length})
}

// ReadAll returns the whole of blob id of size bytes (sdk.Blob.Size), in
// chunks of at most guestcall.MaxBlobRead.
func ReadAll(id uint32, size int) ([]byte, error) {
	out := make([]byte, 0, size)
	for len(out) < size {
		b, err := Read(id, int64(len(out)), int64(min(size-len(out), guestcall.MaxBlobRead)))
		if err != nil {
			return nil, err
		}
		if len(b) == 0 {
			break
		}
		out = append(out, b...)
	}
	return out, nil
}

// SHA256 hashes blob id on the host.
func SHA256(id uint32) (Digest, error) {
	return sdk.InvokeJSON(blobSHA256, contract.BlobSHA256Call, guestcall.BlobArgs{Blob: id})
}

// Free forgets blob id before the invocation ends.
func Free(id uint32) error {
	_, err := sdk.InvokeJSON(blobFree, contract.BlobFreeCall, guestcall.BlobArgs{Blob: id})
	return err
}

// Hash is a SHA-256 kept on the host over blobs fed to it in turn (a
// file read chunk by chunk with fs.read). The zero value is empty.
type Hash struct {
	state uint32
	size  int64
}

// Write hashes blob id; free forgets the blob afterwards.
func (h *Hash) Write(id uint32, free bool) error {
	st, err := sdk.InvokeJSON(hashUpdate, contract.HashUpdateCall, guestcall.HashUpdateArgs{State: h.state, Blob: id, Free: free})
	if err != nil {
		return err
	}
	h.state, h.size = st.State, st.Size
	return nil
}

// Size is the number of bytes hashed so far.
func (h *Hash) Size() int64 { return h.size }

// Sum finishes the hash; h is empty again afterwards.
func (h *Hash) Sum() (Digest, error) {
	d, err := sdk.InvokeJSON(hashSum, contract.HashSumCall, guestcall.HashSumArgs{State: h.state})
	*h = Hash{}
	return d, err
}
