package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io/fs"
	"os"
	"strings"

	"github.com/gorilla/websocket"

	"lemon/internal/regfile"
)

// EnvCAFile names the environment variable that supplies a CA file when
// Options.CAFile is empty (docs/DEPLOY.md, "TLS").
const EnvCAFile = "LEMON_CA_FILE"

// maxCAFileBytes bounds a CA bundle read by LoadCAFile (1 MiB).
const maxCAFileBytes = 1 << 20

// ErrCAFile is wrapped by every CA-file failure. Its message names neither
// the path nor the file's content.
var ErrCAFile = errors.New("cannot use the CA file (--ca-file or " + EnvCAFile + ")")

// LoadCAFile reads a PEM bundle of at most 1 MiB and returns the system
// roots plus every certificate in it. An unreadable, oversized or
// certificate-free file, or one that is not a regular file (a directory,
// FIFO or device), is an error wrapping ErrCAFile.
func LoadCAFile(path string) (*x509.CertPool, error) {
	pem, err := regfile.Read(path, maxCAFileBytes)
	switch {
	case errors.Is(err, regfile.ErrNotRegular):
		return nil, caErr("it is not a regular file", nil)
	case errors.Is(err, regfile.ErrTooLarge):
		return nil, caErr("it is larger than 1 MiB", nil)
	case errors.Is(err, fs.ErrNotExist):
		return nil, caErr("it does not exist", err)
	case err != nil:
		return nil, caErr("cannot read it", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, caErr("it holds no PEM certificate", nil)
	}
	return pool, nil
}

// caFileError keeps the OS error for errors.Is/As without printing it (it
// would carry the path).
type caFileError struct {
	reason string
	err    error
}

func (e *caFileError) Error() string { return ErrCAFile.Error() + ": " + e.reason }
func (e *caFileError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrCAFile}
	}
	return []error{ErrCAFile, e.err}
}

func caErr(reason string, err error) error { return &caFileError{reason: reason, err: err} }

// withCA returns d, or for a wss:// URL a copy of it whose TLS
// configuration trusts caFile (else $LEMON_CA_FILE) besides the system
// roots. A ws:// URL never reads the file.
func withCA(d *websocket.Dialer, rawURL, caFile string) (*websocket.Dialer, error) {
	if !strings.HasPrefix(strings.ToLower(rawURL), "wss:") {
		return d, nil
	}
	if caFile == "" {
		caFile = os.Getenv(EnvCAFile)
	}
	if caFile == "" {
		return d, nil
	}
	pool, err := LoadCAFile(caFile)
	if err != nil {
		return nil, err
	}
	c := *d
	if c.TLSClientConfig != nil {
		c.TLSClientConfig = c.TLSClientConfig.Clone()
	} else {
		c.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	c.TLSClientConfig.RootCAs = pool
	return &c, nil
}
