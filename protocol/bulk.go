package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash"
	"strings"
	"time"
	"unicode/utf8"
)

// Bulk transfers (docs/PROTOCOL.md, "Bulk data connections"): file bytes
// move over a separate WebSocket per transfer, paired by the controller,
// instead of base64 inside JSON frames. The JSON request that starts a
// transfer goes the usual way (scope, authority, routing, the node's gate);
// only the bytes take the data connection.
const (
	// MethodFSTransferGet streams a file from the node (capability read).
	MethodFSTransferGet = "node.fs.transfer.get"
	// MethodFSTransferPut streams a file to the node (capability write):
	// into a part file beside the target, moved into place at the end.
	MethodFSTransferPut = "node.fs.transfer.put"

	// DataPath is appended to the controller's WebSocket URL path to reach
	// its data endpoint (ws://host:7777/ws → ws://host:7777/ws/data).
	DataPath = "/data"
	// HeaderTransferKey carries the caller's 32-byte transfer secret (64
	// lowercase hex); its sha256 is the request's transferKey param.
	HeaderTransferKey = "Lemon-Transfer-Key"
	// HeaderTransferTicket carries the node's one-time ticket (64 hex),
	// which the controller added to the request as dataTicket.
	HeaderTransferTicket = "Lemon-Transfer-Ticket"

	// TransferWaitMs is how long the controller holds a node's data
	// connection for the caller's, and how long a node waits to open its
	// data connection, in milliseconds.
	TransferWaitMs = 10000
	// TransferCallerWaitMs is how long the controller holds a caller's data
	// connection, before the upgrade, for its request to be routed (ms;
	// under the controller's handshake timeout). A request held longer (an
	// approval) gets 404; the caller dials again while it is pending.
	TransferCallerWaitMs = 5000
	// TransferDeadlineMs is the declared deadline of a transfer request: one
	// request moves one whole file (or the rest of one, with resume).
	TransferDeadlineMs = 3_600_000
	// TransferChunkBytes is the largest binary message a sender writes.
	TransferChunkBytes = 1 << 20
	// TransferControlMaxBytes bounds a text message on a data connection.
	TransferControlMaxBytes = 4096
	// TransferMaxPending bounds the data connections the controller holds
	// waiting for their other side.
	TransferMaxPending = 256

	// DomainTransferInterrupted: the data connection ended before the
	// transfer was complete. A put keeps its part file for --resume.
	DomainTransferInterrupted = "transfer_interrupted"
	// DomainChecksumMismatch: the sha256 of the bytes written is not the
	// one the sender announced; nothing was moved into place.
	DomainChecksumMismatch = "checksum_mismatch"
	// DomainResumeMismatch: the prefix to resume from does not have the
	// announced sha256 (the file changed); start again from offset 0.
	DomainResumeMismatch = "resume_mismatch"
	// DomainSizeChanged: the file changed size while it was being read.
	DomainSizeChanged = "size_changed"
)

// FSTransferGetParams are the params of node.fs.transfer.get. Offset > 0
// resumes: the node checks that the first Offset bytes of the file have
// sha256 PrefixSHA256 and sends the rest.
type FSTransferGetParams struct {
	NodeID       string `json:"nodeId,omitempty"`
	Path         string `json:"path"`
	TransferKey  string `json:"transferKey"`
	Offset       int64  `json:"offset,omitempty"`
	PrefixSHA256 string `json:"prefixSha256,omitempty"`
	// Tree sends the directory Path and everything under it as a stream
	// of TransferEntry records (get -r); Offset must be 0.
	Tree       bool   `json:"tree,omitempty"`
	DataTicket string `json:"dataTicket,omitempty"`
}

// FSTransferPutParams are the params of node.fs.transfer.put. Size is the
// whole file's length in bytes; Mode (permission bits, 0 to 0o1777: no setuid or setgid) and
// MtimeMs (ms since the epoch, 0: now) are given to the file before it is
// moved into place. ExpectedModifiedAtMs and Overwrite are node.fs.write's
// and node.fs.move's compare-and-swap rule for the final name: absent or 0
// with Overwrite false requires the name to be free at the end. Resume
// keeps the part file a previous interrupted put left (its prefix is
// checked by the caller against the sha256 the node announces).
type FSTransferPutParams struct {
	NodeID               string `json:"nodeId,omitempty"`
	Path                 string `json:"path"`
	TransferKey          string `json:"transferKey"`
	Size                 int64  `json:"size"`
	Mode                 uint32 `json:"mode,omitempty"`
	MtimeMs              int64  `json:"mtimeMs,omitempty"`
	ExpectedModifiedAtMs int64  `json:"expectedModifiedAtMs,omitempty"`
	Overwrite            bool   `json:"overwrite,omitempty"`
	Mkdirs               bool   `json:"mkdirs,omitempty"`
	Resume               bool   `json:"resume,omitempty"`
	// Tree receives a stream of TransferEntry records into the directory
	// Path (created with its parents), put -r; Size, Mode, MtimeMs,
	// ExpectedModifiedAtMs and Resume must be absent.
	Tree       bool   `json:"tree,omitempty"`
	DataTicket string `json:"dataTicket,omitempty"`
}

// FSTransferResult is the payload of both transfer methods: the canonical
// path, the whole file's size and sha256 (of the bytes the node read or
// wrote, resumed prefix included), its mode and mtime, and where this
// request started (Offset, the resumed prefix's length).
type FSTransferResult struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	SHA256  string `json:"sha256"`
	Mode    uint32 `json:"mode"`
	MtimeMs int64  `json:"mtimeMs"`
	Offset  int64  `json:"offset"`
	// Files is the number of files a tree transfer moved; SHA256 is then
	// the tree digest (TreeDigest) and Size the bytes of all files.
	Files int64 `json:"files,omitempty"`
}

// TransferEntry is one record of a tree transfer (a text message): a
// directory (Dir), a file header (Name, Size, Mode, MtimeMs; then Size
// bytes in binary messages, then a record with SHA256 alone), or the end
// (Done). Name is relative to the tree's root, "/"-separated, without
// "." or ".." components. The first record from the node of a get -r is
// the hello: Size, the bytes of all files, and Files, their number.
type TransferEntry struct {
	Name    string `json:"name,omitempty"`
	Dir     bool   `json:"dir,omitempty"`
	Size    int64  `json:"size,omitempty"`
	Mode    uint32 `json:"mode,omitempty"`
	MtimeMs int64  `json:"mtimeMs,omitempty"`
	SHA256  string `json:"sha256,omitempty"`
	Files   int64  `json:"files,omitempty"`
	Done    bool   `json:"done,omitempty"`
}

// TreeDigest accumulates the digest of a tree transfer: the sha256 of
// "name NUL sha256-hex LF" for each file in stream order. Both ends compute
// it; the node returns it in the JSON result, over the control connection.
type TreeDigest struct{ h hash.Hash }

// Add records one file.
func (d *TreeDigest) Add(name, sum string) {
	if d.h == nil {
		d.h = sha256.New()
	}
	d.h.Write([]byte(name))
	d.h.Write([]byte{0})
	d.h.Write([]byte(sum))
	d.h.Write([]byte{'\n'})
}

// Sum is the digest so far, in hex.
func (d *TreeDigest) Sum() string {
	if d.h == nil {
		d.h = sha256.New()
	}
	return hex.EncodeToString(d.h.Sum(nil))
}

// ValidTreeName reports whether name may name an entry of a tree
// transfer: nonempty, relative, "/"-separated, no empty, "." or ".."
// component, at most FSMaxPathBytes bytes of UTF-8 without NUL.
func ValidTreeName(name string) bool {
	if name == "" || len(name) > FSMaxPathBytes || !utf8.ValidString(name) || strings.IndexByte(name, 0) >= 0 || name[0] == '/' {
		return false
	}
	for _, c := range strings.Split(name, "/") {
		if c == "" || c == "." || c == ".." || len(c) > 255 {
			return false
		}
	}
	return true
}

// TransferHello is the node's first (text) message on a data connection.
// For get: the file's Size, Mode and MtimeMs, and Offset, where the bytes
// start. For put: Offset is the length of the part file kept for resume
// and PrefixSHA256 its sha256; the caller answers with TransferStart.
type TransferHello struct {
	Size         int64  `json:"size"`
	Mode         uint32 `json:"mode,omitempty"`
	MtimeMs      int64  `json:"mtimeMs,omitempty"`
	Offset       int64  `json:"offset"`
	PrefixSHA256 string `json:"prefixSha256,omitempty"`
}

// TransferStart is the caller's answer to a put's hello: Offset is the
// hello's Offset (the prefix matched) or 0 (start again).
type TransferStart struct {
	Offset int64 `json:"offset"`
}

// TransferEnd is the caller's last (text) message of a put, after Size
// bytes: the sha256 of the whole file as the caller has it.
type TransferEnd struct {
	SHA256 string `json:"sha256"`
}

// ValidTransferSecret reports whether s is 64 lowercase hex digits (a
// transferKey, a dataTicket, or the secret behind a transferKey).
func ValidTransferSecret(s string) bool {
	if len(s) != 64 || strings.ToLower(s) != s {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func init() {
	fsErrors[DomainTransferInterrupted] = struct{ code, msg string }{CodeUnavailable, "the transfer's data connection ended before the transfer was complete"}
	fsErrors[DomainChecksumMismatch] = struct{ code, msg string }{CodeConflict, "the bytes received do not have the sender's sha256; nothing was moved into place"}
	fsErrors[DomainResumeMismatch] = struct{ code, msg string }{CodeConflict, "the data to resume from changed; start again from offset 0"}
	fsErrors[DomainSizeChanged] = struct{ code, msg string }{CodeConflict, "the file changed while it was read"}
}

func secretField(field, v string, required bool) *Error {
	if v == "" && !required {
		return nil
	}
	if !ValidTransferSecret(v) {
		return InvalidParams(field, field+" must be 64 lowercase hex digits")
	}
	return nil
}

func offsetField(field string, v int64) *Error {
	if v < 0 || v > FSMaxOffset {
		return InvalidParams(field, field+" must be an integer from 0 to 9007199254740991")
	}
	return nil
}

// ValidMtimeMs reports whether a put may give a file the mtime m (ms
// since the epoch; files from before 1970 have negative ones; 0 means
// now): |m| ≤ FSMaxOffset.
func ValidMtimeMs(m int64) bool { return m >= -FSMaxOffset && m <= FSMaxOffset }

func mtimeField(v int64) *Error {
	if !ValidMtimeMs(v) {
		return InvalidParams("mtimeMs", "mtimeMs must be an integer from -9007199254740991 to 9007199254740991")
	}
	return nil
}

// ValidateFSTransferGet checks node.fs.transfer.get params.
func ValidateFSTransferGet(params json.RawMessage) *Error {
	var p FSTransferGetParams
	if e := DecodeParams(params, &p); e != nil {
		return e
	}
	if e := RequireNodeID(p.NodeID); e != nil {
		return e
	}
	if e := ValidateFSPath("path", p.Path); e != nil {
		return e
	}
	for _, e := range []*Error{secretField("transferKey", p.TransferKey, true), offsetField("offset", p.Offset),
		secretField("prefixSha256", p.PrefixSHA256, p.Offset > 0), secretField("dataTicket", p.DataTicket, false)} {
		if e != nil {
			return e
		}
	}
	if p.Tree && (p.Offset != 0 || p.PrefixSHA256 != "") {
		return InvalidParams("offset", "a tree transfer takes no offset or prefixSha256")
	}
	return nil
}

// ValidateFSTransferPut checks node.fs.transfer.put params.
func ValidateFSTransferPut(params json.RawMessage) *Error {
	var p FSTransferPutParams
	if e := DecodeParams(params, &p); e != nil {
		return e
	}
	if e := RequireNodeID(p.NodeID); e != nil {
		return e
	}
	if e := ValidateFSPath("path", p.Path); e != nil {
		return e
	}
	for _, e := range []*Error{secretField("transferKey", p.TransferKey, true), offsetField("size", p.Size),
		mtimeField(p.MtimeMs), offsetField("expectedModifiedAtMs", p.ExpectedModifiedAtMs),
		secretField("dataTicket", p.DataTicket, false)} {
		if e != nil {
			return e
		}
	}
	if !ValidTransferMode(p.Mode) {
		return InvalidParams("mode", "mode must be permission bits, 0 to 0o1777 (no setuid or setgid)")
	}
	if p.Tree && (p.Size != 0 || p.Mode != 0 || p.MtimeMs != 0 || p.ExpectedModifiedAtMs != 0 || p.Resume) {
		return InvalidParams("tree", "a tree put takes no size, mode, mtimeMs, expectedModifiedAtMs or resume")
	}
	return nil
}

// ValidTransferMode reports whether a put may give a file mode m:
// permission bits and the sticky bit, never setuid or setgid (0o6000): a
// transfer copies data, it does not hand out privileges on the node
// (docs/FS.md, "Transfers").
func ValidTransferMode(m uint32) bool { return m <= 0o7777 && m&0o6000 == 0 }

func init() {
	deadline := func(json.RawMessage) time.Duration { return TransferDeadlineMs * time.Millisecond }
	RegisterMethod(MethodSpec{Name: MethodFSTransferGet, Version: 1, Validate: ValidateFSTransferGet, Deadline: deadline})
	RegisterMethod(MethodSpec{Name: MethodFSTransferPut, Version: 1, Validate: ValidateFSTransferPut, Deadline: deadline})
	pureReads[MethodFSTransferGet] = true
}
