// Package store is the node's durable key-value store (docs/ABI.md):
// one bbolt file, one bucket per namespace, every write transaction
// committed with fsync before it returns. It serves two kinds of user:
//
//   - host-side families (spawn receipts, fs previews, vault receipts) use
//     Namespace, whose Update runs one atomic, fsync'd transaction, so a
//     check and the write it decides commit together; Batch gives the same
//     guarantee per call while concurrent calls share one transaction and
//     one set of fsyncs (group commit, no added delay);
//   - guest modules reach only their own namespaces, named after the
//     calling module's family, through the host calls of Table: a durable
//     one in this file (values carry a revision, module.go) and a volatile
//     one in memory (volatile.go), lost when the Store is dropped.
//
// Host and guest namespaces live in separate bucket spaces ("host:" and
// "module:" prefixes), so a module can never read a host family's records
// (for example the process intent bindings).
//
// What this package does not do: encrypt (callers store no secrets or
// request content here), or protect the file from another process running
// as the worker's OS account.
package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// Limits of the guest-facing host calls and of namespace names.
const (
	MaxKeyBytes        = 512    // bytes of one key
	MaxValueBytes      = 65536  // bytes of one guest value (JSON)
	MaxNamespaceBytes  = 64     // bytes of a namespace name
	DefaultMaxKeys     = 100000 // keys a guest namespace may hold
	MaxListLimit       = 1000   // keys (entries) one store.list (store.scan) returns
	defaultLockTimeout = time.Second
)

// ErrUnavailable wraps every failure of the underlying file (I/O, fsync,
// lock, a closed store). Callers classify it; the wrapped text may hold a
// path and is never sent to a peer.
var ErrUnavailable = errors.New("store: unavailable")

// ErrInUse means another process (a second worker or `lemon dev` on the
// same state directory) holds the store's file lock.
var ErrInUse = errors.New("the state directory is in use by another lemon process; stop it or pass another --state")

// ErrInvalidName is returned for a namespace name outside
// [A-Za-z0-9._-]{1,64}.
var ErrInvalidName = errors.New("store: invalid namespace name")

// Config configures a Store.
type Config struct {
	// Path of the bbolt file. Its parent directory is created with mode
	// 0700 if missing; the file is created with mode 0600.
	Path string
	// LockTimeout bounds the wait for the file lock another process holds
	// (default 1 s); a second worker on the same state dir fails fast.
	LockTimeout time.Duration
	// MaxKeys bounds the keys of one guest namespace (default 100,000).
	MaxKeys int
	// VolatileMaxKeys and VolatileMaxBytes bound one module's volatile
	// namespace: its keys (default 10,000) and the bytes of its keys and
	// values (default 16 MiB).
	VolatileMaxKeys  int
	VolatileMaxBytes int
	// Now is the clock of volatile expiry (default time.Now).
	Now func() time.Time
}

// Store is an open durable store. It is safe for concurrent use.
type Store struct {
	db      *bolt.DB
	group   *group
	maxKeys int
	vol     *volatile
	now     func() time.Time
}

// New opens (creating if needed) the store at cfg.Path. The file is locked
// for the life of the Store; Close releases it.
func New(cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("store: Config.Path is required")
	}
	if cfg.LockTimeout <= 0 {
		cfg.LockTimeout = defaultLockTimeout
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	if cfg.VolatileMaxKeys <= 0 {
		cfg.VolatileMaxKeys = DefaultVolatileMaxKeys
	}
	if cfg.VolatileMaxBytes <= 0 {
		cfg.VolatileMaxBytes = DefaultVolatileMaxBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	dir := filepath.Dir(cfg.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: create state directory: %v", ErrUnavailable, err)
	}
	_, statErr := os.Stat(cfg.Path)
	created := errors.Is(statErr, os.ErrNotExist)
	db, err := bolt.Open(cfg.Path, 0o600, &bolt.Options{Timeout: cfg.LockTimeout})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, ErrInUse)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: open: %v", ErrUnavailable, err)
	}
	if created {
		// Make the new directory entry itself durable.
		if err := syncDir(dir); err != nil {
			db.Close()
			return nil, fmt.Errorf("%w: sync state directory: %v", ErrUnavailable, err)
		}
	}
	return &Store{db: db, group: &group{db: db}, maxKeys: cfg.MaxKeys,
		vol: newVolatile(cfg.VolatileMaxKeys, cfg.VolatileMaxBytes, cfg.Now), now: cfg.Now}, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Close releases the file. Later calls fail with ErrUnavailable.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("%w: close: %v", ErrUnavailable, err)
	}
	return nil
}

// Stats counts the store's committed writes since New.
type Stats struct {
	// Commits is the number of read-write transactions committed, each
	// with its own fsyncs.
	Commits uint64
	// Writes is the number of Update and Batch calls those commits
	// carried; Writes/Commits is the mean group size.
	Writes uint64
}

// Stats returns the write counters (for benchmarks and telemetry).
func (s *Store) Stats() Stats {
	return Stats{Commits: s.group.commits.Load(), Writes: s.group.writes.Load()}
}

// Path returns the file path of the store.
func (s *Store) Path() string { return s.db.Path() }

func validName(name string) bool {
	if len(name) < 1 || len(name) > MaxNamespaceBytes {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Namespace returns the host-side namespace name (bucket "host:"+name),
// for a host-call family's own records. Guest modules cannot reach it.
func (s *Store) Namespace(name string) (*Namespace, error) {
	if !validName(name) {
		return nil, ErrInvalidName
	}
	return &Namespace{db: s.db, group: s.group, bucket: []byte("host:" + name)}, nil
}

// moduleNamespace is the namespace of a guest module's family.
func (s *Store) moduleNamespace(family string) (*Namespace, error) {
	if !validName(family) {
		return nil, ErrInvalidName
	}
	return &Namespace{db: s.db, group: s.group, bucket: []byte("module:" + family)}, nil
}

// Namespace is one bucket of the store.
type Namespace struct {
	db     *bolt.DB
	group  *group
	bucket []byte
}

// Update runs fn in one read-write transaction of this namespace and
// commits it with fsync before returning. If fn returns an error nothing is
// written and that error is returned as is; a commit failure returns an
// error wrapping ErrUnavailable. Update calls are serialized store-wide.
func (n *Namespace) Update(fn func(tx *Tx) error) error {
	var fnErr error
	err := n.db.Update(func(btx *bolt.Tx) error {
		b, err := btx.CreateBucketIfNotExists(n.bucket)
		if err != nil {
			return err
		}
		if fnErr = fn(&Tx{b: b, writable: true}); fnErr != nil {
			return fnErr
		}
		return nil
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	n.group.commits.Add(1)
	n.group.writes.Add(1)
	return nil
}

// Batch is Update with group commit: concurrent Batch calls on any
// namespaces of this Store share one read-write transaction and one commit
// (one set of fsyncs), and Batch returns only after that commit reached
// the disk. fn runs in arrival order after the functions batched before it
// and sees their writes, so a check and the write it decides stay atomic
// against every other call.
//
// fn may run more than once (when another function of the group fails,
// the group is rolled back and run again without it), so it must be
// idempotent: reset anything it reports back at its start, and act on it
// only after Batch returned. If fn returns an error, it runs again in a
// transaction of its own, and only that run's writes or error count: an
// error is decided against committed state, never against a group that
// was rolled back. A commit failure returns an error wrapping
// ErrUnavailable to every call of the group.
//
// Prefer returning a decision through a captured variable with nil (and
// no write) over returning an error: an error costs the group a rollback
// and a re-run. fn may run on another caller's goroutine while the whole
// group waits for it: it must not block, take locks or call the Store.
func (n *Namespace) Batch(fn func(tx *Tx) error) error {
	var fnErr error
	run := func(btx *bolt.Tx) error {
		fnErr = nil
		b, err := btx.CreateBucketIfNotExists(n.bucket)
		if err != nil {
			return err
		}
		fnErr = fn(&Tx{b: b, writable: true})
		return fnErr
	}
	err := n.group.do(run)
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// View runs fn in a read-only transaction of this namespace. A namespace
// never written reads as empty.
func (n *Namespace) View(fn func(tx *Tx) error) error {
	var fnErr error
	err := n.db.View(func(btx *bolt.Tx) error {
		fnErr = fn(&Tx{b: btx.Bucket(n.bucket)})
		return fnErr
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// Tx is a transaction on one namespace. It is valid only inside the
// Update or View callback that received it.
type Tx struct {
	b        *bolt.Bucket // nil: namespace not created yet (read-only)
	writable bool
}

var errReadOnly = errors.New("store: write in a read-only transaction")

// Get returns a copy of the value of key, and whether it exists.
func (t *Tx) Get(key string) ([]byte, bool) {
	if t.b == nil {
		return nil, false
	}
	v := t.b.Get([]byte(key))
	if v == nil {
		return nil, false
	}
	return append([]byte(nil), v...), true
}

// Put sets key to value (empty values are stored as empty).
func (t *Tx) Put(key string, value []byte) error {
	if !t.writable {
		return errReadOnly
	}
	if key == "" {
		return errors.New("store: empty key")
	}
	if value == nil {
		value = []byte{}
	}
	return t.b.Put([]byte(key), value)
}

// Delete removes key; deleting an absent key is not an error.
func (t *Tx) Delete(key string) error {
	if !t.writable {
		return errReadOnly
	}
	return t.b.Delete([]byte(key))
}

// Count returns the number of keys starting with prefix ("" counts all).
func (t *Tx) Count(prefix string) int {
	n := 0
	t.ForEach(prefix, "", func(string, []byte) error { n++; return nil })
	return n
}

// ForEach calls fn for each key starting with prefix and sorting after
// after ("" starts at the first), in byte order. v is valid only during
// the call. An error from fn stops the walk and is returned.
func (t *Tx) ForEach(prefix, after string, fn func(key string, v []byte) error) error {
	if t.b == nil {
		return nil
	}
	c := t.b.Cursor()
	p := []byte(prefix)
	var k, v []byte
	if after != "" && after >= prefix {
		k, v = c.Seek([]byte(after))
		if k != nil && string(k) == after {
			k, v = c.Next()
		}
	} else {
		k, v = c.Seek(p)
	}
	for ; k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		if err := fn(string(k), v); err != nil {
			return err
		}
	}
	return nil
}

// validKey checks a guest key: 1–512 bytes of UTF-8 without NUL.
func validKey(k string) bool {
	return len(k) >= 1 && len(k) <= MaxKeyBytes && utf8.ValidString(k) && !strings.ContainsRune(k, 0)
}
