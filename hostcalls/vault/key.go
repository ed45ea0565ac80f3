package vault

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"lemon/internal/regfile"
)

// KeySize is the size of the master key in bytes (AES-256).
const KeySize = 32

// maxKeyText bounds what is read from a key file or variable, in bytes.
const maxKeyText = 1024

// Errors about the master key. Messages never include a path or key bytes.
var (
	ErrKeyFileMode  = errors.New("vault: key file must be a regular file readable only by its owner (chmod 600)")
	ErrKeyFormat    = errors.New("vault: master key must be 32 bytes: raw, 64 hex digits or standard base64")
	ErrKeyMissing   = errors.New("vault: master key not configured (set exactly one of KeyFile and KeyEnv)")
	ErrKeyEnvUnset  = errors.New("vault: the master-key environment variable is not set")
	ErrKeyFileRead  = errors.New("vault: key file could not be read")
	ErrKeyFileExist = errors.New("vault: key file already exists")
)

// LoadKeyFile reads a master key from a file that only its owner can read
// (mode 0600 or stricter; looser modes are refused, ErrKeyFileMode). The
// file holds the 32-byte key raw (exactly 32 bytes), or as 64 hex digits or
// standard base64 with optional surrounding white space (ErrKeyFormat
// otherwise).
func LoadKeyFile(path string) ([]byte, error) {
	// regfile.Open: a FIFO is refused at once instead of blocking start.
	f, err := regfile.Open(path)
	if errors.Is(err, regfile.ErrNotRegular) {
		return nil, ErrKeyFileMode
	}
	if err != nil {
		return nil, ErrKeyFileRead
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, ErrKeyFileRead
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 {
		return nil, ErrKeyFileMode
	}
	text, err := io.ReadAll(io.LimitReader(f, maxKeyText+1))
	if err != nil {
		return nil, ErrKeyFileRead
	}
	defer clear(text)
	return parseKey(text)
}

// loadKeyEnv reads the master key from the environment variable name and
// removes the variable from the process environment, so processes the
// worker starts later do not inherit it.
func loadKeyEnv(name string) ([]byte, error) {
	if name == "" || strings.ContainsAny(name, "=\x00") {
		return nil, ErrKeyMissing
	}
	text, ok := os.LookupEnv(name)
	if !ok {
		return nil, ErrKeyEnvUnset
	}
	os.Unsetenv(name)
	return parseKey([]byte(text))
}

// ParseKey decodes a master key: exactly 32 raw bytes, or 64 hex digits or
// standard base64 of 32 bytes with optional surrounding white space.
func ParseKey(text []byte) ([]byte, error) { return parseKey(text) }

func parseKey(text []byte) ([]byte, error) {
	if len(text) > maxKeyText {
		return nil, ErrKeyFormat
	}
	key := make([]byte, KeySize)
	if len(text) == KeySize {
		// Exactly 32 bytes: the raw key (no trimming, since a raw key may
		// begin or end with bytes that look like white space).
		copy(key, text)
		return key, nil
	}
	t := bytes.TrimSpace(text)
	if len(t) == 2*KeySize {
		if n, err := hex.Decode(key, t); err == nil && n == KeySize {
			return key, nil
		}
	}
	if len(t) == base64.StdEncoding.EncodedLen(KeySize) {
		if n, err := base64.StdEncoding.Strict().Decode(key, t); err == nil && n == KeySize {
			return key, nil
		}
	}
	return nil, ErrKeyFormat
}

// GenerateKeyFile writes a fresh random master key (64 hex digits and a
// newline) to a new file of mode 0600. It refuses to overwrite an existing
// file (ErrKeyFileExist) and fsyncs the file and its directory.
func GenerateKeyFile(path string) error {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("vault: random source failed: %w", err)
	}
	text := []byte(hex.EncodeToString(key) + "\n")
	defer clear(text)
	clear(key)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return ErrKeyFileExist
		}
		return errors.New("vault: key file could not be created")
	}
	if _, err := f.Write(text); err != nil {
		f.Close()
		os.Remove(path)
		return errors.New("vault: key file could not be written")
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return errors.New("vault: key file could not be synced")
	}
	if err := f.Close(); err != nil {
		return errors.New("vault: key file could not be closed")
	}
	return syncDir(filepath.Dir(path))
}

// syncDir fsyncs a directory so a rename or create in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return errors.New("vault: directory could not be opened for sync")
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return errors.New("vault: directory could not be synced")
	}
	return nil
}
