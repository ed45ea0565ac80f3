package controller

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"lemon/host/moduleset"
	"lemon/protocol"
)

func testModuleSet(t *testing.T, size int) (*ModuleSet, []byte, moduleset.Manifest) {
	t.Helper()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	sum := sha256.Sum256(data)
	m := moduleset.Manifest{Modules: []moduleset.Module{{
		Family: "hostinfo", Version: "1.0.0", SHA256: hex.EncodeToString(sum[:]), Size: int64(size), File: "hostinfo.wasm",
		Methods: []moduleset.Method{{Name: "node.host.info", Version: 1, Scope: protocol.ScopeRead, Retry: protocol.RetryRead}},
	}}}
	ms, err := NewModuleSet(m, map[string][]byte{"hostinfo": data})
	if err != nil {
		t.Fatal(err)
	}
	return ms, data, m
}

func TestModuleSetServing(t *testing.T) {
	cfg := testConfig()
	ms, data, m := testModuleSet(t, 10000)
	cfg.ModuleSet = ms
	s := startServer(t, cfg)
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{MaxPayload: 4096}, nil)
	if n.hello.Module == nil || n.hello.Module.Digest != m.Digest() {
		t.Fatalf("hello-ok moduleSet: %s", n.hello.raw)
	}
	f := n.call(protocol.MethodModulesManifest, nil)
	var mr protocol.ModulesManifestResult
	json.Unmarshal(f.Payload, &mr)
	got, err := moduleset.ParseManifest(mr.Manifest)
	if !f.OK || err != nil || mr.Digest != m.Digest() || got.Digest() != m.Digest() {
		t.Fatalf("manifest: %s", f.raw)
	}
	// Fetch in chunks sized to the node's 4096-byte maxPayload.
	var buf bytes.Buffer
	chunks := 0
	for off := int64(0); ; chunks++ {
		f := n.call(protocol.MethodModulesFetch, protocol.ModulesFetchParams{SHA256: m.Modules[0].SHA256, Offset: off})
		if !f.OK || len(f.raw) > 4096 {
			t.Fatalf("fetch at %d (%d bytes): %.200s", off, len(f.raw), f.raw)
		}
		var r protocol.ModulesFetchResult
		json.Unmarshal(f.Payload, &r)
		b, _ := base64.StdEncoding.DecodeString(r.DataBase64)
		if int64(len(b)) != r.Length || r.Offset != off || r.Size != 10000 {
			t.Fatalf("chunk: %+v", r)
		}
		buf.Write(b)
		off += r.Length
		if r.EOF {
			break
		}
	}
	if !bytes.Equal(buf.Bytes(), data) || chunks < 3 {
		t.Fatalf("reassembled %d bytes in %d chunks", buf.Len(), chunks+1)
	}
	// An explicit short length is honoured.
	f = n.call(protocol.MethodModulesFetch, protocol.ModulesFetchParams{SHA256: m.Modules[0].SHA256, Offset: 9990, Length: 5})
	var r protocol.ModulesFetchResult
	json.Unmarshal(f.Payload, &r)
	if r.Length != 5 || r.EOF {
		t.Fatalf("short: %s", f.raw)
	}
	// At EOF: empty and eof.
	f = n.call(protocol.MethodModulesFetch, protocol.ModulesFetchParams{SHA256: m.Modules[0].SHA256, Offset: 10000})
	json.Unmarshal(f.Payload, &r)
	if !f.OK || r.Length != 0 || !r.EOF {
		t.Fatalf("at eof: %s", f.raw)
	}
	wantError(t, n.call(protocol.MethodModulesFetch, protocol.ModulesFetchParams{SHA256: m.Modules[0].SHA256, Offset: 10001}), protocol.CodeInvalidParams, "")
	wantError(t, n.call(protocol.MethodModulesFetch, protocol.ModulesFetchParams{SHA256: hex.EncodeToString(make([]byte, 32))}),
		protocol.CodeNotFound, protocol.DomainModuleNotInSet)
	wantError(t, n.call(protocol.MethodModulesFetch, protocol.ModulesFetchParams{SHA256: "ABC"}), protocol.CodeInvalidParams, "")
	// Operators cannot fetch modules.
	op := connectOperator(t, s.url, adminToken)
	wantError(t, op.call(protocol.MethodModulesManifest, nil), protocol.CodeForbidden, "")
}

func TestModuleSetRejectsBadBytes(t *testing.T) {
	_, data, m := testModuleSet(t, 100)
	bad := append([]byte(nil), data...)
	bad[0] ^= 1
	if _, err := NewModuleSet(m, map[string][]byte{"hostinfo": bad}); err == nil {
		t.Fatal("mismatched bytes accepted")
	}
	if _, err := NewModuleSet(m, map[string][]byte{}); err == nil {
		t.Fatal("missing bytes accepted")
	}
}

// The controller refuses to pin a set nodes would refuse to fetch: 64
// modules pass, a 65th is refused before any byte is checked.
func TestNewModuleSetRefusesSetPastNodeBounds(t *testing.T) {
	build := func(n int) (moduleset.Manifest, map[string][]byte) {
		var m moduleset.Manifest
		mods := map[string][]byte{}
		for i := range n {
			b := []byte(fmt.Sprint("module ", i))
			sum := sha256.Sum256(b)
			fam := fmt.Sprintf("fam%d", i)
			m.Modules = append(m.Modules, moduleset.Module{Family: fam, Version: "1.0.0",
				SHA256: hex.EncodeToString(sum[:]), Size: int64(len(b)), File: fam + ".wasm"})
			mods[fam] = b
		}
		return m, mods
	}
	m, mods := build(moduleset.MaxSetModules)
	if _, err := NewModuleSet(m, mods); err != nil {
		t.Fatalf("64 modules: %v", err)
	}
	m, mods = build(moduleset.MaxSetModules + 1)
	if _, err := NewModuleSet(m, mods); !errors.Is(err, moduleset.ErrSetBounds) {
		t.Fatalf("65 modules: err = %v, want ErrSetBounds", err)
	}
	// Sizes adding up past 256 MiB are refused without the bytes.
	m, _ = build(5)
	for i := range m.Modules {
		m.Modules[i].Size = moduleset.MaxModuleBytes
	}
	m.Modules[4].Size = 1
	if _, err := NewModuleSet(m, nil); !errors.Is(err, moduleset.ErrSetBounds) {
		t.Fatalf("256 MiB + 1: err = %v, want ErrSetBounds", err)
	}
}

func TestNoModuleSet(t *testing.T) {
	s := startServer(t, testConfig())
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, nil)
	if n.hello.Module != nil {
		t.Fatalf("moduleSet without a pinned set: %s", n.hello.raw)
	}
	wantError(t, n.call(protocol.MethodModulesManifest, nil), protocol.CodeUnavailable, protocol.DomainModuleSetUnavailable)
}

func selfSigned(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, pool
}

func TestTLS(t *testing.T) {
	cfg := testConfig()
	tc, pool := selfSigned(t)
	cfg.TLS = tc
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(context.Background(), ln) }()
	defer func() { s.Close(); <-done }()
	d := websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: pool}}
	ws, _, err := d.Dial("wss://"+ln.Addr().String()+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.WriteJSON(protocol.Request{Type: "req", ID: "c", Method: "connect",
		Params: mustJSON(t, protocol.ConnectParams{Role: "operator", Auth: protocol.ConnectAuth{Token: readToken}})})
	var h protocol.HelloOK
	if err := ws.ReadJSON(&h); err != nil || h.Type != protocol.FrameHelloOK {
		t.Fatalf("wss hello: %v %+v", err, h)
	}
	// The connected TLS socket no longer counts as unauthenticated.
	if n, _ := s.guard.unauthenticated(""); n != 0 {
		t.Fatalf("%d unauthenticated sockets after a wss connect, want 0", n)
	}
	// Plain ws:// to the TLS port fails.
	if ws2, _, err := websocket.DefaultDialer.Dial("ws://"+ln.Addr().String()+"/ws", nil); err == nil {
		ws2.Close()
		t.Fatal("plaintext accepted on the TLS listener")
	}
}
