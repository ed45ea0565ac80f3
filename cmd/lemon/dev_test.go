package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A module set that does not verify stops lemon dev before it listens,
// naming the directory and the reason.
func TestDevModuleSetMustVerify(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	tampered := filepath.Join(t.TempDir(), "set")
	if code, _, errOut := modulesT("export", tampered); code != 0 {
		t.Fatal(errOut)
	}
	if err := os.WriteFile(filepath.Join(tampered, "hostinfo.wasm"), []byte("\x00asm tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{missing: "no such file", tampered: "do not match the pinned sha256"} {
		var out, errb bytes.Buffer
		code := runDev(context.Background(), []string{"--listen", "127.0.0.1:0", "--state", t.TempDir(), "--module-set", dir},
			func(string) string { return "" }, &out, &errb)
		if code != 1 || !strings.Contains(errb.String(), "lemon dev: --module-set "+dir+":") || !strings.Contains(errb.String(), want) {
			t.Errorf("--module-set %s: exit %d, stderr %q", dir, code, errb.String())
		}
	}
}
