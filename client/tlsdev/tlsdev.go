// Package tlsdev makes a local certificate authority and server
// certificates for trying wss:// (`lemon tls dev`, docs/DEPLOY.md "wss in
// a minute"). It is for development and small private deployments; a
// public deployment uses its own PKI.
package tlsdev

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"lemon/internal/regfile"
)

// File names inside the directory Write fills.
const (
	CAFile   = "ca.pem"         // the CA certificate: give it to dialers (--ca-file)
	CAKey    = "ca-key.pem"     // the CA private key (0600); keep it on this machine
	CertFile = "server.pem"     // the server certificate (--tls-cert)
	KeyFile  = "server-key.pem" // the server private key (0600; --tls-key)
)

// Validity periods.
const (
	CAValidity     = 5 * 365 * 24 * time.Hour
	ServerValidity = 365 * 24 * time.Hour
)

// Bounds on the host list.
const (
	MaxHosts   = 64
	maxHostLen = 253
	maxPEM     = 64 << 10
)

// DefaultHosts is the host list when none is given.
var DefaultHosts = []string{"localhost", "127.0.0.1", "::1"}

// CA is a certificate authority held in memory.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	PEM  []byte // the certificate, PEM-encoded
}

// NewCA makes a self-signed ECDSA P-256 CA valid from now-1h until notAfter.
func NewCA(name string, notAfter time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"lemon dev"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issue makes a server certificate for hosts (DNS names or IP addresses),
// valid from notBefore to notAfter, and returns it and its key as PEM.
func (ca *CA) Issue(hosts []string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte, err error) {
	dns, ips, err := ParseHosts(hosts)
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: hosts[0], Organization: []string{"lemon dev"}},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// ParseHosts splits hosts into DNS names and IP addresses. It refuses an
// empty list, more than MaxHosts entries, and a name that is empty, longer
// than 253 bytes, holds anything but letters, digits, '-', '.' and a
// leading "*.", or ends in an all-digit label (a mistyped IP address).
func ParseHosts(hosts []string) (dns []string, ips []net.IP, err error) {
	if len(hosts) == 0 {
		return nil, nil, errors.New("tls dev: no host names")
	}
	if len(hosts) > MaxHosts {
		return nil, nil, fmt.Errorf("tls dev: %d host names, at most %d", len(hosts), MaxHosts)
	}
	for i, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
			continue
		}
		if !validName(h) {
			return nil, nil, fmt.Errorf("tls dev: host %d is not a DNS name or IP address", i+1)
		}
		dns = append(dns, strings.ToLower(h))
	}
	return dns, ips, nil
}

func validName(h string) bool {
	if h == "" || len(h) > maxHostLen {
		return false
	}
	h = strings.TrimPrefix(h, "*.")
	labels := strings.Split(h, ".")
	// A name whose last label is all digits is a mistyped IP address
	// (1.2.3.4.5, 10.0.0.256, 010.0.0.1): as a DNS name it would match no
	// client (no top-level domain is numeric), so it is refused.
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" {
		return false
	}
	for _, label := range labels {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// Files are the paths Write produced.
type Files struct {
	CA, CAKey, Cert, Key string
	// CAReused is true when an existing CA in the directory was kept.
	CAReused bool
}

// Write fills dir (created 0700 if missing) with a CA and a server
// certificate for hosts. An existing CA (ca.pem and ca-key.pem) is reused,
// so dialers that trust it keep working; the server certificate is always
// reissued. A CA certificate without its key, or a CA that no longer
// parses or has expired, is an error: Write never replaces a CA.
func Write(dir string, hosts []string) (Files, error) {
	if _, _, err := ParseHosts(hosts); err != nil {
		return Files{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Files{}, fmt.Errorf("tls dev: cannot create the directory: %w", err)
	}
	f := Files{
		CA: filepath.Join(dir, CAFile), CAKey: filepath.Join(dir, CAKey),
		Cert: filepath.Join(dir, CertFile), Key: filepath.Join(dir, KeyFile),
	}
	ca, err := loadCA(f.CA, f.CAKey)
	switch {
	case err == nil:
		f.CAReused = true
	case errors.Is(err, os.ErrNotExist):
		if ca, err = NewCA("lemon dev CA", time.Now().Add(CAValidity)); err != nil {
			return Files{}, err
		}
		kder, err := x509.MarshalECPrivateKey(ca.Key)
		if err != nil {
			return Files{}, err
		}
		if err := writeFile(f.CAKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
			return Files{}, err
		}
		if err := writeFile(f.CA, ca.PEM, 0o644); err != nil {
			return Files{}, err
		}
	default:
		return Files{}, err
	}
	notAfter := time.Now().Add(ServerValidity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	certPEM, keyPEM, err := ca.Issue(hosts, time.Now().Add(-time.Hour), notAfter)
	if err != nil {
		return Files{}, err
	}
	if err := writeFile(f.Key, keyPEM, 0o600); err != nil {
		return Files{}, err
	}
	if err := writeFile(f.Cert, certPEM, 0o644); err != nil {
		return Files{}, err
	}
	return f, nil
}

// loadCA reads an existing CA. Both files missing is os.ErrNotExist.
func loadCA(certPath, keyPath string) (*CA, error) {
	certPEM, cerr := readBounded(certPath)
	keyPEM, kerr := readBounded(keyPath)
	switch {
	case errors.Is(cerr, os.ErrNotExist) && errors.Is(kerr, os.ErrNotExist):
		return nil, os.ErrNotExist
	case cerr != nil || kerr != nil:
		return nil, fmt.Errorf("tls dev: the directory holds only one of %s and %s (or cannot read it); remove both to make a new CA", CAFile, CAKey)
	}
	bad := fmt.Errorf("tls dev: %s or %s is not a CA this command wrote; remove both to make a new CA", CAFile, CAKey)
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil || cb.Type != "CERTIFICATE" {
		return nil, bad
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil || !cert.IsCA {
		return nil, bad
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, bad
	}
	if time.Now().After(cert.NotAfter) {
		return nil, fmt.Errorf("tls dev: the CA in the directory has expired; remove %s and %s to make a new one", CAFile, CAKey)
	}
	return &CA{Cert: cert, Key: key, PEM: certPEM}, nil
}

func readBounded(path string) ([]byte, error) {
	// A FIFO, directory or device is refused without waiting
	// (internal/regfile).
	return regfile.Read(path, maxPEM)
}

// writeFile replaces path atomically with data at mode perm.
func writeFile(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("tls dev: cannot write %s", filepath.Base(path))
	}
	defer os.Remove(tmp.Name())
	err = tmp.Chmod(perm)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("tls dev: cannot write %s", filepath.Base(path))
	}
	return nil
}
