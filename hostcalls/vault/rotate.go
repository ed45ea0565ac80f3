package vault

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// RotateKey re-encrypts the whole vault under newKey (32 bytes) and makes
// every earlier record's binding stop matching (receipts: the spec's key
// rotation rule):
//
//  1. a new vault file is written beside the live one (<Dir>/vault.db.rotate)
//     with a fresh salt; every value is decrypted with the current key and
//     sealed under the new key at the next revision (so records naming the
//     old revision no longer match), every metadata record is resealed, and
//     module records are resealed as they were;
//  2. the new file is fsync'd, renamed over vault.db, and the directory is
//     fsync'd; a crash before the rename leaves the old vault (New removes
//     the leftover), after it the new one;
//  3. the vault reopens the new file and from then on uses newKey.
//
// The caller must then configure the node with the new key: the old key
// no longer opens the vault (ErrWrongKey). Rewriting the file also drops
// ciphertext that bbolt's free pages kept from deleted or replaced values.
func (v *Vault) RotateKey(newKey []byte) error {
	if len(newKey) != KeySize {
		return ErrKeyFormat
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.usable() {
		return ErrStorage
	}
	if subtle.ConstantTimeCompare(newKey, v.master) == 1 {
		return ErrSameKey
	}
	tmp := filepath.Join(v.dir, rotateFile)
	live := filepath.Join(v.dir, dbFile)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return ErrStorage
	}
	if err := v.writeRotated(tmp, newKey); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := v.db.Close(); err != nil {
		os.Remove(tmp)
		v.failed = true
		return ErrStorage
	}
	v.db = nil
	if err := os.Rename(tmp, live); err != nil {
		os.Remove(tmp)
		// The live file is untouched: reopen it under the current key.
		if v.open() != nil {
			v.failed = true
		}
		return ErrStorage
	}
	syncErr := syncDir(v.dir)
	old := v.master
	v.master = append([]byte(nil), newKey...)
	clear(old)
	if err := v.open(); err != nil {
		v.failed = true
		return err
	}
	v.writes.Add(1)
	if syncErr != nil {
		return syncErr
	}
	return nil
}

// writeRotated writes the re-encrypted vault to path and fsyncs it.
// Callers hold v.mu.
func (v *Vault) writeRotated(path string, newKey []byte) error {
	ndb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout})
	if err != nil {
		return ErrStorage
	}
	oldTx, err := v.db.Begin(false)
	if err != nil {
		ndb.Close()
		return ErrStorage
	}
	defer oldTx.Rollback()
	oldValues := oldTx.Bucket(bucketValues)
	err = ndb.Update(func(tx *bolt.Tx) error {
		nkeys, err := writeMeta(tx, newKey)
		if err != nil {
			return err
		}
		vals, ents := tx.Bucket(bucketValues), tx.Bucket(bucketEntries)
		for name, e := range v.entries {
			ne := e.clone()
			bk := nkeys.nameKey(name)
			if e.Active {
				sealed := oldValues.Get(v.keys.nameKey(name))
				if sealed == nil {
					return ErrCorrupt
				}
				pt, err := v.keys.open(sealed, valueAAD(name, e.Revision))
				if err != nil {
					return ErrCorrupt
				}
				ne.Revision++
				ns, err := nkeys.seal(pt, valueAAD(name, ne.Revision))
				clear(pt)
				if err != nil {
					return err
				}
				if err := vals.Put(bk, ns); err != nil {
					return err
				}
			}
			pt, err := json.Marshal(ne)
			if err != nil {
				return err
			}
			se, err := nkeys.seal(pt, entryAAD(bk))
			clear(pt)
			if err != nil {
				return err
			}
			if err := ents.Put(bk, se); err != nil {
				return err
			}
		}
		for _, r := range v.records {
			if err := putRecord(tx, nkeys, r); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := ndb.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return ErrCorrupt
		}
		return ErrStorage
	}
	f, err := os.Open(path)
	if err != nil {
		return ErrStorage
	}
	defer f.Close()
	if f.Sync() != nil {
		return ErrStorage
	}
	return nil
}
