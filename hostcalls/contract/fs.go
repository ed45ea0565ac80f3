package contract

import "lemon/protocol"

// Argument and result types of the fs host calls. Paths are the caller's
// strings; the host re-validates everything a module checked.
type (
	// FSPathArgs are the args of fs.mkdir.
	FSPathArgs struct {
		Path string `json:"path"`
	}
	// FSReadArgs are the args of fs.read: Offset and Length in bytes.
	FSReadArgs struct {
		Path   string `json:"path"`
		Offset int64  `json:"offset" doc:"byte offset to read from, 0 to 9007199254740991"`
		Length int64  `json:"length" doc:"bytes to read, 1 to 1048576"`
	}
	// FSWriteArgs are the args of fs.write: the method params with Blob,
	// the id of the decoded dataBase64 input blob, in place of the data.
	FSWriteArgs = protocol.FSWriteCall
	// FSMoveArgs are the args of fs.move; ExpectedModifiedAtMs is required.
	FSMoveArgs struct {
		Path                 string `json:"path"`
		Destination          string `json:"destination"`
		ExpectedModifiedAtMs *int64 `json:"expectedModifiedAtMs" doc:"required: the mtime (ms since the epoch) path must still have"`
		Overwrite            bool   `json:"overwrite" doc:"replace an existing destination"`
	}
	// FSDeletePreviewArgs are the args of fs.delete_preview and
	// fs.delete_preview_payload.
	FSDeletePreviewArgs struct {
		Path      string `json:"path"`
		Recursive bool   `json:"recursive" doc:"count a non-empty directory's whole tree"`
	}
	// FSDeleteArgs are the args of fs.delete: ConfirmationToken comes from
	// a preview of the same path.
	FSDeleteArgs struct {
		Path              string `json:"path"`
		Confirm           string `json:"confirm" doc:"must name path, as the preview returned it"`
		ConfirmationToken string `json:"confirmationToken" doc:"the token of a preview of path"`
	}

	// FSWriteResult is the result of fs.write.
	FSWriteResult = protocol.FSWriteResult
	// FSMkdirResult is the result of fs.mkdir.
	FSMkdirResult = protocol.FSMkdirResult
	// FSMoveResult is the result of fs.move.
	FSMoveResult = protocol.FSMoveResult
	// FSDeletePreviewResult is the result of fs.delete_preview (no mime).
	FSDeletePreviewResult = protocol.FSDeletePreviewResult
	// FSDeleteResult is the result of fs.delete.
	FSDeleteResult = protocol.FSDeleteResult
)

// The fs host calls. Reads need capability "read"; everything that can
// lead to a change, delete previews included, needs "write". The read
// primitives on handles (fs.open, fs.readdir, fs.statat, fs.pread) are in
// fs_read.go.
var (
	FSRead                 = Call[FSReadArgs, FSReadResult]{"fs.read"}
	FSWrite                = Call[FSWriteArgs, FSWriteResult]{"fs.write"}
	FSMkdir                = Call[FSPathArgs, FSMkdirResult]{"fs.mkdir"}
	FSMove                 = Call[FSMoveArgs, FSMoveResult]{"fs.move"}
	FSDeletePreview        = Call[FSDeletePreviewArgs, FSDeletePreviewResult]{"fs.delete_preview"}
	FSDeletePreviewPayload = Call[FSDeletePreviewArgs, PayloadResult]{"fs.delete_preview_payload"}
	FSDelete               = Call[FSDeleteArgs, FSDeleteResult]{"fs.delete"}
	FSSend                 = Call[FSSendArgs, FSTransferResult]{"fs.send"}
	FSReceive              = Call[FSReceiveArgs, FSTransferResult]{"fs.receive"}
)

// Argument and result types of the bulk transfer host calls (the params
// of node.fs.transfer.get and .put, dataTicket included).
type (
	FSSendArgs       = protocol.FSTransferGetParams
	FSReceiveArgs    = protocol.FSTransferPutParams
	FSTransferResult = protocol.FSTransferResult
)

func fsSpecs() []Spec {
	return append(fsReadSpecs(),
		spec(FSRead, "Reads at most length bytes of path from offset (fs.open and fs.pread in one call, no handle kept); the bytes go to an invocation blob, sized so their base64 fits the request's result room."),
		spec(FSWrite, "Writes the bytes of input blob blob at offset (truncating after them when truncate), creating parents when mkdirs; expectedModifiedAtMs, when set, must match the file's mtime."),
		spec(FSMkdir, "Creates one directory (parents included)."),
		spec(FSMove, "Moves path to destination if path's mtime is still expectedModifiedAtMs; overwrite replaces an existing destination."),
		spec(FSDeletePreview, "Counts what deleting path would remove and returns the confirmation token fs.delete needs. Kept for fs modules before 1.1.0; use fs.delete_preview_payload."),
		spec(FSDeletePreviewPayload, "fs.delete_preview, as a whole node.fs.delete.preview payload in an invocation blob."),
		spec(FSDelete, "Deletes path if confirmationToken still matches what a preview of it saw."),
		spec(FSSend, "Streams path (from offset, after checking prefixSha256) over the data connection of dataTicket; returns the whole file's sha256."),
		spec(FSReceive, "Receives size bytes over the data connection of dataTicket into a part file beside path, checks the sender's sha256, sets mode and mtime and moves it into place (compare-and-swap as fs.write and fs.move)."),
	)
}
