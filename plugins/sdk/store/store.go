// Package store is the typed guest wrapper of the store host calls
// (docs/HOSTCALLS.md, docs/ABI.md "The module's store"): key-value
// namespaces of the calling module (no module can name another's).
//
// Each module has two namespaces:
//
//   - Durable (the package-level functions, or Durable's methods): kept in
//     the node's bbolt file across restarts; every write is one fsync'd
//     transaction before the call returns.
//   - Volatile (Volatile's methods): in the node's memory, lost when the
//     node process stops, with its own budget (per module 10,000 keys and
//     16 MiB of keys plus values by default); entries may expire
//     (ExpiresAt). For preview tokens, output caches and other state a
//     restart may drop.
//
// Keys are 1 to 512 bytes of UTF-8 without NUL; a value is any JSON value
// of at most 65536 bytes. Every stored key has a revision, above 0,
// changed by every write and never reused within the namespace (not even
// after a delete); revision 0 means "absent". CAS swaps on it.
//
// The calls need no capability and are not effects (docs/POLICY.md, "The
// module's own store"): any method may use them, read-class ones
// included. List the calls used in the manifest's HostCalls (store.get,
// store.put, store.create, store.delete, store.cas, store.list,
// store.scan).
//
// Errors are *protocol.Error values: INVALID_PARAMS naming the field for
// a bad key, value, limit or expiresAtMs; UNAVAILABLE store_full for a
// new key past the namespace's budget; UNAVAILABLE store_unavailable when
// the durable file failed; CONFLICT already_exists from Create.
package store

import (
	"encoding/json"

	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
)

// HostCalls are every import of this package, for sdk.Manifest.HostCalls
// (a module imports only the calls whose wrappers it uses; `lemon plugin
// inspect` warns about a declared call the module never imports).
var HostCalls = []string{contract.StoreGet.Name(), contract.StorePut.Name(), contract.StoreCreate.Name(),
	contract.StoreDelete.Name(), contract.StoreCAS.Name(), contract.StoreList.Name(), contract.StoreScan.Name()}

// Namespace selects the calling module's durable or volatile namespace.
type Namespace struct{ volatile bool }

var (
	// Durable is the module's durable namespace (the package-level
	// functions use it).
	Durable = Namespace{}
	// Volatile is the module's in-memory namespace, lost at node restart.
	Volatile = Namespace{volatile: true}
)

// Option modifies a write (Put, Create, CAS).
type Option func(*writeOpts)

type writeOpts struct{ expiresAtMs int64 }

// ExpiresAt makes a volatile entry read as absent from ms (Unix time in
// milliseconds, which must be in the future) on; the durable namespace
// refuses it (INVALID_PARAMS expiresAtMs).
func ExpiresAt(ms int64) Option { return func(o *writeOpts) { o.expiresAtMs = ms } }

func options(opts []Option) writeOpts {
	var o writeOpts
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Get reads key (store.get): Found, Value and Revision (and ExpiresAtMs
// for a volatile entry with a deadline); Found false, Value null and
// Revision 0 without it.
func (n Namespace) Get(key string) (contract.StoreGetResult, error) {
	return sdk.Invoke(storeGet, contract.StoreGet, contract.StoreKeyArgs{Key: key, Volatile: n.volatile})
}

// Put sets key to value (store.put) and returns its new revision.
func (n Namespace) Put(key string, value json.RawMessage, opts ...Option) (uint64, error) {
	o := options(opts)
	r, err := sdk.Invoke(storePut, contract.StorePut, contract.StorePutArgs{Key: key, Value: value, Volatile: n.volatile, ExpiresAtMs: o.expiresAtMs})
	return r.Revision, err
}

// Create sets key to value only if key does not exist (store.create) and
// returns its revision; CONFLICT already_exists otherwise.
func (n Namespace) Create(key string, value json.RawMessage, opts ...Option) (uint64, error) {
	o := options(opts)
	r, err := sdk.Invoke(storeCreate, contract.StoreCreate, contract.StorePutArgs{Key: key, Value: value, Volatile: n.volatile, ExpiresAtMs: o.expiresAtMs})
	return r.Revision, err
}

// Delete deletes key (store.delete); Deleted is false if it did not exist.
func (n Namespace) Delete(key string) (contract.StoreDeleteResult, error) {
	return sdk.Invoke(storeDelete, contract.StoreDelete, contract.StoreKeyArgs{Key: key, Volatile: n.volatile})
}

// CAS sets key to value only if its revision is expected (0: key must be
// absent), atomically (store.cas). Swapped: Revision is the new revision.
// Not swapped: nothing was written and Revision is the current one (0:
// absent).
func (n Namespace) CAS(key string, expected uint64, value json.RawMessage, opts ...Option) (contract.StoreCASResult, error) {
	o := options(opts)
	return sdk.Invoke(storeCAS, contract.StoreCAS, contract.StoreCASArgs{Key: key, Expected: expected, Value: value,
		Volatile: n.volatile, ExpiresAtMs: o.expiresAtMs})
}

// CASDelete deletes key only if its revision is expected, atomically
// (store.cas with delete). Swapped: the key is gone (Revision 0). Not
// swapped: Revision is the current one (0: absent).
func (n Namespace) CASDelete(key string, expected uint64) (contract.StoreCASResult, error) {
	return sdk.Invoke(storeCAS, contract.StoreCAS, contract.StoreCASArgs{Key: key, Expected: expected, Delete: true, Volatile: n.volatile})
}

// List returns keys with prefix after after (exclusive), in byte order,
// at most limit (1 to 1000; 0 means 100) (store.list); More says whether
// further keys match.
func (n Namespace) List(prefix, after string, limit int) (contract.StoreListResult, error) {
	return sdk.Invoke(storeList, contract.StoreList, contract.StoreListArgs{Prefix: prefix, After: after, Limit: limit, Volatile: n.volatile})
}

// Scan returns the entries (key, value, revision) whose key has prefix
// and sorts after after (exclusive), in byte order of key, at most limit
// (1 to 1000; 0 means 100) and at most 1 MiB of keys plus values
// (store.scan). More says further entries match: scan again with after
// set to the last key returned.
func (n Namespace) Scan(prefix, after string, limit int) (contract.StoreScanResult, error) {
	return sdk.Invoke(storeScan, contract.StoreScan, contract.StoreScanArgs{Prefix: prefix, After: after, Limit: limit, Volatile: n.volatile})
}

// Get reads key of the durable namespace (Durable.Get).
func Get(key string) (contract.StoreGetResult, error) { return Durable.Get(key) }

// Put sets key of the durable namespace (Durable.Put), one fsync'd
// transaction, and returns its new revision.
func Put(key string, value json.RawMessage) (uint64, error) { return Durable.Put(key, value) }

// Create sets key of the durable namespace only if it does not exist
// (Durable.Create); CONFLICT already_exists otherwise.
func Create(key string, value json.RawMessage) (uint64, error) { return Durable.Create(key, value) }

// Delete deletes key of the durable namespace (Durable.Delete).
func Delete(key string) (contract.StoreDeleteResult, error) { return Durable.Delete(key) }

// CAS is Durable.CAS.
func CAS(key string, expected uint64, value json.RawMessage) (contract.StoreCASResult, error) {
	return Durable.CAS(key, expected, value)
}

// CASDelete is Durable.CASDelete.
func CASDelete(key string, expected uint64) (contract.StoreCASResult, error) {
	return Durable.CASDelete(key, expected)
}

// List is Durable.List.
func List(prefix, after string, limit int) (contract.StoreListResult, error) {
	return Durable.List(prefix, after, limit)
}

// Scan is Durable.Scan.
func Scan(prefix, after string, limit int) (contract.StoreScanResult, error) {
	return Durable.Scan(prefix, after, limit)
}
