package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lemon/controller"
	"lemon/host/moduleset"
	"lemon/protocol"
)

// writeSet writes a one-module set (family kv, declaring methods) into dir.
func writeSet(t *testing.T, dir, salt string, methods ...string) moduleset.Manifest {
	t.Helper()
	data := []byte("kv module " + salt)
	sum := sha256.Sum256(data)
	mod := moduleset.Module{Family: "kv", Version: "1.0.0", SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data)), File: "kv.wasm"}
	for _, m := range methods {
		mod.Methods = append(mod.Methods, moduleset.Method{Name: m, Version: 1, Capability: "kv", Scope: protocol.ScopeRead, Retry: protocol.RetryRead})
	}
	m := moduleset.Manifest{Modules: []moduleset.Module{mod}}
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, "kv.wasm"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, moduleset.ManifestFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return m
}

type lines chan string

func (l lines) Write(p []byte) (int, error) { l <- string(p); return len(p), nil }

func nextLine(t *testing.T, l lines) string {
	t.Helper()
	select {
	case s := <-l:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no log line")
	}
	return ""
}

// SIGHUP re-reads --module-set DIR: a valid set is pinned, one that fails
// validation is refused (logged, naming the module and method) and the
// pinned set keeps serving.
func TestSIGHUPRepins(t *testing.T) {
	dir := t.TempDir()
	a := writeSet(t, dir, "a", "node.kv.get")
	ms, err := controller.LoadModuleSetDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := controller.New(controller.Config{ModuleSet: ms})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := make(chan os.Signal)
	out := make(lines, 4)
	go watchRepin(ctx, "lemon controller", sig, srv, dir, out, &sync.Mutex{})

	sig <- nil
	if l := nextLine(t, out); !strings.Contains(l, "digest unchanged") || srv.ModuleSet().Digest() != a.Digest() {
		t.Fatalf("unchanged: %q", l)
	}

	b := writeSet(t, dir, "b", "node.kv.get", "node.kv.put")
	sig <- nil
	if l := nextLine(t, out); !strings.Contains(l, "re-pinned module set "+b.Digest()) || srv.ModuleSet().Digest() != b.Digest() {
		t.Fatalf("re-pin: %q", l)
	}

	// A set that fails validation: a method outside the module's namespace.
	writeSet(t, dir, "c", "node.other.get")
	sig <- nil
	l := nextLine(t, out)
	if !strings.Contains(l, "refused") || !strings.Contains(l, "module kv") || !strings.Contains(l, "node.other.get") ||
		!strings.Contains(l, b.Digest()+" keeps serving") || srv.ModuleSet().Digest() != b.Digest() {
		t.Fatalf("bad set: %q", l)
	}
	// A set whose bytes do not match its manifest.
	writeSet(t, dir, "d", "node.kv.get")
	os.WriteFile(filepath.Join(dir, "kv.wasm"), []byte("tampered"), 0o600)
	sig <- nil
	if l := nextLine(t, out); !strings.Contains(l, "refused") || srv.ModuleSet().Digest() != b.Digest() {
		t.Fatalf("tampered set: %q", l)
	}
}

func TestSIGHUPWithoutDirectory(t *testing.T) {
	if msg := repin(nil, ""); !strings.Contains(msg, "nothing to re-read") {
		t.Fatal(msg)
	}
}

// `lemon controller --module-set DIR` refuses at start a set whose
// declarations clash, naming the module and the method.
func TestControllerRefusesClashingSetAtStart(t *testing.T) {
	for name, c := range map[string]struct {
		method string
		want   []string
	}{
		"first-party method": {"node.host.info", []string{"module kv", "node.host.info", "first-party family hostinfo"}},
		"outside namespace":  {"node.other.get", []string{"module kv", "node.other.get", "node.kv.*"}},
	} {
		dir := t.TempDir()
		writeSet(t, dir, "x", c.method)
		var out strings.Builder
		code := runController([]string{"--listen", "127.0.0.1:0", "--state", t.TempDir(), "--module-set", dir},
			func(string) string { return "" }, &out)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1 (%s)", name, code, out.String())
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: %q lacks %q", name, out.String(), w)
			}
		}
	}
}
