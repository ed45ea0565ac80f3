package contract

// The guest family: host calls for the module's own needs rather than a
// node effect (logging, reading and hashing its invocation's non-secret
// blobs, its own settings). None needs a capability. Names, limits and
// helpers are in lemon/hostcalls/guestcall.

// LogArgs are the args of log.write. Level is debug, info, warn or error;
// Message is at most 2048 bytes (guestcall.MaxLogMessageBytes) of UTF-8. There is no field for a
// blob id: a record carries only bytes the guest itself holds.
type LogArgs struct {
	Level   string `json:"level"`
	Message string `json:"message"`
}

// LogResult answers log.write. Logged is false when the module's log rate
// limit dropped the record; Dropped counts the module's records dropped
// so far.
type LogResult struct {
	Logged  bool   `json:"logged"`
	Dropped uint64 `json:"dropped"`
}

// BlobArgs name one blob by id.
type BlobArgs struct {
	Blob uint32 `json:"blob"`
}

// BlobReadArgs are the args of blob.read: Length bytes (1 to 1 MiB, guestcall.MaxBlobRead)
// from Offset (0..size). Fewer come back at the end of the blob, none at
// Offset == size.
type BlobReadArgs struct {
	Blob   uint32 `json:"blob"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
}

// Digest is a SHA-256 (lowercase hex) over Size bytes.
type Digest struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// HashUpdateArgs are the args of blob.hash_update. State is the state
// blob of the running hash (0 starts a new one); Free forgets Blob after
// hashing it, so a file read chunk by chunk never piles up on the host.
type HashUpdateArgs struct {
	State uint32 `json:"state"`
	Blob  uint32 `json:"blob"`
	Free  bool   `json:"free"`
}

// HashState answers blob.hash_update: the new state blob (the old one is
// freed) and the bytes hashed so far.
type HashState struct {
	State uint32 `json:"state"`
	Size  int64  `json:"size"`
}

// HashSumArgs are the args of blob.hash_sum; the state blob is freed.
type HashSumArgs struct {
	State uint32 `json:"state"`
}

// Settings answers config.get: the module's own [modules.<family>] table
// (strings, numbers, booleans, or arrays of them), {} when none is given.
type Settings struct {
	Settings map[string]any `json:"settings"`
}

// RawBytes is the result of blob.read: the bytes themselves, not JSON.
type RawBytes []byte

// The guest family's calls.
var (
	LogWriteCall   = Call[LogArgs, LogResult]{"log.write"}
	BlobReadCall   = Call[BlobReadArgs, RawBytes]{"blob.read"}
	BlobSHA256Call = Call[BlobArgs, Digest]{"blob.sha256"}
	HashUpdateCall = Call[HashUpdateArgs, HashState]{"blob.hash_update"}
	HashSumCall    = Call[HashSumArgs, Digest]{"blob.hash_sum"}
	BlobFreeCall   = Call[BlobArgs, Empty]{"blob.free"}
	ConfigGetCall  = Call[Empty, Settings]{"config.get"}
)

func guestSpecs() []Spec {
	return []Spec{
		spec(LogWriteCall, "Writes one record to the node's log, tagged with module, method and invokeId; control characters escaped; rate-limited per module (excess dropped and counted, never waited for)."),
		spec(BlobReadCall, "Copies a byte range of a non-secret blob into guest memory; the result is the raw bytes, not JSON. A secret blob is FORBIDDEN."),
		spec(BlobSHA256Call, "Hashes a non-secret blob on the host without copying it into the guest. A secret blob is FORBIDDEN."),
		spec(HashUpdateCall, "Feeds a non-secret blob to a running SHA-256 kept on the host (state 0 starts one), optionally freeing the blob."),
		spec(HashSumCall, "Finishes a running SHA-256 and frees its state."),
		spec(BlobFreeCall, "Forgets a blob before the invocation ends."),
		spec(ConfigGetCall, "Returns the calling module's own [modules.<family>] table of the worker policy, {} when there is none."),
	}
}
