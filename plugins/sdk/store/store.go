// Package store is the typed guest wrapper of the store host calls
// (docs/HOSTCALLS.md): a durable key-value namespace of the calling module
// (no module can name another's). Keys are 1 to 512 bytes of UTF-8
// without NUL; a value is any JSON value of at most 65536 bytes. Reads
// need capability "read", writes "write"; list the calls used in the
// manifest's HostCalls. Errors are *protocol.Error values.
package store

import (
	"encoding/json"

	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
)

// Get reads key (store.get); Found is false and Value null without it.
func Get(key string) (contract.StoreGetResult, error) {
	return sdk.Invoke(storeGet, contract.StoreGet, contract.StoreKeyArgs{Key: key})
}

// Put sets key to value (store.put), one fsync'd transaction.
func Put(key string, value json.RawMessage) error {
	_, err := sdk.Invoke(storePut, contract.StorePut, contract.StorePutArgs{Key: key, Value: value})
	return err
}

// Create sets key to value only if key does not exist (store.create):
// CONFLICT already_exists otherwise.
func Create(key string, value json.RawMessage) error {
	_, err := sdk.Invoke(storeCreate, contract.StoreCreate, contract.StorePutArgs{Key: key, Value: value})
	return err
}

// Delete deletes key (store.delete); Deleted is false if it did not exist.
func Delete(key string) (contract.StoreDeleteResult, error) {
	return sdk.Invoke(storeDelete, contract.StoreDelete, contract.StoreKeyArgs{Key: key})
}

// List returns keys with prefix after after (exclusive), in byte order, at
// most limit (1 to 1000; 0 means 100) (store.list); More says whether
// further keys match.
func List(prefix, after string, limit int) (contract.StoreListResult, error) {
	return sdk.Invoke(storeList, contract.StoreList, contract.StoreListArgs{Prefix: prefix, After: after, Limit: limit})
}
