package protocol

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// File-operation limits (spec "Destination policy and configuration" and
// "File operations"). Sizes are bytes, times milliseconds.
const (
	// FSMaxPathBytes is the longest accepted path string.
	FSMaxPathBytes = 4096
	// FSMaxNameBytes is the longest single path component (NAME_MAX).
	FSMaxNameBytes = 255
	// FSMaxOffset is the largest read or write offset (2^53 - 1).
	FSMaxOffset = 9007199254740991
	// FSMaxReadLength is the largest read length and the default length.
	FSMaxReadLength = 1048576
	// FSMaxWriteBytes is the largest decoded dataBase64 of one write.
	FSMaxWriteBytes = 1048576
	// FSListLimit is the most entries one node.fs.list returns.
	FSListLimit = 500
	// FSMaxRoots is the most allowed roots a node accepts.
	FSMaxRoots = 64
	// FSPreviewMaxEntries bounds the candidates (target included) of one delete preview.
	FSPreviewMaxEntries = 10000
	// FSPreviewMaxDepth bounds how many directory levels below the target a preview binds.
	FSPreviewMaxDepth = 64
	// FSPreviewMaxBytes bounds the candidate storage of one preview.
	FSPreviewMaxBytes = 8 << 20
	// FSPreviewsMax is the most previews a node retains at once.
	FSPreviewsMax = 128
	// FSPreviewsMaxEntries bounds the bound entries of all retained previews.
	FSPreviewsMaxEntries = 20000
	// FSPreviewsMaxBytes bounds the candidate storage of all retained previews.
	FSPreviewsMaxBytes = 16 << 20
	// FSPreviewTTLMs is how long a confirmation token stays valid.
	FSPreviewTTLMs = 5 * 60 * 1000
	// FSRequestDeadlineMs is the node-side deadline of one file request.
	FSRequestDeadlineMs = 25000
	// FSMaxDescriptors bounds pinned root descriptors and the transient
	// descriptors in use by file requests, each.
	FSMaxDescriptors = 128
)

// Domain codes of the fs family that errors.go does not list.
const (
	// DomainDirectoryNotEmpty: a non-recursive delete preview of a nonempty directory.
	DomainDirectoryNotEmpty = "directory_not_empty"
	// DomainNameTooLong: a path component is longer than the filesystem allows.
	DomainNameTooLong = "name_too_long"
	// DomainCrossDevice: a move between filesystems (no copy fallback).
	DomainCrossDevice = "cross_device"
	// DomainConfirmationMismatch: confirm differs from the previewed path string.
	DomainConfirmationMismatch = "confirmation_mismatch"
	// DomainFilesystemError: any other filesystem failure (I/O error, no space).
	DomainFilesystemError = "filesystem_error"
	// DomainInvalidPath: a path that is empty, too long, not UTF-8 or holds NUL.
	DomainInvalidPath = "invalid_path"
)

// fsErrors maps each fs domain code to its protocol code and safe message.
var fsErrors = map[string]struct{ code, msg string }{
	DomainPathNotAllowed:           {CodeForbidden, "path is outside the allowed roots"},
	DomainNotFound:                 {CodeNotFound, "no such file or directory"},
	DomainNotDirectory:             {CodeInvalidRequest, "a path component is not a directory"},
	DomainNotRegularFile:           {CodeInvalidRequest, "not a regular file"},
	DomainRevisionConflict:         {CodeConflict, "file revision does not match expectedModifiedAtMs"},
	DomainAlreadyExists:            {CodeConflict, "destination already exists"},
	DomainStalePreview:             {CodeConflict, "delete preview is stale, expired or unknown"},
	DomainPreviewTooLarge:          {CodeInvalidRequest, "delete preview exceeds its limits"},
	DomainFilesystemOutcomeUnknown: {CodeTimeout, "filesystem request outcome is unknown"},
	DomainFilesystemBusy:           {CodeUnavailable, "filesystem service is busy"},
	DomainAtomicMoveUnavailable:    {CodeNotImplemented, "atomic no-overwrite rename is unavailable"},
	DomainDirectoryNotEmpty:        {CodeConflict, "directory is not empty; preview with recursive:true"},
	DomainPermissionDenied:         {CodeForbidden, "permission denied"},
	DomainNameTooLong:              {CodeInvalidParams, "a path component is too long"},
	DomainCrossDevice:              {CodeConflict, "source and destination are on different filesystems"},
	DomainConfirmationMismatch:     {CodeInvalidParams, "confirm does not equal the previewed path"},
	DomainFilesystemError:          {CodeUnavailable, "filesystem operation failed"},
	DomainInvalidPath:              {CodeInvalidParams, "path must be nonempty UTF-8 of at most 4096 bytes without NUL"},
}

// FSError builds the error of an fs domain code with its protocol code and a
// fixed message that never holds a path, bytes or OS text. Retry details:
// filesystem_busy is retry-safe with nothing applied; filesystem_outcome_unknown
// is never retry-safe (see FSOutcomeUnknown).
func FSError(domain string) *Error {
	m, ok := fsErrors[domain]
	if !ok {
		return &Error{Code: CodeInternal, Message: "internal error"}
	}
	e := DomainError(m.code, domain, m.msg)
	switch domain {
	case DomainFilesystemBusy:
		e.WithRetry(true, false)
	case DomainInvalidPath, DomainNameTooLong, DomainConfirmationMismatch:
		e.Details.Field = "path"
		if domain == DomainConfirmationMismatch {
			e.Details.Field = "confirm"
		}
	}
	return e
}

// FSOutcomeUnknown is filesystem_outcome_unknown: the request hit the 25 s
// deadline or was interrupted. mutation says whether the method may have
// changed the node; retrySafe is always false (never retry automatically).
func FSOutcomeUnknown(mutation bool) *Error {
	return FSError(DomainFilesystemOutcomeUnknown).WithRetry(false, mutation)
}

// ValidateFSPath checks the spec's path rules: nonempty UTF-8, at most
// FSMaxPathBytes bytes, no NUL. field names the parameter in the error.
// Containment (`..`, roots, symlinks) is the node's job.
func ValidateFSPath(field, p string) *Error {
	if p == "" || len(p) > FSMaxPathBytes || !utf8.ValidString(p) || strings.IndexByte(p, 0) >= 0 {
		e := FSError(DomainInvalidPath)
		e.Details.Field = field
		return e
	}
	return nil
}

func validateOffset(field string, v *int64) *Error {
	if v != nil && (*v < 0 || *v > FSMaxOffset) {
		return InvalidParams(field, field+" must be an integer from 0 to 9007199254740991")
	}
	return nil
}

// FSListParams are the params of node.fs.list.
type FSListParams struct {
	NodeID     string `json:"nodeId"`
	Path       string `json:"path"`
	ShowHidden bool   `json:"showHidden,omitempty"`
}

// FSStatParams are the params of node.fs.stat.
type FSStatParams struct {
	NodeID string `json:"nodeId"`
	Path   string `json:"path"`
}

// FSReadParams are the params of node.fs.read. Offset defaults to 0 and
// Length (bytes, 1..FSMaxReadLength) to FSMaxReadLength.
type FSReadParams struct {
	NodeID string `json:"nodeId"`
	Path   string `json:"path"`
	Offset *int64 `json:"offset,omitempty"`
	Length *int64 `json:"length,omitempty"`
}

// FSWriteParams are the params of node.fs.write. DataBase64 is present on
// the wire; on the node the host has already decoded it into a blob and
// removed it from params (docs/ABI.md inputBlobs). Truncate defaults to
// true; ExpectedModifiedAtMs nil means "target must be missing", 0 too.
type FSWriteParams struct {
	NodeID               string  `json:"nodeId"`
	Path                 string  `json:"path"`
	DataBase64           *string `json:"dataBase64,omitempty"`
	Offset               *int64  `json:"offset,omitempty"`
	Truncate             *bool   `json:"truncate,omitempty"`
	Mkdirs               bool    `json:"mkdirs,omitempty"`
	ExpectedModifiedAtMs *int64  `json:"expectedModifiedAtMs,omitempty"`
}

// FSMkdirParams are the params of node.fs.mkdir.
type FSMkdirParams struct {
	NodeID string `json:"nodeId"`
	Path   string `json:"path"`
}

// FSMoveParams are the params of node.fs.move; ExpectedModifiedAtMs is
// required (the source's observed mtimeMs).
type FSMoveParams struct {
	NodeID               string `json:"nodeId"`
	Path                 string `json:"path"`
	Destination          string `json:"destination"`
	ExpectedModifiedAtMs *int64 `json:"expectedModifiedAtMs"`
	Overwrite            bool   `json:"overwrite,omitempty"`
}

// FSDeletePreviewParams are the params of node.fs.delete.preview.
type FSDeletePreviewParams struct {
	NodeID    string `json:"nodeId"`
	Path      string `json:"path"`
	Recursive bool   `json:"recursive,omitempty"`
}

// FSDeleteParams are the params of node.fs.delete. Confirm must equal the
// path string sent to the preview, byte for byte.
type FSDeleteParams struct {
	NodeID            string `json:"nodeId"`
	Path              string `json:"path"`
	Confirm           string `json:"confirm"`
	ConfirmationToken string `json:"confirmationToken"`
}

// MaxConfirmationTokenBytes bounds confirmationToken (tokens are 43 bytes).
const MaxConfirmationTokenBytes = 128

// checker is decoded params that validate themselves.
type checker[P any] interface {
	*P
	Check() *Error
}

// decodeAndCheck decodes params strictly as P and runs its Check.
func decodeAndCheck[P any, PP checker[P]](params json.RawMessage) *Error {
	var p P
	if err := DecodeParams(params, &p); err != nil {
		return err
	}
	return PP(&p).Check()
}

// ValidateFSList checks node.fs.list params.
func ValidateFSList(params json.RawMessage) *Error { return validateNodePath[FSListParams](params) }

// ValidateFSStat checks node.fs.stat params.
func ValidateFSStat(params json.RawMessage) *Error { return validateNodePath[FSStatParams](params) }

// nodePathParams are params whose only checked fields are nodeId and path.
type nodePathParams interface {
	FSListParams | FSStatParams | FSMkdirParams
}

// validateNodePath decodes params strictly as P and checks its nodeId and
// path.
func validateNodePath[P nodePathParams](params json.RawMessage) *Error {
	var p P
	if err := DecodeParams(params, &p); err != nil {
		return err
	}
	var nodeID, path string
	switch v := any(p).(type) {
	case FSListParams:
		nodeID, path = v.NodeID, v.Path
	case FSStatParams:
		nodeID, path = v.NodeID, v.Path
	case FSMkdirParams:
		nodeID, path = v.NodeID, v.Path
	}
	if err := RequireNodeID(nodeID); err != nil {
		return err
	}
	return ValidateFSPath("path", path)
}

// ValidateFSRead checks node.fs.read params: offset 0..2^53-1, length
// 1..1,048,576.
func ValidateFSRead(params json.RawMessage) *Error { return decodeAndCheck[FSReadParams](params) }

// Check validates decoded read params.
func (p *FSReadParams) Check() *Error {
	if err := RequireNodeID(p.NodeID); err != nil {
		return err
	}
	if err := ValidateFSPath("path", p.Path); err != nil {
		return err
	}
	if err := validateOffset("offset", p.Offset); err != nil {
		return err
	}
	if p.Length != nil && (*p.Length < 1 || *p.Length > FSMaxReadLength) {
		return InvalidParams("length", "length must be an integer from 1 to 1048576")
	}
	return nil
}

// ValidateFSWrite checks node.fs.write params as sent on the wire:
// dataBase64 must be present, strict standard base64, and decode to at most
// FSMaxWriteBytes. Well-formed params take a fast path that checks the
// base64 in place (validateFSWriteFast); it decides exactly as
// validateFSWriteSlow, which everything else takes.
func ValidateFSWrite(params json.RawMessage) *Error {
	if e, ok := validateFSWriteFast(params); ok {
		return e
	}
	return validateFSWriteSlow(params)
}

// validateFSWriteSlow is ValidateFSWrite through DecodeParams.
func validateFSWriteSlow(params json.RawMessage) *Error {
	var p FSWriteParams
	if err := DecodeParams(params, &p); err != nil {
		return err
	}
	if p.DataBase64 == nil {
		return InvalidParams("dataBase64", "dataBase64 is required")
	}
	if base64.StdEncoding.DecodedLen(len(*p.DataBase64)) > FSMaxWriteBytes+2 {
		return InvalidParams("dataBase64", "dataBase64 decodes to more than 1048576 bytes")
	}
	b, err := base64.StdEncoding.Strict().DecodeString(*p.DataBase64)
	if err != nil || strings.ContainsAny(*p.DataBase64, "\r\n") { // Go skips CR and LF even when strict
		return InvalidParams("dataBase64", "dataBase64 is not valid standard base64")
	}
	if len(b) > FSMaxWriteBytes {
		return InvalidParams("dataBase64", "dataBase64 decodes to more than 1048576 bytes")
	}
	return p.Check()
}

// Check validates decoded write params other than dataBase64 (which the
// node receives as a blob).
func (p *FSWriteParams) Check() *Error {
	if err := RequireNodeID(p.NodeID); err != nil {
		return err
	}
	if err := ValidateFSPath("path", p.Path); err != nil {
		return err
	}
	if err := validateOffset("offset", p.Offset); err != nil {
		return err
	}
	return validateOffset("expectedModifiedAtMs", p.ExpectedModifiedAtMs)
}

// ValidateFSMkdir checks node.fs.mkdir params.
func ValidateFSMkdir(params json.RawMessage) *Error { return validateNodePath[FSMkdirParams](params) }

// ValidateFSMove checks node.fs.move params.
func ValidateFSMove(params json.RawMessage) *Error { return decodeAndCheck[FSMoveParams](params) }

// Check validates decoded move params.
func (p *FSMoveParams) Check() *Error {
	if err := RequireNodeID(p.NodeID); err != nil {
		return err
	}
	if err := ValidateFSPath("path", p.Path); err != nil {
		return err
	}
	if err := ValidateFSPath("destination", p.Destination); err != nil {
		return err
	}
	if p.ExpectedModifiedAtMs == nil {
		return InvalidParams("expectedModifiedAtMs", "expectedModifiedAtMs is required")
	}
	return validateOffset("expectedModifiedAtMs", p.ExpectedModifiedAtMs)
}

// ValidateFSDeletePreview checks node.fs.delete.preview params.
func ValidateFSDeletePreview(params json.RawMessage) *Error {
	var p FSDeletePreviewParams
	if err := DecodeParams(params, &p); err != nil {
		return err
	}
	if err := RequireNodeID(p.NodeID); err != nil {
		return err
	}
	return ValidateFSPath("path", p.Path)
}

// ValidateFSDelete checks node.fs.delete params.
func ValidateFSDelete(params json.RawMessage) *Error { return decodeAndCheck[FSDeleteParams](params) }

// Check validates decoded delete params.
func (p *FSDeleteParams) Check() *Error {
	if err := RequireNodeID(p.NodeID); err != nil {
		return err
	}
	if err := ValidateFSPath("path", p.Path); err != nil {
		return err
	}
	if p.Confirm == "" || len(p.Confirm) > FSMaxPathBytes || !utf8.ValidString(p.Confirm) {
		return InvalidParams("confirm", "confirm must be the previewed path string")
	}
	if p.ConfirmationToken == "" || len(p.ConfirmationToken) > MaxConfirmationTokenBytes || !utf8.ValidString(p.ConfirmationToken) {
		return InvalidParams("confirmationToken", "confirmationToken is required")
	}
	return nil
}

// FSStat is a file's metadata (spec node.fs.stat payload; also a preview's
// stat). Path is absolute and canonical; Type is "regular", "directory",
// "symlink", "fifo", "socket", "char_device", "block_device" or "unknown";
// Size is bytes; MtimeMs is the modification time in integer Unix ms (ns
// truncated); Mode is st_mode including the type bits; Mime is inferred
// from the name; Readable/Writable are the worker account's real access
// checks.
type FSStat struct {
	Path     string `json:"path"`
	Type     string `json:"type"`
	Size     int64  `json:"size"`
	MtimeMs  int64  `json:"mtimeMs"`
	Mode     uint32 `json:"mode"`
	Mime     string `json:"mime"`
	Readable bool   `json:"readable"`
	Writable bool   `json:"writable"`
}

// FSEntryStat is the stat fields of a listing entry: those of FSStat
// without Path (an entry is named by Name inside the listing's path; a
// per-entry path would repeat the directory's up to 4 KiB path 500 times
// and could push a listing past the default maxPayload, docs/FS.md).
type FSEntryStat struct {
	Type     string `json:"type"`
	Size     int64  `json:"size"`
	MtimeMs  int64  `json:"mtimeMs"`
	Mode     uint32 `json:"mode"`
	Mime     string `json:"mime"`
	Readable bool   `json:"readable"`
	Writable bool   `json:"writable"`
}

// FSListEntry is one directory entry: {name, type, size, mtimeMs, mode,
// mime, readable, writable}, or {name, error} (a domain code) when the
// entry vanished or became unreadable while listing.
type FSListEntry struct {
	Name  string `json:"name"`
	Error string `json:"error,omitempty"`
	*FSEntryStat
}

// FSListResult is the node.fs.list payload; Limit is always FSListLimit.
type FSListResult struct {
	Path      string        `json:"path"`
	Entries   []FSListEntry `json:"entries"`
	Limit     int           `json:"limit"`
	Truncated bool          `json:"truncated"`
}

// FSReadResult is the node.fs.read payload. Length is the decoded byte
// count of DataBase64; Size the observed file size; EOF is true when
// Offset+Length reaches Size.
type FSReadResult struct {
	Path       string `json:"path"`
	DataBase64 string `json:"dataBase64"`
	Offset     int64  `json:"offset"`
	Length     int64  `json:"length"`
	Size       int64  `json:"size"`
	Mime       string `json:"mime"`
	EOF        bool   `json:"eof"`
}

// FSWriteResult is the node.fs.write payload; MtimeMs is the revision to
// send as the next chunk's expectedModifiedAtMs.
type FSWriteResult struct {
	Path         string `json:"path"`
	Offset       int64  `json:"offset"`
	BytesWritten int64  `json:"bytesWritten"`
	Size         int64  `json:"size"`
	MtimeMs      int64  `json:"mtimeMs"`
}

// FSMkdirResult is the node.fs.mkdir payload.
type FSMkdirResult struct {
	Path    string `json:"path"`
	Created bool   `json:"created"`
}

// FSMoveResult is the node.fs.move payload.
type FSMoveResult struct {
	Path        string `json:"path"`
	Destination string `json:"destination"`
	Moved       bool   `json:"moved"`
}

// FSDeletePreviewResult is the node.fs.delete.preview payload.
// CandidateCount includes the target; ExpiresAtMs is Unix ms.
type FSDeletePreviewResult struct {
	Path              string `json:"path"`
	Stat              FSStat `json:"stat"`
	ChildCount        int    `json:"childCount"`
	ChildrenDigest    string `json:"childrenDigest"`
	CandidateCount    int    `json:"candidateCount"`
	ConfirmationToken string `json:"confirmationToken"`
	ExpiresAtMs       int64  `json:"expiresAtMs"`
}

// FSDeleteResult is the node.fs.delete payload.
type FSDeleteResult struct {
	Path    string `json:"path"`
	Deleted bool   `json:"deleted"`
}

// FSReadCall is the result of host call fs.read: the payload without
// dataBase64 and mime, and Blob, the id of the host-side chunk bytes.
type FSReadCall struct {
	FSReadResult
	Blob uint32 `json:"blob"`
}

// FSWriteCall is the args of host call fs.write: the method params with
// Blob, the id of the decoded dataBase64 blob, in place of the data.
type FSWriteCall struct {
	Path                 string `json:"path"`
	Blob                 uint32 `json:"blob"`
	Offset               int64  `json:"offset"`
	Truncate             bool   `json:"truncate"`
	Mkdirs               bool   `json:"mkdirs"`
	ExpectedModifiedAtMs *int64 `json:"expectedModifiedAtMs,omitempty"`
}

func init() {
	for _, m := range []MethodSpec{
		{Name: "node.fs.list", Version: 1, Validate: ValidateFSList},
		{Name: "node.fs.stat", Version: 1, Validate: ValidateFSStat},
		{Name: "node.fs.read", Version: 1, Validate: ValidateFSRead},
		{Name: "node.fs.write", Version: 1, Validate: ValidateFSWrite},
		{Name: "node.fs.mkdir", Version: 1, Validate: ValidateFSMkdir},
		{Name: "node.fs.move", Version: 1, Validate: ValidateFSMove},
		{Name: "node.fs.delete.preview", Version: 1, Validate: ValidateFSDeletePreview},
		{Name: "node.fs.delete", Version: 1, Validate: ValidateFSDelete},
	} {
		RegisterMethod(m)
	}
}
