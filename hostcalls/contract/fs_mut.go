package contract

// Argument and result types of the fs mutation primitives (docs/FS.md,
// "Writes, moves and deletes"; docs/HOSTCALLS.md). They are raw shapes:
// nanosecond times, device and inode numbers, digests. The fs module
// decides what to expect, turns a refused expectation into the spec's
// error (revision_conflict, already_exists, stale_preview) and shapes the
// method payloads; the host performs the effect, confined, and compares
// what it is asked to compare atomically with it.
type (
	// FSExpect is what a compare-and-swap primitive requires of the entry
	// at a path before its effect. The zero value requires nothing.
	// Absent requires that no entry has the name; otherwise a set field
	// requires that the entry exists and has that value: MtimeNsMin and
	// MtimeNsMax bound its modification time (ns since the epoch,
	// inclusive), Dev and Ino (both nonzero) name its identity.
	FSExpect struct {
		Absent     bool   `json:"absent" doc:"no entry may have the name"`
		MtimeNsMin *int64 `json:"mtimeNsMin,omitempty" doc:"the entry's mtime, ns since the epoch, is at least this"`
		MtimeNsMax *int64 `json:"mtimeNsMax,omitempty" doc:"the entry's mtime, ns since the epoch, is at most this"`
		Dev        uint64 `json:"dev" doc:"with ino: the entry's device number"`
		Ino        uint64 `json:"ino" doc:"with dev: the entry's inode number"`
	}

	// FSWriteAtArgs are the args of fs.write_at: the bytes of input blob
	// Blob written at Offset of the regular file Path, created when
	// missing. Truncate cuts the file at Offset plus the bytes written;
	// Mkdirs creates missing parents (only when Expect.Absent or nothing
	// is expected of an existing entry). Expect is compared under the
	// lock that serializes every write to the file (by canonical path and
	// by inode), and nothing is written when it fails. MtimeNsAfter, when
	// nonzero, is the least mtime (ns) the file has after the write: the
	// host sets it with utimensat when the clock did not get there.
	FSWriteAtArgs struct {
		Path         string   `json:"path"`
		Blob         uint32   `json:"blob" doc:"input blob holding at most 1048576 bytes"`
		Offset       int64    `json:"offset" doc:"byte offset, 0 to 9007199254740991"`
		Truncate     bool     `json:"truncate" doc:"cut the file after the written bytes"`
		Mkdirs       bool     `json:"mkdirs" doc:"create missing parent directories"`
		Expect       FSExpect `json:"expect" doc:"what the file must be; nothing is written otherwise"`
		MtimeNsAfter int64    `json:"mtimeNsAfter" doc:"the least mtime (ns) the file has after the write; 0 for none"`
	}
	// FSWriteAtResult is the result of fs.write_at: the canonical path,
	// the bytes written and the file's size (bytes), mtime (ns) and
	// identity after the write.
	FSWriteAtResult struct {
		Path         string `json:"path" doc:"canonical path"`
		BytesWritten int64  `json:"bytesWritten"`
		Size         int64  `json:"size" doc:"bytes, after the write"`
		MtimeNs      int64  `json:"mtimeNs" doc:"ns since the epoch, after the write"`
		Dev          uint64 `json:"dev"`
		Ino          uint64 `json:"ino"`
		Created      bool   `json:"created" doc:"the call created the file"`
	}

	// FSMkdirsArgs are the args of fs.mkdirs.
	FSMkdirsArgs struct {
		Path string `json:"path"`
	}
	// FSMkdirsResult is the result of fs.mkdirs: the canonical path,
	// whether this call created the final directory, and whether a
	// directory is there now (Directory false: something else has the
	// name and nothing was created there).
	FSMkdirsResult struct {
		Path      string `json:"path"`
		Created   bool   `json:"created"`
		Directory bool   `json:"directory"`
	}

	// FSRenameArgs are the args of fs.rename: the canonical target of
	// Path moves to Destination, both confined. NoReplace renames with
	// renameat2(RENAME_NOREPLACE) (an existing destination is refused);
	// otherwise a plain rename replaces it. The source is first captured
	// under a .lemon-move-* name; Expect is compared on the captured
	// entry, so nothing can swap it between the compare and the rename.
	FSRenameArgs struct {
		Path        string   `json:"path"`
		Destination string   `json:"destination"`
		NoReplace   bool     `json:"noReplace" doc:"refuse an existing destination (RENAME_NOREPLACE)"`
		Expect      FSExpect `json:"expect" doc:"what the source must be"`
	}
	// FSRenameResult is the result of fs.rename: canonical source and
	// destination paths and the source's mtime (ns) as the walk saw it.
	// Same: both name one entry; nothing was renamed and Expect was not
	// compared (the module decides what that means).
	FSRenameResult struct {
		Path        string `json:"path"`
		Destination string `json:"destination"`
		Same        bool   `json:"same" doc:"source and destination are one entry; nothing moved, nothing compared"`
		MtimeNs     int64  `json:"mtimeNs" doc:"the source's mtime, ns since the epoch"`
	}

	// FSWalkArgs are the args of fs.walk, the tree walk of delete
	// previews. Recursive walks every entry below a directory (hidden ones
	// included, symlinks not followed); otherwise only whether the
	// directory is empty is seen. The walk stops with TooLarge past
	// MaxEntries entries (the target counts), MaxDepth levels or MaxBytes,
	// where every entry is charged the bytes of its path (the target's
	// canonical path; below it, the path relative to the target) plus
	// EntryOverhead.
	FSWalkArgs struct {
		Path          string `json:"path"`
		Recursive     bool   `json:"recursive"`
		MaxEntries    int    `json:"maxEntries" doc:"1 to 100000"`
		MaxDepth      int    `json:"maxDepth" doc:"0 to 256"`
		MaxBytes      int64  `json:"maxBytes" doc:"1 to 67108864"`
		EntryOverhead int64  `json:"entryOverhead" doc:"0 to 4096 bytes charged per entry"`
	}
	// FSWalkResult is the result of fs.walk. The target's raw stat: type
	// (the spec's names), size, mtime (ns), mode, identity and the
	// kernel's access checks. Entries and Bytes are what the walk counted;
	// Children the target's immediate entries; ChildrenDigest the sha256
	// (hex) of their names and (dev, ino, mode, size, mtimeNs);
	// TreeDigest the sha256 (hex) of the target's canonical path and
	// identity and of every entry below it (relative path, dev, ino, mode,
	// uid, gid, size, mtimeNs), which fs.remove compares. Empty: a
	// directory without entries. TooLarge: a limit was passed (nothing
	// else but the target's stat is then set).
	FSWalkResult struct {
		Path           string `json:"path"`
		Type           string `json:"type"`
		Size           int64  `json:"size"`
		MtimeNs        int64  `json:"mtimeNs"`
		Mode           uint32 `json:"mode"`
		Readable       bool   `json:"readable"`
		Writable       bool   `json:"writable"`
		Dev            uint64 `json:"dev"`
		Ino            uint64 `json:"ino"`
		Empty          bool   `json:"empty"`
		TooLarge       bool   `json:"tooLarge"`
		Entries        int    `json:"entries"`
		Bytes          int64  `json:"bytes"`
		Children       int    `json:"children"`
		ChildrenDigest string `json:"childrenDigest"`
		TreeDigest     string `json:"treeDigest"`
	}

	// FSRemoveArgs are the args of fs.remove: unlink (a file, symlink or
	// empty directory) or, with Recursive, remove a tree, only if the
	// entry at Path is still the inode (Dev, Ino) and, walked with the
	// same limits as fs.walk after it was captured under a
	// .lemon-delete-* name, still has TreeDigest. Every entry is checked
	// again just before its unlink or rmdir; symlinks are unlinked, never
	// followed.
	FSRemoveArgs struct {
		Path          string `json:"path"`
		Dev           uint64 `json:"dev"`
		Ino           uint64 `json:"ino"`
		Recursive     bool   `json:"recursive"`
		TreeDigest    string `json:"treeDigest" doc:"fs.walk's treeDigest of the entry"`
		MaxEntries    int    `json:"maxEntries" doc:"1 to 100000"`
		MaxDepth      int    `json:"maxDepth" doc:"0 to 256"`
		MaxBytes      int64  `json:"maxBytes" doc:"1 to 67108864"`
		EntryOverhead int64  `json:"entryOverhead" doc:"0 to 4096"`
	}
	// FSRemoveResult is the result of fs.remove: the canonical path
	// removed.
	FSRemoveResult struct {
		Path string `json:"path"`
	}
)

// FSPreconditionFailed is details.code of a CONFLICT from fs.write_at,
// fs.rename or fs.remove whose expectation did not hold; details.field
// names which: FSFieldAbsent (the name exists), FSFieldPresent (nothing
// has the name), FSFieldMtime, FSFieldIdentity (the entry or its tree
// changed), FSFieldDestination (the destination exists). The fs module
// turns it into the spec's error.
const (
	FSPreconditionFailed = "precondition_failed"
	FSFieldAbsent        = "absent"
	FSFieldPresent       = "present"
	FSFieldMtime         = "mtime"
	FSFieldIdentity      = "identity"
	FSFieldDestination   = "destination"
)

// The fs mutation primitives; all need capability "write".
var (
	FSWriteAt = Call[FSWriteAtArgs, FSWriteAtResult]{"fs.write_at"}
	FSMkdirs  = Call[FSMkdirsArgs, FSMkdirsResult]{"fs.mkdirs"}
	FSRename  = Call[FSRenameArgs, FSRenameResult]{"fs.rename"}
	FSWalk    = Call[FSWalkArgs, FSWalkResult]{"fs.walk"}
	FSRemove  = Call[FSRemoveArgs, FSRemoveResult]{"fs.remove"}
)

func fsMutSpecs() []Spec {
	return []Spec{
		spec(FSWriteAt, "Writes the bytes of input blob blob at offset of a regular file (created when missing), if the file still is what expect says; writers of one file are serialized."),
		spec(FSMkdirs, "Creates a directory and its missing parents."),
		spec(FSRename, "Moves path to destination (renameat2, RENAME_NOREPLACE when noReplace) if the captured source still is what expect says."),
		spec(FSWalk, "Counts and digests the entry at path and, with recursive, everything below it, within the given limits (delete previews)."),
		spec(FSRemove, "Removes the entry at path (its tree with recursive) only if it is still inode (dev, ino) with treeDigest."),
	}
}
