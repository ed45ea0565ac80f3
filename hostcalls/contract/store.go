package contract

import "encoding/json"

// Argument and result types of the store host calls. Every call works on
// the calling module's own namespace. Keys are 1 to 512 bytes of UTF-8
// without NUL; a value is any JSON value of at most 65536 bytes.
type (
	// StoreKeyArgs are the args of store.get and store.delete.
	StoreKeyArgs struct {
		Key string `json:"key" doc:"1 to 512 bytes of UTF-8 without NUL"`
	}
	// StorePutArgs are the args of store.put and store.create.
	StorePutArgs struct {
		Key   string          `json:"key" doc:"1 to 512 bytes of UTF-8 without NUL"`
		Value json.RawMessage `json:"value" doc:"required; at most 65536 bytes of JSON"`
	}
	// StoreListArgs are the args of store.list: keys with Prefix, after
	// After (exclusive), at most Limit (1 to 1000; 0 means 100).
	StoreListArgs struct {
		Prefix string `json:"prefix"`
		After  string `json:"after" doc:"list keys after this one (exclusive)"`
		Limit  int    `json:"limit" doc:"1 to 1000; 0 means 100"`
	}
	// StoreGetResult is the result of store.get: Value is null when not
	// Found.
	StoreGetResult struct {
		Found bool            `json:"found"`
		Value json.RawMessage `json:"value" doc:"null when not found"`
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
)

// The store host calls: reads need capability "read", writes "write".
var (
	StoreGet    = Call[StoreKeyArgs, StoreGetResult]{"store.get"}
	StorePut    = Call[StorePutArgs, Empty]{"store.put"}
	StoreCreate = Call[StorePutArgs, Empty]{"store.create"}
	StoreDelete = Call[StoreKeyArgs, StoreDeleteResult]{"store.delete"}
	StoreList   = Call[StoreListArgs, StoreListResult]{"store.list"}
)

func storeSpecs() []Spec {
	return []Spec{
		spec(StoreGet, "Reads one key of the module's namespace."),
		spec(StorePut, "Sets one key (one fsync'd transaction)."),
		spec(StoreCreate, "Sets one key only if it does not exist."),
		spec(StoreDelete, "Deletes one key."),
		spec(StoreList, "Lists keys in byte order."),
	}
}
