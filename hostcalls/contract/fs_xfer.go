package contract

// Argument and result types of the bulk transfer primitives (docs/FS.md,
// "Transfers"; docs/HOSTCALLS.md). They are raw shapes, like the mutation
// primitives' (fs_mut.go): the fs module maps the params of
// node.fs.transfer.get and .put to them, decides what a put expects of
// the final name, turns a refused expectation into the spec's error
// (already_exists, revision_conflict) and shapes the payloads. The host
// dials the data connection, streams the bytes (they never enter the
// module), checks their sha256 and compares what it is asked to compare
// atomically with the final rename.
type (
	// FSSendArgs are the args of fs.send: stream the regular file Path
	// from Offset (bytes) over the data connection of DataTicket. With an
	// Offset, the first Offset bytes must have sha256 PrefixSHA256 (else
	// resume_mismatch). Tree streams the directory Path and everything
	// below it as protocol.TransferEntry records (Offset must be 0).
	FSSendArgs struct {
		Path         string `json:"path"`
		Offset       int64  `json:"offset" doc:"bytes already held by the caller, 0 to 9007199254740991"`
		PrefixSHA256 string `json:"prefixSha256" doc:"64 lowercase hex digits: sha256 of the first offset bytes; required with an offset"`
		Tree         bool   `json:"tree" doc:"send a directory tree (offset 0)"`
		DataTicket   string `json:"dataTicket" doc:"64 lowercase hex digits: the data connection's ticket"`
	}

	// FSReceiveArgs are the args of fs.receive: Size bytes from the data
	// connection of DataTicket go to a part file beside Path, are checked
	// against the sender's sha256, get Mode (permission bits, 0 to
	// 0o1777; 0 keeps the part file's 0o600) and MtimeMs (ms since the
	// epoch, ±9007199254740991; 0 keeps the time of the last write), and
	// the part file is renamed to Path. Replace false: the rename is
	// renameat2(RENAME_NOREPLACE) and an existing entry is refused, before
	// any byte moves and again at the rename (precondition_failed, field
	// absent); Expect.Absent says the same. Replace true: the entry is
	// replaced, if it is what Expect says (an mtime range and/or an
	// identity, compared under the locks fs.write_at takes, atomically
	// with the rename; a missing entry is field present). Mkdirs creates
	// missing parents unless Expect requires an existing entry. Resume
	// keeps a part file an interrupted receive left. Tree receives
	// protocol.TransferEntry records into the directory Path (created with
	// its parents); every file is renamed into place under Replace; Size,
	// Mode, MtimeMs, Expect and Resume must then be zero.
	FSReceiveArgs struct {
		Path       string   `json:"path"`
		Size       int64    `json:"size" doc:"bytes, 0 to 9007199254740991"`
		Mode       uint32   `json:"mode" doc:"permission bits 0 to 0o1777 (no setuid or setgid); 0 keeps 0o600"`
		MtimeMs    int64    `json:"mtimeMs" doc:"ms since the epoch, -9007199254740991 to 9007199254740991; 0 keeps the time of the last write"`
		Mkdirs     bool     `json:"mkdirs" doc:"create missing parent directories (not with an expectation of an existing entry)"`
		Resume     bool     `json:"resume" doc:"keep the part file an interrupted receive left"`
		Tree       bool     `json:"tree" doc:"receive a directory tree into path"`
		Replace    bool     `json:"replace" doc:"an existing entry may be replaced (else RENAME_NOREPLACE)"`
		Expect     FSExpect `json:"expect" doc:"what the entry at path must be at the rename; with an mtime or identity, replace is required"`
		DataTicket string   `json:"dataTicket" doc:"64 lowercase hex digits: the data connection's ticket"`
	}

	// FSTransferResult is the result of fs.send and fs.receive: the
	// canonical path, the whole file's size (bytes), sha256 (hex, of every
	// byte, a resumed prefix included), permission bits and mtime (ms
	// since the epoch: a received mtime may lie past what int64 ns hold)
	// and Offset, where this call started (a resumed prefix's length).
	// For a tree: Size is the bytes of all files, SHA256 the tree digest
	// (protocol.TreeDigest) and Files their number.
	FSTransferResult struct {
		Path    string `json:"path" doc:"canonical path"`
		Size    int64  `json:"size" doc:"bytes"`
		SHA256  string `json:"sha256" doc:"hex sha256 of the file, or the tree digest"`
		Mode    uint32 `json:"mode" doc:"permission bits"`
		MtimeMs int64  `json:"mtimeMs" doc:"ms since the epoch"`
		Offset  int64  `json:"offset" doc:"bytes this call did not move (resumed prefix)"`
		Files   int64  `json:"files" doc:"files a tree transfer moved"`
	}
)

// The bulk transfer primitives: fs.send needs capability "read",
// fs.receive "write".
var (
	FSSend    = Call[FSSendArgs, FSTransferResult]{"fs.send"}
	FSReceive = Call[FSReceiveArgs, FSTransferResult]{"fs.receive"}
)

func fsXferSpecs() []Spec {
	return []Spec{
		spec(FSSend, "Streams path (from offset, after checking prefixSha256) over the data connection of dataTicket; returns the whole file's sha256."),
		spec(FSReceive, "Receives size bytes over the data connection of dataTicket into a part file beside path, checks the sender's sha256, sets mode and mtime and renames it into place if the entry there is what replace and expect allow (compared atomically with the rename)."),
	}
}
