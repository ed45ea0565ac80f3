package store

import (
	"encoding/binary"
	"errors"
)

// The guest modules' durable namespaces (docs/ABI.md, "The module's
// store"). Each stored value carries its revision: the bbolt value is
// revTag, the revision (8 bytes, big-endian) and the JSON value. The
// revision comes from the bucket's own sequence (bbolt
// Bucket.NextSequence), so it grows with every write of the namespace
// and is never reused, not even after a delete: a compare-and-swap on it
// cannot be fooled by a key deleted and created again (ABA).
//
// Values written before revisions existed are bare JSON (which never
// starts with a 0 byte) and read as revision legacyRevision; the sequence
// starts above it, so no later write reuses it.
//
// The namespace's key count is kept under countKey, a key no guest can
// name (keys have no NUL) and scans skip, so the key budget costs one
// read per new key instead of a walk of the namespace. A bucket without
// it (written before it existed) is counted once.

const (
	revTag         = 0x00
	revHeader      = 9 // revTag + 8 bytes of revision
	legacyRevision = 1
	countKey       = "\x00count"
	// MaxScanBytes bounds the key and value bytes one store.scan returns
	// (at least one entry always fits: 512 + 65536 < 1 MiB).
	MaxScanBytes = 1 << 20
)

// decodeValue splits a stored module value into its revision and JSON.
func decodeValue(raw []byte) (rev uint64, value []byte) {
	if len(raw) >= revHeader && raw[0] == revTag {
		return binary.BigEndian.Uint64(raw[1:revHeader]), raw[revHeader:]
	}
	return legacyRevision, raw
}

func encodeValue(rev uint64, value []byte) []byte {
	out := make([]byte, revHeader+len(value))
	out[0] = revTag
	binary.BigEndian.PutUint64(out[1:revHeader], rev)
	copy(out[revHeader:], value)
	return out
}

// nextRevision returns a revision never used in this namespace.
func (t *Tx) nextRevision() (uint64, error) {
	if t.b.Sequence() < legacyRevision {
		if err := t.b.SetSequence(legacyRevision); err != nil {
			return 0, err
		}
	}
	return t.b.NextSequence()
}

// modEntry is one module key as read: absent when rev is 0.
type modEntry struct {
	value []byte
	rev   uint64
}

func (t *Tx) getEntry(key string) modEntry {
	raw, ok := t.Get(key)
	if !ok {
		return modEntry{}
	}
	rev, v := decodeValue(raw)
	return modEntry{value: v, rev: rev}
}

// keyCount returns the number of guest keys of the namespace.
func (t *Tx) keyCount() int {
	if v := t.b.Get([]byte(countKey)); len(v) == 8 {
		return int(binary.BigEndian.Uint64(v))
	}
	n := 0
	t.ForEach("", "", func(k string, _ []byte) error {
		if k[0] != 0 {
			n++
		}
		return nil
	})
	return n
}

func (t *Tx) setKeyCount(n int) error {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(n))
	return t.b.Put([]byte(countKey), v[:])
}

// casOp is one write of a module key: a put (check false), a create
// (check, expected 0), a compare-and-swap, or with a nil value a delete.
type casOp struct {
	key      string
	value    []byte // nil: delete
	check    bool   // compare the revision with expected
	expected uint64 // 0: the key must be absent
}

// casResult is what a write decided.
type casResult struct {
	swapped bool
	rev     uint64 // new revision when swapped (0 after a delete), else the current one
	existed bool   // the key existed before
	full    bool   // refused: a new key in a namespace at its key limit
}

// apply runs op in tx; it writes nothing unless it swaps. It reports its
// decision through the result, never through an error (an error is a
// store failure), so it is safe to run in a group commit (Namespace.Batch)
// and idempotent.
func (t *Tx) apply(op casOp, maxKeys int) (casResult, error) {
	cur := t.getEntry(op.key)
	res := casResult{rev: cur.rev, existed: cur.rev != 0}
	if op.check && cur.rev != op.expected {
		return res, nil
	}
	if op.value == nil {
		if cur.rev != 0 {
			n := t.keyCount()
			if err := t.Delete(op.key); err != nil {
				return casResult{}, err
			}
			if err := t.setKeyCount(n - 1); err != nil {
				return casResult{}, err
			}
		}
		res.swapped, res.rev = true, 0
		return res, nil
	}
	if cur.rev == 0 {
		n := t.keyCount()
		if n >= maxKeys {
			res.full = true
			return res, nil
		}
		if err := t.setKeyCount(n + 1); err != nil {
			return casResult{}, err
		}
	}
	rev, err := t.nextRevision()
	if err != nil {
		return casResult{}, err
	}
	if err := t.Put(op.key, encodeValue(rev, op.value)); err != nil {
		return casResult{}, err
	}
	res.swapped, res.rev = true, rev
	return res, nil
}

// modWrite runs op in one fsync'd transaction of the module namespace of
// family (group-committed with concurrent writers). A conditional write
// that a read already shows will not write (a revision mismatch, a create
// over an existing key, a delete of an absent key) answers from that read
// without a write transaction: the answer holds at the read, and losers
// of a CAS race cost no fsync.
func (s *Store) modWrite(family string, op casOp) (casResult, error) {
	n, err := s.moduleNamespace(family)
	if err != nil {
		return casResult{}, err
	}
	if op.check || op.value == nil {
		var cur modEntry
		if err := n.View(func(tx *Tx) error { cur = tx.getEntry(op.key); return nil }); err != nil {
			return casResult{}, err
		}
		if op.check && cur.rev != op.expected {
			return casResult{rev: cur.rev, existed: cur.rev != 0}, nil
		}
		if op.value == nil && cur.rev == 0 {
			return casResult{swapped: true}, nil
		}
	}
	var res casResult
	err = n.Batch(func(tx *Tx) error {
		var err error
		res, err = tx.apply(op, s.maxKeys)
		return err
	})
	return res, err
}

// modGet reads one module key.
func (s *Store) modGet(family, key string) (modEntry, error) {
	n, err := s.moduleNamespace(family)
	if err != nil {
		return modEntry{}, err
	}
	var e modEntry
	err = n.View(func(tx *Tx) error { e = tx.getEntry(key); return nil })
	return e, err
}

var errStop = errors.New("stop")

// scanLimits bounds one scan: at most limit entries and maxBytes of keys
// and values; keysOnly counts keys only (store.list).
type scanLimits struct {
	limit    int
	maxBytes int
	keysOnly bool
}

// scanned is a scan's entries, in byte order of key.
type scanned struct {
	keys   []string
	values [][]byte
	revs   []uint64
	exps   []int64
	more   bool
	bytes  int
	limits scanLimits
}

// add appends one entry unless a bound is reached, in which case it sets
// more and reports false.
func (sc *scanned) add(key string, value []byte, rev uint64, exp int64) bool {
	size := len(key)
	if !sc.limits.keysOnly {
		size += len(value)
	}
	if len(sc.keys) == sc.limits.limit || sc.bytes+size > sc.limits.maxBytes {
		sc.more = true
		return false
	}
	sc.bytes += size
	sc.keys = append(sc.keys, key)
	if !sc.limits.keysOnly {
		sc.values = append(sc.values, append([]byte(nil), value...))
		sc.revs = append(sc.revs, rev)
		sc.exps = append(sc.exps, exp)
	}
	return true
}

// modScan walks the module namespace of family.
func (s *Store) modScan(family, prefix, after string, lim scanLimits) (*scanned, error) {
	n, err := s.moduleNamespace(family)
	if err != nil {
		return nil, err
	}
	sc := &scanned{keys: []string{}, limits: lim}
	err = n.View(func(tx *Tx) error {
		err := tx.ForEach(prefix, after, func(k string, raw []byte) error {
			if k[0] == 0 { // countKey
				return nil
			}
			rev, v := decodeValue(raw)
			if !sc.add(k, v, rev, 0) {
				return errStop
			}
			return nil
		})
		if errors.Is(err, errStop) {
			return nil
		}
		return err
	})
	return sc, err
}
