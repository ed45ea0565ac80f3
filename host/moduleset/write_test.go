package moduleset

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeDescribe reads "family version" from the module bytes.
func fakeDescribe(b []byte) (string, string, []Method, error) {
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return "", "", nil, errors.New("not a module")
	}
	return f[0], f[1], []Method{{Name: "node." + f[0] + ".x", Version: 1, Capability: f[0]}}, nil
}

func TestWriteManifestIsDeterministicAndSorted(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"b.wasm": "bee 1.0.0", "a.wasm": "ay 2.0.0", ".tmp.wasm": "junk", "notes.txt": "x"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := WriteManifest(dir, fakeDescribe)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Modules) != 2 || m.Modules[0].File != "a.wasm" || m.Modules[1].Family != "bee" || m.Modules[0].Size != 8 {
		t.Fatalf("manifest %+v", m)
	}
	first, _ := os.ReadFile(filepath.Join(dir, ManifestFile))
	if _, err := WriteManifest(dir, fakeDescribe); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(filepath.Join(dir, ManifestFile))
	if !bytes.Equal(first, second) || !bytes.HasSuffix(first, []byte("}\n")) {
		t.Fatalf("not deterministic:\n%s\n%s", first, second)
	}
	got, _, err := LoadDir(dir)
	if err != nil || got.Digest() != m.Digest() {
		t.Fatalf("LoadDir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "."+ManifestFile+".new")); err == nil {
		t.Fatal("temporary manifest left behind")
	}
}

func TestWriteManifestRefusesAnUnreadableModuleOrTwoOfAFamily(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.wasm"), []byte("ay 1"), 0o644)
	os.WriteFile(filepath.Join(dir, "b.wasm"), []byte("garbage"), 0o644)
	if _, err := WriteManifest(dir, fakeDescribe); err == nil || !strings.Contains(err.Error(), "b.wasm") {
		t.Fatalf("err %v, want it to name b.wasm", err)
	}
	os.WriteFile(filepath.Join(dir, "b.wasm"), []byte("ay 2"), 0o644)
	if _, err := WriteManifest(dir, fakeDescribe); err == nil || !strings.Contains(err.Error(), "repeated") {
		t.Fatalf("err %v, want a repeated family", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err == nil {
		t.Fatal("a refused manifest was written")
	}
}
