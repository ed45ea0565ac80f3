package contract

import "lemon/protocol"

// Argument and result types of the fs host calls. Paths are the caller's
// strings; the host re-validates everything a module checked.
type (
	// FSPathArgs are the args of fs.stat and fs.stat_payload.
	FSPathArgs struct {
		Path string `json:"path"`
	}
	// FSListArgs are the args of fs.list and fs.list_payload.
	FSListArgs struct {
		Path       string `json:"path"`
		ShowHidden bool   `json:"showHidden" doc:"include names starting with a dot"`
	}
	// FSReadArgs are the args of fs.read: Offset and Length in bytes.
	FSReadArgs struct {
		Path   string `json:"path"`
		Offset int64  `json:"offset" doc:"byte offset to read from, 0 to 9007199254740991"`
		Length int64  `json:"length" doc:"bytes to read, 1 to 1048576"`
	}

	// FSStat is one entry's metadata (no mime: a module adds it from the
	// name, protocol.MIMEFromName).
	FSStat = protocol.FSStat
	// FSReadResult is the result of fs.read: the payload without
	// dataBase64 and mime, and Blob, the id of the chunk's bytes.
	FSReadResult = protocol.FSReadCall

	// FSListResult is the result of fs.list: the node.fs.list payload
	// without MIME types, where each entry also carries its path (the
	// shape fs modules before 1.1.0 decode).
	FSListResult struct {
		Path      string        `json:"path"`
		Entries   []FSListEntry `json:"entries"`
		Limit     int           `json:"limit"`
		Truncated bool          `json:"truncated"`
	}
	// FSListEntry is one entry of FSListResult: Error is set (and the stat
	// fields absent) when the entry could not be examined.
	FSListEntry struct {
		Name  string `json:"name"`
		Error string `json:"error,omitempty"`
		*protocol.FSStat
	}
)

// The fs host calls. Reads need capability "read"; everything that can
// lead to a change, delete previews included, needs "write". The
// _payload variants build the method's whole payload (MIME types
// included) as an invocation blob. The mutation primitives are in
// fs_mut.go, the bulk transfers in fs_xfer.go.
var (
	FSList        = Call[FSListArgs, FSListResult]{"fs.list"}
	FSListPayload = Call[FSListArgs, PayloadResult]{"fs.list_payload"}
	FSStatCall    = Call[FSPathArgs, FSStat]{"fs.stat"}
	FSStatPayload = Call[FSPathArgs, PayloadResult]{"fs.stat_payload"}
	FSRead        = Call[FSReadArgs, FSReadResult]{"fs.read"}
)

func fsSpecs() []Spec {
	return []Spec{
		spec(FSList, "Lists a directory (at most 500 entries, byte order; hidden entries only with showHidden). Kept for fs modules before 1.1.0; use fs.list_payload."),
		spec(FSListPayload, "Lists a directory as fs.list does and stores the whole node.fs.list payload (MIME types included) as an invocation blob."),
		spec(FSStatCall, "Metadata of one path, without following a final symlink out of the allowed roots. Kept for fs modules before 1.1.0; use fs.stat_payload."),
		spec(FSStatPayload, "Metadata of one path as a whole node.fs.stat payload (MIME type included) in an invocation blob."),
		spec(FSRead, "Reads at most length bytes from offset; the bytes go to an invocation blob (result blob), sized so their base64 fits the request's result room."),
	}
}
