package contract

// Argument and result types of the fs host calls. Paths are the caller's
// strings; the host re-validates everything a module checked.
type (
	// FSReadArgs are the args of fs.read: Offset and Length in bytes.
	FSReadArgs struct {
		Path   string `json:"path"`
		Offset int64  `json:"offset" doc:"byte offset to read from, 0 to 9007199254740991"`
		Length int64  `json:"length" doc:"bytes to read, 1 to 1048576"`
	}
)

// The fs host calls besides the primitives. Reads need capability "read";
// everything that can lead to a change, delete previews included, needs
// "write". The read primitives on handles (fs.open, fs.readdir, fs.statat,
// fs.pread, fs.close) are in fs_read.go, the mutation primitives
// (fs.write_at, fs.mkdirs, fs.rename, fs.walk, fs.remove) in fs_mut.go,
// the bulk transfers (fs.send, fs.receive) in fs_xfer.go.
var FSRead = Call[FSReadArgs, FSReadResult]{"fs.read"}

func fsSpecs() []Spec {
	return append(fsReadSpecs(),
		spec(FSRead, "Reads at most length bytes of path from offset (fs.open and fs.pread in one call, no handle kept); the bytes go to an invocation blob, sized so their base64 fits the request's result room."),
	)
}
