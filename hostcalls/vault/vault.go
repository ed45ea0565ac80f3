// Package vault is the node's write-only encrypted secret store and its
// primitives, the vault host calls (docs/SECRETS.md "Vault primitives",
// docs/HOSTCALLS.md): seal and put a value blob, delete, list names, and
// module records written in a put's own transaction. The secrets family's
// logic (operation ids, receipts, reserved names, payloads) is the
// secrets module's (plugins/secrets).
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
// Module records (a module family's key → value, plus the name and
// revision the put that wrote it stored) are sealed in their own bucket;
// the secrets module keeps its operation receipts there. The metadata of
// every name and every record is decrypted once at open and kept in
// memory, so list and record reads never touch the disk and never decrypt
// a value.
//
// What this does not protect against: anyone holding the master key and
// the vault file can decrypt every value; deleted ciphertext may remain in
// bbolt's free pages until the next key rotation rewrites the file; and the
// worker process necessarily holds the key and, briefly, the plaintext of
// a value being stored.
package vault

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"

	"lemon/hostcalls/contract"
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
	bucketRecords = []byte("records")
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
	ExpiresAtMs int64 `json:"exp,omitempty"`
	// Records counts the module records whose put wrote this name; while
	// it is above 0 the entry (and so its revision counter) is kept after
	// a delete, so a later set never reuses a revision a record names.
	Records int `json:"records,omitempty"`
	// Receipts are receipts of the format before module records
	// (lemon-vault-1 files written before issue 11); open converts them
	// to records of the secrets module and never writes this field.
	Receipts []legacyReceipt `json:"receipts,omitempty"`
}

// legacyReceipt is a receipt as vaults before module records kept it.
type legacyReceipt struct {
	NodeID      string `json:"node"`
	OperationID string `json:"op"`
	Revision    uint64 `json:"rev"`
	AppliedAtMs int64  `json:"at"`
}

// record is a module's record, sealed in bucket records under
// keyring.recordKey(Family, Key).
type record struct {
	Family      string `json:"family"`
	Key         string `json:"key"`
	Value       string `json:"value"`
	Name        string `json:"name"`
	Revision    uint64 `json:"rev"`
	WrittenAtMs int64  `json:"at"`
}

func (e *entry) clone() *entry {
	c := *e
	c.Receipts = nil
	return &c
}

func (e *entry) expired(now time.Time) bool {
	return e.ExpiresAtMs != 0 && now.UnixMilli() >= e.ExpiresAtMs
}

// live reports whether the name has a current, unexpired value.
func (e *entry) live(now time.Time) bool { return e.Active && !e.expired(now) }

// recKey names a module record: the module family and its key.
type recKey struct{ family, key string }

// Vault is an open vault. Its methods are safe for concurrent use.
type Vault struct {
	dir string
	now func() time.Time

	mu      sync.RWMutex
	db      *bolt.DB
	master  []byte
	keys    *keyring
	entries map[string]*entry  // by stored name
	sorted  []string           // the keys of entries, sorted bytewise (List)
	records map[recKey]*record // module records
	failed  bool               // a commit failed: in-memory state may be stale
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
	entries, records, err := loadEntries(db, keys)
	if err != nil {
		db.Close()
		return err
	}
	v.db, v.keys, v.entries, v.records = db, keys, entries, records
	v.sorted = make([]string, 0, len(entries))
	for n := range entries {
		v.sorted = append(v.sorted, n)
	}
	sort.Strings(v.sorted)
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
		if tx.Bucket(bucketRecords) == nil {
			fresh = true // a file from before module records: add the bucket
		}
		keys = k
		return nil
	})
	if err == nil && fresh {
		err = db.Update(func(tx *bolt.Tx) error {
			if keys != nil {
				_, err := tx.CreateBucketIfNotExists(bucketRecords)
				return err
			}
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
	if _, err := tx.CreateBucket(bucketRecords); err != nil {
		return nil, err
	}
	return keys, nil
}

// LegacyReceiptFamily, LegacyReceiptKey and LegacyReceiptValue say how
// open converts a receipt of a vault written before module records into a
// record: the secrets module's record of that operation, in the module's
// own key scheme (plugins/secrets, docs/SECRETS.md "Receipts").
const LegacyReceiptFamily = "secrets"

// LegacyReceiptKey is the record key of a legacy receipt.
func LegacyReceiptKey(nodeID, opID string) string { return "op/" + nodeID + "/" + opID }

// LegacyReceiptValue is the record value of a legacy receipt.
const LegacyReceiptValue = "applied"

// loadEntries decrypts every metadata record and module record. A record
// that fails authentication, sits under the wrong bucket key or repeats a
// name or record key is ErrCorrupt. Receipts of the format before module
// records are converted to records of the secrets module and written back
// in one transaction, so they stay answerable.
func loadEntries(db *bolt.DB, keys *keyring) (map[string]*entry, map[recKey]*record, error) {
	entries := map[string]*entry{}
	records := map[recKey]*record{}
	legacy := false
	err := db.View(func(tx *bolt.Tx) error {
		err := tx.Bucket(bucketEntries).ForEach(func(k, sealed []byte) error {
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
			legacy = legacy || len(e.Receipts) > 0
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bucketRecords).ForEach(func(k, sealed []byte) error {
			pt, err := keys.open(sealed, recordAAD(k))
			if err != nil {
				return ErrCorrupt
			}
			var r record
			if json.Unmarshal(pt, &r) != nil || !bytes.Equal(keys.recordKey(r.Family, r.Key), k) {
				return ErrCorrupt
			}
			rk := recKey{r.Family, r.Key}
			if _, dup := records[rk]; dup {
				return ErrCorrupt
			}
			records[rk] = &r
			return nil
		})
	})
	if err == nil && legacy {
		err = convertLegacy(db, keys, entries, records)
	}
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return nil, nil, err
		}
		return nil, nil, ErrStorage
	}
	return entries, records, nil
}

// convertLegacy turns the receipts kept inside entries into module
// records of the secrets module, in one fsync'd transaction.
func convertLegacy(db *bolt.DB, keys *keyring, entries map[string]*entry, records map[recKey]*record) error {
	added := map[recKey]*record{}
	changed := map[string]*entry{}
	for name, e := range entries {
		if len(e.Receipts) == 0 {
			continue
		}
		ne := e.clone()
		for _, lr := range e.Receipts {
			rk := recKey{LegacyReceiptFamily, LegacyReceiptKey(lr.NodeID, lr.OperationID)}
			if records[rk] != nil || added[rk] != nil {
				return ErrCorrupt
			}
			added[rk] = &record{Family: rk.family, Key: rk.key, Value: LegacyReceiptValue, Name: name,
				Revision: lr.Revision, WrittenAtMs: lr.AppliedAtMs}
			ne.Records++
		}
		changed[name] = ne
	}
	err := db.Update(func(tx *bolt.Tx) error {
		for _, r := range added {
			if err := putRecord(tx, keys, r); err != nil {
				return err
			}
		}
		for _, e := range changed {
			if err := putEntry(tx, keys, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for rk, r := range added {
		records[rk] = r
	}
	for n, e := range changed {
		entries[n] = e
	}
	return nil
}

// putEntry seals e and stores it under its bucket key.
func putEntry(tx *bolt.Tx, keys *keyring, e *entry) error {
	bk := keys.nameKey(e.Name)
	pt, err := json.Marshal(e)
	if err != nil {
		return err
	}
	sealed, err := keys.seal(pt, entryAAD(bk))
	clear(pt)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketEntries).Put(bk, sealed)
}

// putRecord seals r and stores it under its bucket key.
func putRecord(tx *bolt.Tx, keys *keyring, r *record) error {
	bk := keys.recordKey(r.Family, r.Key)
	pt, err := json.Marshal(r)
	if err != nil {
		return err
	}
	sealed, err := keys.seal(pt, recordAAD(bk))
	clear(pt)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketRecords).Put(bk, sealed)
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

// errRecordConflict: a put names an existing record it does not replay.
func errRecordConflict() *protocol.Error {
	return protocol.DomainError(protocol.CodeConflict, protocol.DomainSecretOperationConflict,
		"operationId was already used with a different intent or its binding no longer matches").WithRetry(false, false)
}

// errRecordCapacity: a new record on a name at its record limit.
func errRecordCapacity() *protocol.Error {
	return protocol.DomainError(protocol.CodeConflict, protocol.DomainSecretReceiptCapacity,
		"the secret already holds its maximum of operation receipts; nothing was changed").WithRetry(false, false)
}

func errCorruptRecord() *protocol.Error {
	return protocol.DomainError(protocol.CodeInternal, protocol.DomainVaultCorrupt,
		"a stored secret failed authentication")
}

// Limits of module records.
const (
	MaxRecordKeyBytes   = 512  // bytes of a record key
	MaxRecordValueBytes = 1024 // bytes of a record value
	MaxRecordsPerName   = 1024 // records whose put wrote one name
	MaxFamilyBytes      = 64   // bytes of a module family name
)

// usable reports whether operations may run; callers hold v.mu.
func (v *Vault) usable() bool { return !v.closed && !v.failed && v.db != nil }

// Record is a module's record carried by a put (contract.VaultRecord).
type Record struct {
	// Key is 1 to 512 bytes of UTF-8 without NUL, unique per family.
	Key string
	// Value is at most 1024 bytes, opaque to the vault.
	Value string
	// MaxPerName refuses a new record when the name already holds this
	// many (1 to 1024; 0 means 1024).
	MaxPerName int
}

// PutRequest is one seal-and-put.
type PutRequest struct {
	// Family is the module family owning Record ("" without a record).
	Family string
	// Name is the stored form: CheckName(Name) must hold.
	Name string
	// Value is the plaintext, at most 1 MiB. The vault never keeps it
	// unencrypted.
	Value []byte
	// Record, when non-nil, is written in the same transaction.
	Record *Record
	// ExpiresAt, when non-zero, is when the value expires. The wire method
	// has no such field; local runtime callers may use it.
	ExpiresAt time.Time
}

// PutResult is the outcome of a put.
type PutResult struct {
	// Revision is the name's revision holding the value.
	Revision uint64
	// Written is false for a replay of an existing record: nothing changed.
	Written bool
}

// CheckName checks that name is a secret name in stored form: the name
// rules of protocol.CheckSecretName, already trimmed (INVALID_PARAMS on
// name otherwise).
func CheckName(name string) *protocol.Error {
	stored, perr := protocol.CheckSecretName(name)
	if perr != nil {
		return perr
	}
	if stored != name {
		return protocol.InvalidParams("name", "name must be given in its stored (trimmed) form")
	}
	return nil
}

func checkRecord(family string, r *Record) *protocol.Error {
	if r == nil {
		return nil
	}
	if family == "" || len(family) > MaxFamilyBytes || strings.ContainsRune(family, 0) {
		return protocol.Errorf(protocol.CodeInternal, "record without a module family")
	}
	if len(r.Key) < 1 || len(r.Key) > MaxRecordKeyBytes || !utf8.ValidString(r.Key) || strings.ContainsRune(r.Key, 0) {
		return protocol.InvalidParams("record", "record key must be 1 to 512 bytes of UTF-8 without NUL")
	}
	if len(r.Value) > MaxRecordValueBytes {
		return protocol.InvalidParams("record", "record value exceeds 1024 bytes")
	}
	if r.MaxPerName < 0 || r.MaxPerName > MaxRecordsPerName {
		return protocol.InvalidParams("record", "record maxPerName must be 0 or 1 to 1024")
	}
	return nil
}

// Put seals req.Value and stores it under req.Name at the name's next
// revision, replacing any previous value, in one fsync'd transaction
// that also writes req.Record when given (vault.set, docs/SECRETS.md
// "Vault primitives"). Checks, before anything is written: the name
// (CheckName), the value size, the record bounds (INVALID_PARAMS).
//
// A record key that already exists makes the put a replay: nothing is
// written, and it succeeds (Written false, the record's revision) only if
// the existing record has the same value, was written by a put of the
// same name, that revision is still the name's current, unexpired one and
// the stored value equals req.Value (compared in constant time after
// decryption); otherwise CONFLICT secret_operation_conflict. A new record
// on a name holding MaxPerName records is CONFLICT secret_receipt_capacity.
// A failed commit is INTERNAL_ERROR vault_unavailable with
// mutationMayHaveApplied true, and the vault stops answering until it is
// reopened.
func (v *Vault) Put(req PutRequest) (PutResult, *protocol.Error) {
	if perr := CheckName(req.Name); perr != nil {
		return PutResult{}, perr
	}
	if perr := protocol.CheckSecretValueSize(len(req.Value)); perr != nil {
		return PutResult{}, perr
	}
	if perr := checkRecord(req.Family, req.Record); perr != nil {
		return PutResult{}, perr
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.usable() {
		return PutResult{}, errUnavailable()
	}
	now := v.now()
	name := req.Name
	old := v.entries[name]
	var rec *record
	if req.Record != nil {
		rk := recKey{req.Family, req.Record.Key}
		if prev := v.records[rk]; prev != nil {
			return v.replay(prev, old, req, now)
		}
		limit := req.Record.MaxPerName
		if limit == 0 {
			limit = MaxRecordsPerName
		}
		if old != nil && old.Records >= limit {
			return PutResult{}, errRecordCapacity()
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
	if req.Record != nil {
		next.Records++
		rec = &record{Family: req.Family, Key: req.Record.Key, Value: req.Record.Value, Name: name,
			Revision: next.Revision, WrittenAtMs: now.UnixMilli()}
	}
	sealedValue, err := v.keys.seal(req.Value, valueAAD(name, next.Revision))
	if err != nil {
		return PutResult{}, errUnavailable()
	}
	if perr := v.commit(next, sealedValue, false, rec); perr != nil {
		return PutResult{}, perr
	}
	return PutResult{Revision: next.Revision, Written: true}, nil
}

// replay decides a put whose record key exists; callers hold v.mu.
func (v *Vault) replay(prev *record, cur *entry, req PutRequest, now time.Time) (PutResult, *protocol.Error) {
	if prev.Value != req.Record.Value || prev.Name != req.Name || cur == nil || !cur.live(now) || cur.Revision != prev.Revision {
		return PutResult{}, errRecordConflict()
	}
	stored, perr := v.openValue(cur)
	if perr != nil {
		return PutResult{}, perr
	}
	same := subtle.ConstantTimeCompare(stored, req.Value) == 1
	clear(stored)
	if !same {
		return PutResult{}, errRecordConflict()
	}
	return PutResult{Revision: prev.Revision, Written: false}, nil
}

// openValue decrypts the current value of e; callers hold v.mu.
func (v *Vault) openValue(e *entry) ([]byte, *protocol.Error) {
	var pt []byte
	err := v.db.View(func(tx *bolt.Tx) error {
		sealed := tx.Bucket(bucketValues).Get(v.keys.nameKey(e.Name))
		if sealed == nil {
			return ErrCorrupt
		}
		var err error
		pt, err = v.keys.open(sealed, valueAAD(e.Name, e.Revision))
		return err
	})
	if err != nil {
		return nil, errCorruptRecord()
	}
	return pt, nil
}

// commit writes a name's metadata and, when sealedValue is non-nil, its
// value ciphertext; removeValue deletes the ciphertext instead; rec, when
// non-nil, is written too. An entry that is inactive with no records is
// removed entirely. One fsync'd transaction; on success the in-memory
// state follows. Callers hold v.mu.
func (v *Vault) commit(e *entry, sealedValue []byte, removeValue bool, rec *record) *protocol.Error {
	bk := v.keys.nameKey(e.Name)
	drop := !e.Active && e.Records == 0
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
		if rec != nil {
			if err := putRecord(tx, v.keys, rec); err != nil {
				return err
			}
		}
		if drop {
			return ents.Delete(bk)
		}
		return putEntry(tx, v.keys, e)
	})
	if err != nil {
		// The transaction may or may not be durable; stop answering from
		// memory until the vault is reopened.
		v.failed = true
		return errWriteUnknown()
	}
	v.writes.Add(1)
	i, found := slices.BinarySearch(v.sorted, e.Name)
	if drop {
		delete(v.entries, e.Name)
		if found {
			v.sorted = slices.Delete(v.sorted, i, i+1)
		}
	} else {
		v.entries[e.Name] = e
		if !found {
			v.sorted = slices.Insert(v.sorted, i, e.Name)
		}
	}
	if rec != nil {
		v.records[recKey{rec.Family, rec.Key}] = rec
	}
	return nil
}

// Delete removes a name's value (vault.delete) and reports whether there
// was one. name must be in stored form (CheckName). A missing or already
// deleted name succeeds without a write. A name whose puts wrote records
// keeps its metadata (revision counter) so no later revision repeats one
// a record names; no list shows it.
func (v *Vault) Delete(name string) (bool, *protocol.Error) {
	if perr := CheckName(name); perr != nil {
		return false, perr
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.usable() {
		return false, errUnavailable()
	}
	old := v.entries[name]
	if old == nil || !old.Active {
		return false, nil
	}
	next := old.clone()
	next.Active = false
	next.ExpiresAtMs = 0
	if perr := v.commit(next, nil, true, nil); perr != nil {
		return false, perr
	}
	return true, nil
}

// ListResult is the first names of List and whether more exist.
type ListResult struct {
	Names []string // sorted bytewise; never nil
	More  bool     // more names hold a value than were returned
}

// List returns the first limit (1 to contract.VaultListMaxLimit) stored
// names with a current, unexpired value, sorted bytewise, and whether
// more exist (vault.list). Metadata kept for records of deleted names is
// never listed. A limit out of range is INVALID_PARAMS on "limit"; a
// vault that cannot answer is vault_unavailable.
func (v *Vault) List(limit int) (ListResult, *protocol.Error) {
	if limit < 1 || limit > contract.VaultListMaxLimit {
		return ListResult{}, protocol.InvalidParams("limit", fmt.Sprintf("limit must be 1 to %d", contract.VaultListMaxLimit))
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	if !v.usable() {
		return ListResult{}, errUnavailable()
	}
	// v.sorted keeps the names in order, so a list is one pass without a
	// sort (docs/SECRETS.md, "Performance").
	now := v.now()
	names := make([]string, 0, min(limit, len(v.sorted)))
	for _, n := range v.sorted {
		if !v.entries[n].live(now) {
			continue
		}
		if len(names) == limit {
			return ListResult{Names: names, More: true}, nil
		}
		names = append(names, n)
	}
	return ListResult{Names: names}, nil
}

// RecordState is a module record and the raw state of the name its put
// wrote (contract.VaultReceiptResult).
type RecordState struct {
	Found           bool
	Value           string
	Name            string
	Revision        uint64 // the revision the record's put wrote
	CurrentRevision uint64 // the name's current revision (0: no metadata)
	Live            bool   // the name holds a current, unexpired value
	WrittenAtMs     int64
}

// Record reads the record key of module family (vault.receipt). An
// unknown key is Found false; a vault that cannot answer is an error,
// never Found false. It decrypts no value and changes nothing.
func (v *Vault) Record(family, key string) (RecordState, *protocol.Error) {
	if perr := checkRecord(family, &Record{Key: key}); perr != nil {
		return RecordState{}, perr
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	if !v.usable() {
		return RecordState{}, errUnavailable()
	}
	r := v.records[recKey{family, key}]
	if r == nil {
		return RecordState{}, nil
	}
	st := RecordState{Found: true, Value: r.Value, Name: r.Name, Revision: r.Revision, WrittenAtMs: r.WrittenAtMs}
	if e := v.entries[r.Name]; e != nil {
		st.CurrentRevision = e.Revision
		st.Live = e.live(v.now())
	}
	return st, nil
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
	return v.openValue(e)
}

// Stats are content-free counts for operators (`lemon vault check`).
type Stats struct {
	Secrets     int // names with a current, unexpired value
	Expired     int // names whose value expired
	ReceiptOnly int // deleted names kept for the records their puts wrote
	Receipts    int // module records (the secrets module's receipts)
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
	}
	s.Receipts = len(v.records)
	return s, nil
}
