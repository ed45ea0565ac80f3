package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Buckets of the durable store (bbolt file controller.db in the state
// directory). Values are JSON records; every secret is stored as a SHA-256.
const (
	bucketNodes    = "nodes"    // nodeId → nodeRecord
	bucketSessions = "sessions" // hex sha256(session token) → sessionRecord
	bucketPairings = "pairings" // pairingId → pairingRecord
)

// store is write-through persistence for the registry. With no state
// directory it keeps nothing (db is nil) and the registry lives in memory.
type store struct {
	db *bolt.DB
	// be, when set, is the clustered backend (JetStream KV, kvstore.go)
	// that replaces bbolt; db is then nil. See docs/CLUSTER.md, "State".
	be backend
	// seq orders the writes of node records. apply stamps every node
	// record it writes with a fresh value (nodeRecord.WriteSeq), and a
	// flush snapshot carries the value taken when it was read; a snapshot
	// never replaces a stored record with a higher stamp. Both are taken
	// under the registry lock, so stamp order is the order in which the
	// registry's state changed. openStore's caller raises it past every
	// stamp loaded (observeSeq).
	seq atomic.Uint64
	// testHookSnapshotWrite, set only by tests before any use, runs at
	// the start of every writeSnapshots (as a slow or failing disk would);
	// an error it returns fails the write.
	testHookSnapshotWrite func() error
}

// StoreFile is the name of the durable store inside the state directory.
const StoreFile = "controller.db"

func openStore(dir string) (*store, error) {
	if dir == "" {
		return &store{}, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, errors.New("controller: cannot create the state directory")
	}
	db, err := bolt.Open(filepath.Join(dir, StoreFile), 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, errors.New("controller: the state directory is in use by another controller")
		}
		return nil, fmt.Errorf("controller: cannot open the durable store: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range []string{bucketNodes, bucketSessions, bucketPairings} {
			if _, err := tx.CreateBucketIfNotExists([]byte(b)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("controller: cannot initialise the durable store: %w", err)
	}
	return &store{db: db}, nil
}

// backend is durable state other than the bbolt file: the JetStream KV
// buckets of a clustered controller (kvBackend). The store keeps its
// write stamps and hands every write, snapshot and load to it.
type backend interface {
	// apply writes a batch (puts and deletes), in order.
	apply(ops []op) error
	// writeSnapshots merges flushed advertise and last-seen data into the
	// stored node records that exist.
	writeSnapshots(recs []nodeRecord) error
	load(bucket string, fn func(key string, value []byte) error) error
	open() bool
	close() error
}

// op is one write of a batch: a put (value non-nil) or a delete.
type op struct {
	bucket, key string
	value       any
}

// apply writes a batch in one fsync'd transaction. A node record in the
// batch (nodeRecord or *nodeRecord) is written with a fresh WriteSeq
// stamp; the caller holds the registry lock, as for every immediate write.
func (s *store) apply(ops ...op) error {
	if s.be != nil && len(ops) > 0 {
		return s.be.apply(ops)
	}
	if s.db == nil || len(ops) == 0 {
		return nil
	}
	var stamped []op // a copy, so the caller's slice is left as it is
	for i, o := range ops {
		var rec nodeRecord
		switch v := o.value.(type) {
		case nodeRecord:
			rec = v
		case *nodeRecord:
			rec = *v
		default:
			continue
		}
		if stamped == nil {
			stamped = slices.Clone(ops)
		}
		rec.WriteSeq = s.nextSeq()
		stamped[i].value = rec
	}
	if stamped != nil {
		ops = stamped
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, o := range ops {
			b := tx.Bucket([]byte(o.bucket))
			if o.value == nil {
				if err := b.Delete([]byte(o.key)); err != nil {
					return err
				}
				continue
			}
			v, err := json.Marshal(o.value)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(o.key), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// nextSeq returns a fresh node-record write stamp.
func (s *store) nextSeq() uint64 { return s.seq.Add(1) }

// observeSeq raises the stamp counter to at least v (a loaded record's
// WriteSeq), so stamps after a restart stay above the stored ones.
func (s *store) observeSeq(v uint64) {
	for {
		cur := s.seq.Load()
		if v <= cur || s.seq.CompareAndSwap(cur, v) {
			return
		}
	}
}

// writeSnapshots writes node records read under the registry lock when
// the stamp seq was taken, in one fsync'd transaction, without holding
// that lock. A record is skipped when the stored copy carries a stamp at
// or above seq (an immediate write, such as a rename or a re-pairing,
// committed the newer state after the snapshot) or when there is no
// stored copy (a flush only updates records their immediate writes
// created, and never brings back a deleted one).
func (s *store) writeSnapshots(seq uint64, recs []nodeRecord) error {
	if s.be != nil && len(recs) > 0 {
		return s.be.writeSnapshots(recs)
	}
	if s.db == nil || len(recs) == 0 {
		return nil
	}
	if h := s.testHookSnapshotWrite; h != nil {
		if err := h(); err != nil {
			return err
		}
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketNodes))
		for _, rec := range recs {
			cur := b.Get([]byte(rec.ID))
			if cur == nil {
				continue
			}
			var stored struct {
				WriteSeq uint64 `json:"writeSeq"`
			}
			// An undecodable stored copy is replaced: the snapshot is a
			// whole, valid record.
			if json.Unmarshal(cur, &stored) == nil && stored.WriteSeq >= seq {
				continue
			}
			rec.WriteSeq = seq
			v, err := json.Marshal(rec)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(rec.ID), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// load calls fn for every record of a bucket.
func (s *store) load(bucket string, fn func(key string, value []byte) error) error {
	if s.be != nil {
		return s.be.load(bucket, fn)
	}
	if s.db == nil {
		return nil
	}
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucket)).ForEach(func(k, v []byte) error { return fn(string(k), v) })
	})
}

// open reports whether the store can be read (true for a memory store).
func (s *store) open() bool {
	if s.be != nil {
		return s.be.open()
	}
	return s.db == nil || s.db.View(func(*bolt.Tx) error { return nil }) == nil
}

func (s *store) close() error {
	if s.be != nil {
		return s.be.close()
	}
	if s.db == nil {
		return nil
	}
	return s.db.Close()
}
