package cluster

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func TestCheckSecretBounds(t *testing.T) {
	if err := CheckSecret(strings.Repeat("a", MinSecretBytes)); err != nil {
		t.Fatalf("at the minimum: %v", err)
	}
	if err := CheckSecret(strings.Repeat("a", MinSecretBytes-1)); err == nil {
		t.Fatal("one below the minimum was accepted")
	}
	if err := CheckSecret(strings.Repeat("a", MaxSecretBytes)); err != nil {
		t.Fatalf("at the maximum: %v", err)
	}
	if err := CheckSecret(strings.Repeat("a", MaxSecretBytes+1)); err == nil {
		t.Fatal("one past the maximum was accepted")
	}
	for _, bad := range []string{"0123456789abcdef:", "0123456789abcdef@", "0123456789 abcdef", "0123456789abcdef/"} {
		if err := CheckSecret(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

// The secret comes from a file or the environment, never from argv; no
// error names the file or carries the secret.
func TestReadSecret(t *testing.T) {
	const canary = "canary-secret-0123456789abcdef"
	t.Setenv(SecretEnv, "")
	t.Setenv(SecretFileEnv, "")
	if _, err := ReadSecret(""); err != ErrNoSecret {
		t.Fatalf("no secret: %v", err)
	}
	t.Setenv(SecretEnv, canary)
	if s, err := ReadSecret(""); err != nil || s != canary {
		t.Fatalf("env: %q %v", s, err)
	}
	f := filepath.Join(t.TempDir(), "secret-file-canary")
	os.WriteFile(f, []byte("file-secret-0123456789abcdef\n"), 0o600)
	if s, err := ReadSecret(f); err != nil || s != "file-secret-0123456789abcdef" {
		t.Fatalf("file: %q %v", s, err)
	}
	_, err := ReadSecret(f + "-missing")
	if err == nil || strings.Contains(err.Error(), "canary") {
		t.Fatalf("missing file: %v", err)
	}
	t.Setenv(SecretEnv, "short:"+canary)
	_, err = ReadSecret("")
	if err == nil || strings.Contains(err.Error(), canary) {
		t.Fatalf("bad secret: %v", err)
	}
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// A route presenting another secret is refused: the two servers never
// form a route, while a peer with the right secret does.
func TestRoutesNeedTheSecret(t *testing.T) {
	a, b, c := freeAddr(t), freeAddr(t), freeAddr(t)
	start := func(name, listen string, peers []string, secret string) *Embedded {
		e, err := Start(Options{Name: name, StateDir: t.TempDir(), Listen: listen, Peers: peers, Secret: secret})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Shutdown)
		return e
	}
	ea := start("a", a, []string{b}, "right-secret-0123456789abcdef")
	eb := start("b", b, []string{a}, "wrong-secret-0123456789abcdef")
	ec := start("c", c, []string{a}, "right-secret-0123456789abcdef")
	deadline := time.Now().Add(10 * time.Second)
	for ec.Routes() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if ec.Routes() == 0 {
		t.Fatal("the peer with the secret formed no route")
	}
	if eb.Routes() != 0 {
		t.Fatalf("the peer with a wrong secret has %d routes", eb.Routes())
	}
	_ = ea
}

// A cluster of one (no peers yet) starts with JetStream and serves KV.
func TestClusterOfOne(t *testing.T) {
	e, err := Start(Options{Name: "solo", StateDir: t.TempDir(), Listen: freeAddr(t), Secret: "solo-secret-0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	nc, err := e.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var kv jetstream.KeyValue
	for kv == nil && ctx.Err() == nil {
		if kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "t", Replicas: e.Replicas}); err != nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if kv == nil {
		t.Fatalf("no KV: %v", err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if ent, err := kv.Get(ctx, "k"); err != nil || string(ent.Value()) != "v" {
		t.Fatalf("get: %v", err)
	}
}
