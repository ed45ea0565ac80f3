package vault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
)

// Domain-separation labels. Each derived key and each kind of sealed record
// has its own label, so a ciphertext or tag made for one purpose can never
// verify for another.
const (
	infoEncrypt = "lemon/vault/v1/encrypt"
	infoIndex   = "lemon/vault/v1/index"
	infoBinding = "lemon/vault/v1/binding"

	aadCheck  = "lemon/vault/v1/check"
	aadEntry  = "lemon/vault/v1/entry\x00"
	aadValue  = "lemon/vault/v1/value\x00"
	aadRecord = "lemon/vault/v1/record\x00"

	checkPlaintext = "lemon vault key check v1"
)

// saltSize is the size of the per-file HKDF salt in bytes.
const saltSize = 32

var errOpen = errors.New("vault: record failed authentication")

// keyring holds the keys derived from the master key and a vault file's
// salt with HKDF-SHA256:
//
//   - aead (AES-256-GCM) seals every stored record; each seal draws a
//     fresh random 96-bit nonce stored before the ciphertext;
//   - index keys HMAC-SHA256 bucket keys, so no name appears on disk;
//   - binding is derived for the format's key schedule (it keyed receipt
//     intent tags before module records) and is not used otherwise.
type keyring struct {
	aead    cipher.AEAD
	index   []byte
	binding []byte
}

func deriveKeyring(master, salt []byte) (*keyring, error) {
	if len(master) != KeySize {
		return nil, ErrKeyFormat
	}
	enc, err := hkdf.Key(sha256.New, master, salt, infoEncrypt, 32)
	if err != nil {
		return nil, err
	}
	defer clear(enc)
	block, err := aes.NewCipher(enc)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	index, err := hkdf.Key(sha256.New, master, salt, infoIndex, 32)
	if err != nil {
		return nil, err
	}
	binding, err := hkdf.Key(sha256.New, master, salt, infoBinding, 32)
	if err != nil {
		return nil, err
	}
	return &keyring{aead: aead, index: index, binding: binding}, nil
}

// seal encrypts plaintext with a fresh random nonce and returns
// nonce || ciphertext || tag.
func (k *keyring) seal(plaintext, aad []byte) ([]byte, error) {
	ns := k.aead.NonceSize()
	out := make([]byte, ns, ns+len(plaintext)+k.aead.Overhead())
	if _, err := rand.Read(out[:ns]); err != nil {
		return nil, err
	}
	return k.aead.Seal(out, out[:ns], plaintext, aad), nil
}

// open reverses seal; any change to the nonce, ciphertext or associated
// data fails with errOpen.
func (k *keyring) open(sealed, aad []byte) ([]byte, error) {
	ns := k.aead.NonceSize()
	if len(sealed) < ns+k.aead.Overhead() {
		return nil, errOpen
	}
	pt, err := k.aead.Open(nil, sealed[:ns], sealed[ns:], aad)
	if err != nil {
		return nil, errOpen
	}
	return pt, nil
}

// nameKey is the bucket key of a name: HMAC-SHA256(index, "name" || name).
func (k *keyring) nameKey(name string) []byte {
	m := hmac.New(sha256.New, k.index)
	m.Write([]byte("name\x00"))
	m.Write([]byte(name))
	return m.Sum(nil)
}

// recordKey is the bucket key of a module record:
// HMAC-SHA256(index, "record" || family || key). Names hold no NUL and
// this input starts "record\x00", distinct from every "name\x00" input.
func (k *keyring) recordKey(family, key string) []byte {
	m := hmac.New(sha256.New, k.index)
	var n [8]byte
	for _, f := range []string{"record", family, key} {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		m.Write(n[:])
		m.Write([]byte(f))
	}
	return m.Sum(nil)
}

// recordAAD binds a sealed module record to its bucket key.
func recordAAD(bucketKey []byte) []byte {
	return append([]byte(aadRecord), bucketKey...)
}

// entryAAD binds a sealed entry to its bucket key.
func entryAAD(bucketKey []byte) []byte {
	return append([]byte(aadEntry), bucketKey...)
}

// valueAAD binds a sealed value to its record's name and revision. Names
// hold no NUL, so the encoding is unambiguous.
func valueAAD(name string, revision uint64) []byte {
	b := make([]byte, 0, len(aadValue)+len(name)+9)
	b = append(b, aadValue...)
	b = append(b, name...)
	b = append(b, 0)
	return binary.BigEndian.AppendUint64(b, revision)
}
