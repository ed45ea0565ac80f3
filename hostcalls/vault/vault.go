// Package vault is the node's write-only encrypted secret store and the
// host calls of the secrets family (spec: execution-node-methods.md,
// "Write-only encrypted secrets" and "Reconciling a secret installation";
// docs/ABI.md).
//
// Storage: one bbolt file, <Dir>/vault.db (mode 0600), whose every commit
// is fsync'd, so a crash leaves either the state before or after a write.
// Nothing in it is plaintext: bucket keys are HMACs of names, and every
// value and metadata record is sealed with AES-256-GCM under a key derived
// from the node's master key, with a fresh random nonce per seal. A value
// is sealed with its record's name and revision as associated data, so a
// ciphertext moved to another name or revision fails to open.
//
// The master key comes from the node's own configuration only: a key file
// readable by its owner alone, or an environment variable named in the
// worker policy. Nothing from the controller reaches it.
//
// Receipts (operationId → name, revision, private intent tag) live inside
// each name's sealed metadata, at most 128 per name, and survive
// replacement, deletion, expiry and key rotation. The metadata of every
// name is decrypted once at open and kept in memory, so list and receipt
// never touch the disk and never decrypt a value.
//
// What this does not protect against: anyone holding the master key and
// the vault file can decrypt every value; deleted ciphertext may remain in
// bbolt's free pages until the next key rotation rewrites the file; and the
// worker process necessarily holds the key and, briefly, the plaintext of
// a value being stored.
package vault

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"lemon/protocol"
)

// File names inside Config.Dir.
const (
	dbFile     = "vault.db"
	rotateFile = "vault.db.rotate"
)

// Bucket names and keys of the bbolt file.
var (
	bucketMeta    = []byte("meta")
	bucketEntries = []byte("entries")
	bucketValues  = []byte("values")
	keyFormat     = []byte("format")
	keySalt       = []byte("salt")
	keyCheck      = []byte("check")
	formatV1      = []byte("lemon-vault-1")
)

// lockTimeout is how long Open waits for another process's lock.
const lockTimeout = time.Second

// Errors of New and RotateKey. None includes a path, name or key byte.
var (
	ErrWrongKey      = errors.New("vault: the master key does not open this vault (after an interrupted or finished rotation, use the new key)")
	ErrCorrupt       = errors.New("vault: a stored record failed authentication")
	ErrInUse         = errors.New("vault: the vault file is locked by another process (stop the node first)")
	ErrVaultFileMode = errors.New("vault: vault file must be readable only by its owner (chmod 600)")
	ErrSameKey       = errors.New("vault: the new key equals the current key")
	ErrNoDir         = errors.New("vault: state directory not configured")
	ErrStorage       = errors.New("vault: the vault file could not be opened or written")
)

// Config configures a Vault.
type Config struct {
	// Dir is the node's vault directory (created 0700 if missing).
	Dir string
	// KeyFile is a master-key file of mode 0600 or stricter holding 32
	// bytes raw, as 64 hex digits or as base64 (see LoadKeyFile).
	KeyFile string
	// KeyEnv names an environment variable holding the master key in the
	// same text form; the worker policy names it. New removes the variable
	// from the process environment after reading it. Set exactly one of
	// KeyFile and KeyEnv.
	KeyEnv string
	// Now is the clock for expiry and receipt timestamps; nil = time.Now.
	Now func() time.Time
}

// entry is a name's sealed metadata record.
type entry struct {
	Name string `json:"name"`
	// Revision is the current encrypted revision; every write of a value
	// (set, and re-encryption by a key rotation) increments it.
	Revision uint64 `json:"rev"`
	// Active is true while a value ciphertext for Revision exists.
	Active bool `json:"active"`
	// ExpiresAtMs is the Unix ms after which the value is expired; 0 = never.
	ExpiresAtMs int64     `json:"exp,omitempty"`
	Receipts    []receipt `json:"receipts,omitempty"`
}

// receipt is the private proof of one applied operation.
type receipt struct {
	NodeID      string `json:"node"`
	OperationID string `json:"op"`
	Revision    uint64 `json:"rev"`
	Intent      []byte `json:"intent"`
	AppliedAtMs int64  `json:"at"`
}

func (e *entry) clone() *entry {
	c := *e
	c.Receipts = append([]receipt(nil), e.Receipts...)
	return &c
}

func (e *entry) expired(now time.Time) bool {
	return e.ExpiresAtMs != 0 && now.UnixMilli() >= e.ExpiresAtMs
}

// live reports whether the name has a current, unexpired value.
func (e *entry) live(now time.Time) bool { return e.Active && !e.expired(now) }

func (e *entry) receipt(nodeID, opID string) *receipt {
	for i := range e.Receipts {
		if e.Receipts[i].NodeID == nodeID && e.Receipts[i].OperationID == opID {
			return &e.Receipts[i]
		}
	}
	return nil
}

// bindingMatches: the receipt's encrypted revision is still the active,
// unexpired one.
func (e *entry) bindingMatches(r *receipt, now time.Time) bool {
	return e.live(now) && e.Revision == r.Revision
}

type opKey struct{ nodeID, opID string }

// Vault is an open vault. Its methods are safe for concurrent use.
type Vault struct {
	dir string
	now func() time.Time

	mu      sync.RWMutex
	db      *bolt.DB
	master  []byte
	keys    *keyring
	entries map[string]*entry // by stored name
	ops     map[opKey]string  // (node identity, operationId) → stored name
	failed  bool              // a commit failed: in-memory state may be stale
	closed  bool

	writes atomic.Uint64
}

// New opens (creating if needed) the vault in cfg.Dir with the master key
// from cfg.KeyFile or cfg.KeyEnv. It removes a leftover file of an
// interrupted key rotation, verifies the key against the vault
// (ErrWrongKey), authenticates every metadata record (ErrCorrupt) and
// loads the metadata into memory. It holds an exclusive lock on the vault
// file until Close (ErrInUse if another process holds it).
func New(cfg Config) (*Vault, error) {
	if cfg.Dir == "" {
		return nil, ErrNoDir
	}
	var master []byte
	var err error
	switch {
	case cfg.KeyFile != "" && cfg.KeyEnv == "":
		master, err = LoadKeyFile(cfg.KeyFile)
	case cfg.KeyEnv != "" && cfg.KeyFile == "":
		master, err = loadKeyEnv(cfg.KeyEnv)
	default:
		err = ErrKeyMissing
	}
	if err != nil {
		return nil, err
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, ErrStorage
	}
	// A rotation writes the re-encrypted vault beside the live one and
	// renames it into place; a leftover is an interrupted rotation whose
	// live vault is still intact under the old key.
	if err := os.Remove(filepath.Join(cfg.Dir, rotateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, ErrStorage
	}
	v := &Vault{dir: cfg.Dir, now: now, master: master}
	if err := v.open(); err != nil {
		clear(master)
		return nil, err
	}
	return v, nil
}

// open opens the vault file with v.master and loads its metadata.
func (v *Vault) open() error {
	path := filepath.Join(v.dir, dbFile)
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return ErrVaultFileMode
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return ErrInUse
		}
		return ErrStorage
	}
	keys, err := initOrCheck(db, v.master)
	if err != nil {
		db.Close()
		return err
	}
	entries, ops, err := loadEntries(db, keys)
	if err != nil {
		db.Close()
		return err
	}
	v.db, v.keys, v.entries, v.ops = db, keys, entries, ops
	return nil
}

// initOrCheck creates the meta bucket of a new vault (random salt, key
// check record) or verifies the key against an existing one. Checking an
// existing vault is read-only.
func initOrCheck(db *bolt.DB, master []byte) (*keyring, error) {
	var keys *keyring
	fresh := false
	err := db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			fresh = true
			return nil
		}
		if !bytes.Equal(meta.Get(keyFormat), formatV1) {
			return ErrCorrupt
		}
		salt := meta.Get(keySalt)
		if len(salt) != saltSize {
			return ErrCorrupt
		}
		k, err := deriveKeyring(master, salt)
		if err != nil {
			return err
		}
		pt, err := k.open(meta.Get(keyCheck), []byte(aadCheck))
		if err != nil || string(pt) != checkPlaintext {
			return ErrWrongKey
		}
		if tx.Bucket(bucketEntries) == nil || tx.Bucket(bucketValues) == nil {
			return ErrCorrupt
		}
		keys = k
		return nil
	})
	if err == nil && fresh {
		err = db.Update(func(tx *bolt.Tx) error {
			var err error
			keys, err = writeMeta(tx, master)
			return err
		})
	}
	if err != nil {
		if errors.Is(err, ErrWrongKey) || errors.Is(err, ErrCorrupt) {
			return nil, err
		}
		return nil, ErrStorage
	}
	return keys, nil
}

// writeMeta initialises a fresh vault file in tx: format, a random salt,
// the key check record and the empty buckets.
func writeMeta(tx *bolt.Tx, master []byte) (*keyring, error) {
	salt := make([]byte, saltSize)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	keys, err := deriveKeyring(master, salt)
	if err != nil {
		return nil, err
	}
	check, err := keys.seal([]byte(checkPlaintext), []byte(aadCheck))
	if err != nil {
		return nil, err
	}
	meta, err := tx.CreateBucket(bucketMeta)
	if err != nil {
		return nil, err
	}
	for _, kv := range [][2][]byte{{keyFormat, formatV1}, {keySalt, salt}, {keyCheck, check}} {
		if err := meta.Put(kv[0], kv[1]); err != nil {
			return nil, err
		}
	}
	if _, err := tx.CreateBucket(bucketEntries); err != nil {
		return nil, err
	}
	if _, err := tx.CreateBucket(bucketValues); err != nil {
		return nil, err
	}
	return keys, nil
}

// loadEntries decrypts every metadata record and rebuilds the operation
// index. A record that fails authentication, sits under the wrong bucket
// key or repeats an operation is ErrCorrupt.
func loadEntries(db *bolt.DB, keys *keyring) (map[string]*entry, map[opKey]string, error) {
	entries := map[string]*entry{}
	ops := map[opKey]string{}
	err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEntries).ForEach(func(k, sealed []byte) error {
			pt, err := keys.open(sealed, entryAAD(k))
			if err != nil {
				return ErrCorrupt
			}
			var e entry
			if json.Unmarshal(pt, &e) != nil || !bytes.Equal(keys.nameKey(e.Name), k) {
				return ErrCorrupt
			}
			if _, dup := entries[e.Name]; dup {
				return ErrCorrupt
			}
			entries[e.Name] = &e
			for _, r := range e.Receipts {
				ok := opKey{r.NodeID, r.OperationID}
				if _, dup := ops[ok]; dup {
					return ErrCorrupt
				}
				ops[ok] = e.Name
			}
			return nil
		})
	})
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return nil, nil, err
		}
		return nil, nil, ErrStorage
	}
	return entries, ops, nil
}

// Close releases the vault file. Later calls fail with vault_unavailable.
func (v *Vault) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil
	}
	v.closed = true
	clear(v.master)
	if v.db == nil {
		return nil
	}
	if err := v.db.Close(); err != nil {
		return ErrStorage
	}
	return nil
}

// Writes returns the number of write transactions committed since New: a
// set, a delete that changed state, or a rotation counts one each.
func (v *Vault) Writes() uint64 { return v.writes.Load() }

// Errors returned by the vault's operations (*protocol.Error values).
func errUnavailable() *protocol.Error {
	return protocol.DomainError(protocol.CodeUnavailable, protocol.DomainVaultUnavailable,
		"the node's vault is unavailable").WithRetry(true, false)
}

func errWriteUnknown() *protocol.Error {
	return protocol.DomainError(protocol.CodeInternal, protocol.DomainVaultUnavailable,
		"the vault write failed; query the operation receipt before retrying").WithRetry(false, true)
}

func errOperationConflict() *protocol.Error {
	return protocol.DomainError(protocol.CodeConflict, protocol.DomainSecretOperationConflict,
		"operationId was already used with a different intent or its binding no longer matches").WithRetry(false, false)
}

func errReceiptCapacity() *protocol.Error {
	return protocol.DomainError(protocol.CodeConflict, protocol.DomainSecretReceiptCapacity,
		"the secret already holds 128 operation receipts; nothing was changed").WithRetry(false, false)
}

func errNoIdentity() *protocol.Error {
	return protocol.DomainError(protocol.CodeUnavailable, protocol.DomainVaultUnavailable,
		"the node identity needed to scope operationId is unavailable").WithRetry(true, false)
}

func errCorruptRecord() *protocol.Error {
	return protocol.DomainError(protocol.CodeInternal, protocol.DomainVaultCorrupt,
		"a stored secret failed authentication")
}

// usable reports whether operations may run; callers hold v.mu.
func (v *Vault) usable() bool { return !v.closed && !v.failed && v.db != nil }

// SetRequest is one node.secrets.set as the vault sees it.
type SetRequest struct {
	// NodeID is the authenticated durable node identity
	// (hostcalls.Invocation.NodeID); it scopes OperationID.
	NodeID string
	// Name as supplied; the vault validates and trims it.
	Name string
	// Value is the plaintext, at most 1 MiB.
	Value []byte
	// OperationID, when non-nil, makes the set reconcilable.
	OperationID *string
	// ExpiresAt, when non-zero, is when the value expires. The wire method
	// has no such field; local runtime callers may use it.
	ExpiresAt time.Time
}

// Set stores a value under a name, replacing any previous value
// (node.secrets.set). It validates before touching the vault: name,
// operationId, the reserved-name rule, value size (INVALID_PARAMS). With an
// operationId:
//   - a known ID whose receipt still matches the active revision and whose
//     name and value are the same returns the original success without
//     encrypting or writing;
//   - a known ID with a different name or value, or whose binding no
//     longer matches, is CONFLICT secret_operation_conflict;
//   - a new ID on a name that already holds 128 receipts is CONFLICT
//     secret_receipt_capacity, before anything is replaced.
//
// The result is {name, set:true} plus {operationId, status:"applied",
// currentBindingMatches:true} with an ID; name is the stored form.
func (v *Vault) Set(req SetRequest) (protocol.SecretsSetResult, *protocol.Error) {
	name, perr := checkSetParams(req.Name, req.OperationID)
	if perr != nil {
		return protocol.SecretsSetResult{}, perr
	}
	if perr := protocol.CheckSecretValueSize(len(req.Value)); perr != nil {
		return protocol.SecretsSetResult{}, perr
	}
	if req.OperationID != nil && req.NodeID == "" {
		return protocol.SecretsSetResult{}, errNoIdentity()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.usable() {
		return protocol.SecretsSetResult{}, errUnavailable()
	}
	now := v.now()
	old := v.entries[name]
	var opID string
	if req.OperationID != nil {
		opID = *req.OperationID
		if prev, known := v.ops[opKey{req.NodeID, opID}]; known {
			pe := v.entries[prev]
			r := pe.receipt(req.NodeID, opID)
			if prev != name || r == nil || !pe.bindingMatches(r, now) ||
				!hmac.Equal(r.Intent, v.keys.intentTag(req.NodeID, opID, name, req.Value)) {
				return protocol.SecretsSetResult{}, errOperationConflict()
			}
			return appliedResult(name, opID), nil
		}
		if old != nil && len(old.Receipts) >= protocol.SecretReceiptsPerName {
			return protocol.SecretsSetResult{}, errReceiptCapacity()
		}
	}
	next := &entry{Name: name}
	if old != nil {
		next = old.clone()
	}
	next.Revision++
	next.Active = true
	next.ExpiresAtMs = 0
	if !req.ExpiresAt.IsZero() {
		next.ExpiresAtMs = req.ExpiresAt.UnixMilli()
	}
	if req.OperationID != nil {
		next.Receipts = append(next.Receipts, receipt{
			NodeID:      req.NodeID,
			OperationID: opID,
			Revision:    next.Revision,
			Intent:      v.keys.intentTag(req.NodeID, opID, name, req.Value),
			AppliedAtMs: now.UnixMilli(),
		})
	}
	sealedValue, err := v.keys.seal(req.Value, valueAAD(name, next.Revision))
	if err != nil {
		return protocol.SecretsSetResult{}, errUnavailable()
	}
	if perr := v.commitEntry(next, sealedValue, false); perr != nil {
		return protocol.SecretsSetResult{}, perr
	}
	if req.OperationID != nil {
		v.ops[opKey{req.NodeID, opID}] = name
		return appliedResult(name, opID), nil
	}
	return protocol.SecretsSetResult{Name: name, Set: true}, nil
}

func checkSetParams(rawName string, opID *string) (string, *protocol.Error) {
	name, perr := protocol.CheckSecretName(rawName)
	if perr != nil {
		return "", perr
	}
	if opID != nil {
		if perr := protocol.CheckSecretOperationID(*opID); perr != nil {
			return "", perr
		}
	}
	if perr := protocol.CheckReservedSecretName(name, opID); perr != nil {
		return "", perr
	}
	return name, nil
}

func appliedResult(name, opID string) protocol.SecretsSetResult {
	t := true
	return protocol.SecretsSetResult{Name: name, Set: true, OperationID: opID,
		Status: protocol.SecretStatusApplied, CurrentBindingMatches: &t}
}

// commitEntry writes a name's metadata and, when sealedValue is non-nil,
// its value ciphertext; removeValue deletes the ciphertext instead. An
// entry that is inactive with no receipts is removed entirely. One fsync'd
// transaction; on success the in-memory state follows. Callers hold v.mu.
func (v *Vault) commitEntry(e *entry, sealedValue []byte, removeValue bool) *protocol.Error {
	bk := v.keys.nameKey(e.Name)
	drop := !e.Active && len(e.Receipts) == 0
	var sealedEntry []byte
	if !drop {
		pt, err := json.Marshal(e)
		if err != nil {
			return errUnavailable()
		}
		sealedEntry, err = v.keys.seal(pt, entryAAD(bk))
		clear(pt)
		if err != nil {
			return errUnavailable()
		}
	}
	err := v.db.Update(func(tx *bolt.Tx) error {
		vals, ents := tx.Bucket(bucketValues), tx.Bucket(bucketEntries)
		switch {
		case sealedValue != nil:
			if err := vals.Put(bk, sealedValue); err != nil {
				return err
			}
		case removeValue:
			if err := vals.Delete(bk); err != nil {
				return err
			}
		}
		if drop {
			return ents.Delete(bk)
		}
		return ents.Put(bk, sealedEntry)
	})
	if err != nil {
		// The transaction may or may not be durable; stop answering from
		// memory until the vault is reopened.
		v.failed = true
		return errWriteUnknown()
	}
	v.writes.Add(1)
	if drop {
		delete(v.entries, e.Name)
	} else {
		v.entries[e.Name] = e
	}
	return nil
}

// Delete removes a name's value (node.secrets.delete) and returns the
// stored name. A missing or already deleted name succeeds without a write.
// A name with receipts keeps receipt-only metadata that no list shows.
func (v *Vault) Delete(rawName string) (string, *protocol.Error) {
	name, perr := protocol.CheckSecretName(rawName)
	if perr != nil {
		return "", perr
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.usable() {
		return "", errUnavailable()
	}
	old := v.entries[name]
	if old == nil || !old.Active {
		return name, nil
	}
	next := old.clone()
	next.Active = false
	next.ExpiresAtMs = 0
	if perr := v.commitEntry(next, nil, true); perr != nil {
		return "", perr
	}
	return name, nil
}

// List returns the stored names with a current, unexpired value, sorted
// bytewise, at most 500, and whether more exist (node.secrets.list).
// Receipt-only metadata of deleted names is never listed.
func (v *Vault) List() (protocol.SecretsListResult, *protocol.Error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if !v.usable() {
		return protocol.SecretsListResult{}, errUnavailable()
	}
	now := v.now()
	names := make([]string, 0, len(v.entries))
	for n, e := range v.entries {
		if e.live(now) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	res := protocol.SecretsListResult{Names: names, Limit: protocol.SecretListLimit}
	if len(names) > protocol.SecretListLimit {
		res.Names = names[:protocol.SecretListLimit:protocol.SecretListLimit]
		res.Truncated = true
	}
	return res, nil
}

// Receipt answers node.secrets.receipt for an operation of node nodeID:
// exactly {nodeId, operationId, status, name, currentBindingMatches}.
// An unknown ID is status not_found with name null and
// currentBindingMatches false; a vault that cannot answer is an error,
// never not_found. It neither decrypts a value nor changes any state.
func (v *Vault) Receipt(nodeID, opID string) (protocol.SecretsReceiptResult, *protocol.Error) {
	if perr := protocol.CheckSecretOperationID(opID); perr != nil {
		return protocol.SecretsReceiptResult{}, perr
	}
	if nodeID == "" {
		return protocol.SecretsReceiptResult{}, errNoIdentity()
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	if !v.usable() {
		return protocol.SecretsReceiptResult{}, errUnavailable()
	}
	res := protocol.SecretsReceiptResult{NodeID: nodeID, OperationID: opID, Status: protocol.SecretStatusNotFound}
	name, ok := v.ops[opKey{nodeID, opID}]
	if !ok {
		return res, nil
	}
	e := v.entries[name]
	r := e.receipt(nodeID, opID)
	n := e.Name
	res.Status = protocol.SecretStatusApplied
	res.Name = &n
	res.CurrentBindingMatches = r != nil && e.bindingMatches(r, v.now())
	return res, nil
}

// Resolve decrypts a stored value for a local runtime provider on the node.
// It is not a host call and no node method reaches it. A missing, deleted
// or expired name is NOT_FOUND. The caller owns (and should clear) the
// returned bytes.
func (v *Vault) Resolve(rawName string) ([]byte, *protocol.Error) {
	name, perr := protocol.CheckSecretName(rawName)
	if perr != nil {
		return nil, perr
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	if !v.usable() {
		return nil, errUnavailable()
	}
	e := v.entries[name]
	if e == nil || !e.live(v.now()) {
		return nil, protocol.DomainError(protocol.CodeNotFound, protocol.DomainNotFound, "no such secret")
	}
	var pt []byte
	err := v.db.View(func(tx *bolt.Tx) error {
		sealed := tx.Bucket(bucketValues).Get(v.keys.nameKey(name))
		if sealed == nil {
			return ErrCorrupt
		}
		var err error
		pt, err = v.keys.open(sealed, valueAAD(name, e.Revision))
		return err
	})
	if err != nil {
		return nil, errCorruptRecord()
	}
	return pt, nil
}

// Stats are content-free counts for operators (`lemon vault check`).
type Stats struct {
	Secrets     int // names with a current, unexpired value
	Expired     int // names whose value expired
	ReceiptOnly int // deleted names kept for their receipts
	Receipts    int // receipts over all names
}

// Stats counts records without naming any.
func (v *Vault) Stats() (Stats, *protocol.Error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if !v.usable() {
		return Stats{}, errUnavailable()
	}
	now := v.now()
	var s Stats
	for _, e := range v.entries {
		switch {
		case e.live(now):
			s.Secrets++
		case e.Active:
			s.Expired++
		default:
			s.ReceiptOnly++
		}
		s.Receipts += len(e.Receipts)
	}
	return s, nil
}
