package tlsdev_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"lemon/client/tlsdev"
)

func TestWriteReusesCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	f, err := tlsdev.Write(dir, []string{"localhost", "127.0.0.1", "node.example"})
	if err != nil {
		t.Fatal(err)
	}
	if f.CAReused {
		t.Fatal("first run reused a CA")
	}
	for path, mode := range map[string]os.FileMode{f.CA: 0o644, f.CAKey: 0o600, f.Cert: 0o644, f.Key: 0o600} {
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != mode {
			t.Fatalf("%s: %v mode %v, want %v", filepath.Base(path), err, st.Mode().Perm(), mode)
		}
	}
	caPEM, _ := os.ReadFile(f.CA)
	firstCert, _ := os.ReadFile(f.Cert)
	verify(t, caPEM, f, "node.example")
	verify(t, caPEM, f, "127.0.0.1")

	g, err := tlsdev.Write(dir, []string{"other.example"})
	if err != nil {
		t.Fatal(err)
	}
	if !g.CAReused {
		t.Fatal("second run made a new CA")
	}
	caPEM2, _ := os.ReadFile(g.CA)
	secondCert, _ := os.ReadFile(g.Cert)
	if !bytes.Equal(caPEM, caPEM2) || bytes.Equal(firstCert, secondCert) {
		t.Fatal("want the same CA and a new server certificate")
	}
	verify(t, caPEM, g, "other.example")
}

func verify(t *testing.T, caPEM []byte, f tlsdev.Files, host string) {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
		t.Fatalf("verify %s: %v", host, err)
	}
	if d := time.Until(leaf.NotAfter); d > tlsdev.ServerValidity || d < tlsdev.ServerValidity-2*time.Hour {
		t.Fatalf("server certificate valid for %v", d)
	}
}

func TestWriteRefusesHalfCA(t *testing.T) {
	dir := t.TempDir()
	if _, err := tlsdev.Write(dir, tlsdev.DefaultHosts); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, tlsdev.CAKey))
	if _, err := tlsdev.Write(dir, tlsdev.DefaultHosts); err == nil {
		t.Fatal("a CA without its key was replaced or reused")
	}
	os.WriteFile(filepath.Join(dir, tlsdev.CAKey), []byte("garbage"), 0o600)
	if _, err := tlsdev.Write(dir, tlsdev.DefaultHosts); err == nil {
		t.Fatal("a garbage CA key was accepted")
	}
}

func TestParseHostsBounds(t *testing.T) {
	hosts := make([]string, tlsdev.MaxHosts+1)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%d.example", i)
	}
	if _, _, err := tlsdev.ParseHosts(hosts[:tlsdev.MaxHosts]); err != nil {
		t.Fatalf("%d hosts: %v", tlsdev.MaxHosts, err)
	}
	if _, _, err := tlsdev.ParseHosts(hosts); err == nil {
		t.Fatalf("%d hosts accepted", len(hosts))
	}
	long := ""
	for len(long) < 253 {
		long += "a."
	}
	long = long[:251] + "aa" // 253 bytes, labels of one byte
	if _, _, err := tlsdev.ParseHosts([]string{long}); err != nil {
		t.Fatalf("253-byte name: %v", err)
	}
	for _, bad := range []string{"", long + "a", "a b", "-x.example", "x..example", "a/b", "\x00"} {
		if _, _, err := tlsdev.ParseHosts([]string{bad}); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
	dns, ips, err := tlsdev.ParseHosts([]string{"Node.Example", "::1", "*.lan.example"})
	if err != nil || len(dns) != 2 || dns[0] != "node.example" || len(ips) != 1 {
		t.Fatalf("dns %v ips %v err %v", dns, ips, err)
	}
}
