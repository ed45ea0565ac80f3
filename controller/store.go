package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// op is one write of a batch: a put (value non-nil) or a delete.
type op struct {
	bucket, key string
	value       any
}

// apply writes a batch in one fsync'd transaction.
func (s *store) apply(ops ...op) error {
	if s.db == nil || len(ops) == 0 {
		return nil
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

// load calls fn for every record of a bucket.
func (s *store) load(bucket string, fn func(key string, value []byte) error) error {
	if s.db == nil {
		return nil
	}
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucket)).ForEach(func(k, v []byte) error { return fn(string(k), v) })
	})
}

func (s *store) close() error {
	if s.db == nil {
		return nil
	}
	return s.db.Close()
}
