package contract

import "encoding/json"

// Argument and result types of the store host calls (docs/HOSTCALLS.md,
// docs/ABI.md "The module's store"). Every call works on the calling
// module's own namespace; there is no way to name another module's.
//
// Two namespaces per module: the durable one (Volatile false: a bbolt
// bucket, every write one fsync'd transaction, kept across node restarts)
// and the volatile one (Volatile true: an in-memory map with the same
// semantics and its own key and byte budget, lost when the node process
// stops). Keys are 1 to 512 bytes of UTF-8 without NUL; a value is any
// JSON value of at most 65536 bytes.
//
// Every stored key carries a revision: a number above 0 that changes on
// every write of the key and is never reused within the namespace (not
// even after a delete), so store.cas can swap on it without an ABA
// problem. Revision 0 means "absent".
type (
	// StoreKeyArgs are the args of store.get and store.delete.
	StoreKeyArgs struct {
		Key      string `json:"key" doc:"1 to 512 bytes of UTF-8 without NUL"`
		Volatile bool   `json:"volatile,omitempty" doc:"the module's volatile (in-memory) namespace instead of the durable one"`
	}
	// StorePutArgs are the args of store.put and store.create.
	StorePutArgs struct {
		Key      string          `json:"key" doc:"1 to 512 bytes of UTF-8 without NUL"`
		Value    json.RawMessage `json:"value" doc:"required; at most 65536 bytes of JSON"`
		Volatile bool            `json:"volatile,omitempty" doc:"the module's volatile (in-memory) namespace instead of the durable one"`
		// ExpiresAtMs, volatile only: the entry reads as absent from this
		// Unix time (milliseconds) on. 0: never.
		ExpiresAtMs int64 `json:"expiresAtMs,omitempty" doc:"volatile only: Unix ms after which the entry is gone; 0 never; must be in the future"`
	}
	// StoreWriteResult is the result of store.put and store.create: the
	// key's new revision.
	StoreWriteResult struct {
		Revision uint64 `json:"revision" doc:"the key's new revision (above 0)"`
	}
	// StoreCASArgs are the args of store.cas: if the key's current
	// revision is Expected (0: the key is absent), set it to Value, or
	// delete it when Delete is true, in one atomic step.
	StoreCASArgs struct {
		Key      string          `json:"key" doc:"1 to 512 bytes of UTF-8 without NUL"`
		Expected uint64          `json:"expected" doc:"the revision the key must have; 0: the key must be absent"`
		Value    json.RawMessage `json:"value,omitempty" doc:"the new value (at most 65536 bytes of JSON); required unless delete"`
		Delete   bool            `json:"delete,omitempty" doc:"delete the key instead of setting it (value must be absent)"`
		Volatile bool            `json:"volatile,omitempty" doc:"the module's volatile (in-memory) namespace instead of the durable one"`
		// ExpiresAtMs, volatile only, as in StorePutArgs.
		ExpiresAtMs int64 `json:"expiresAtMs,omitempty" doc:"volatile only: Unix ms after which the entry is gone; 0 never; must be in the future"`
	}
	// StoreCASResult is the result of store.cas. Swapped: the write
	// happened and Revision is the key's new revision (0 after a delete).
	// Not swapped: nothing was written and Revision is the key's current
	// revision (0: absent), to retry against.
	StoreCASResult struct {
		Swapped  bool   `json:"swapped"`
		Revision uint64 `json:"revision" doc:"swapped: the new revision (0 after a delete); else the current one (0: absent)"`
	}
	// StoreListArgs are the args of store.list: keys with Prefix, after
	// After (exclusive), at most Limit (1 to 1000; 0 means 100).
	StoreListArgs struct {
		Prefix   string `json:"prefix"`
		After    string `json:"after" doc:"list keys after this one (exclusive)"`
		Limit    int    `json:"limit" doc:"1 to 1000; 0 means 100"`
		Volatile bool   `json:"volatile,omitempty" doc:"the module's volatile (in-memory) namespace instead of the durable one"`
	}
	// StoreScanArgs are the args of store.scan: entries whose key has
	// Prefix and sorts after After (exclusive), in byte order, at most
	// Limit (1 to 1000; 0 means 100) and at most 1 MiB of keys and values.
	StoreScanArgs struct {
		Prefix   string `json:"prefix" doc:"at most 512 bytes"`
		After    string `json:"after" doc:"scan keys after this one (exclusive); at most 512 bytes"`
		Limit    int    `json:"limit" doc:"1 to 1000; 0 means 100"`
		Volatile bool   `json:"volatile,omitempty" doc:"the module's volatile (in-memory) namespace instead of the durable one"`
	}
	// StoreGetResult is the result of store.get: Value is null and
	// Revision 0 when not Found.
	StoreGetResult struct {
		Found       bool            `json:"found"`
		Value       json.RawMessage `json:"value" doc:"null when not found"`
		Revision    uint64          `json:"revision,omitempty" doc:"the key's revision; absent (0) when not found"`
		ExpiresAtMs int64           `json:"expiresAtMs,omitempty" doc:"volatile entries with a deadline: Unix ms"`
	}
	// StoreEntry is one entry of store.scan.
	StoreEntry struct {
		Key         string          `json:"key"`
		Value       json.RawMessage `json:"value"`
		Revision    uint64          `json:"revision"`
		ExpiresAtMs int64           `json:"expiresAtMs,omitempty" doc:"volatile entries with a deadline: Unix ms"`
	}
	// StoreDeleteResult is the result of store.delete: Deleted is false
	// when there was no such key.
	StoreDeleteResult struct {
		Deleted bool `json:"deleted"`
	}
	// StoreListResult is the result of store.list: keys in byte order,
	// More when further keys match.
	StoreListResult struct {
		Keys []string `json:"keys"`
		More bool     `json:"more" doc:"further keys match"`
	}
	// StoreScanResult is the result of store.scan: entries in byte order
	// of key, More when further entries match (continue with After set to
	// the last key).
	StoreScanResult struct {
		Entries []StoreEntry `json:"entries"`
		More    bool         `json:"more" doc:"further entries match; scan again after the last key"`
	}
)

// The store host calls. None needs a capability and none is an effect
// (audit class "bookkeeping"): a module's own namespace is its
// bookkeeping, usable by any of its methods, read-class ones included
// (docs/POLICY.md, "The module's own store").
var (
	StoreGet    = Call[StoreKeyArgs, StoreGetResult]{"store.get"}
	StorePut    = Call[StorePutArgs, StoreWriteResult]{"store.put"}
	StoreCreate = Call[StorePutArgs, StoreWriteResult]{"store.create"}
	StoreDelete = Call[StoreKeyArgs, StoreDeleteResult]{"store.delete"}
	StoreCAS    = Call[StoreCASArgs, StoreCASResult]{"store.cas"}
	StoreList   = Call[StoreListArgs, StoreListResult]{"store.list"}
	StoreScan   = Call[StoreScanArgs, StoreScanResult]{"store.scan"}
)

func storeSpecs() []Spec {
	return []Spec{
		spec(StoreGet, "Reads one key of the module's namespace, with its revision."),
		spec(StorePut, "Sets one key (durable: one fsync'd transaction); returns its new revision."),
		spec(StoreCreate, "Sets one key only if it does not exist; returns its revision."),
		spec(StoreDelete, "Deletes one key."),
		spec(StoreCAS, "Compare-and-swap: sets or deletes one key only if its revision is the expected one (0: absent), atomically."),
		spec(StoreList, "Lists keys in byte order."),
		spec(StoreScan, "Lists entries (key, value, revision) in byte order of key, bounded in count and bytes."),
	}
}
