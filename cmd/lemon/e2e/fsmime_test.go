package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"lemon/host/hosttest"
	"lemon/host/moduleset"
)

// A behaviour change shipped as a module (issue 11): node.fs.stat's MIME
// type comes from the fs module's table, not the node binary. The test
// builds plugins/fs with another table (shape.Overrides: .txt is
// text/x-lemon-e2e) and a higher version, pins a set holding it in a
// running `lemon dev` (SIGHUP), and the same node binary then answers
// the new type; pinning the built-in set again brings text/plain back.
func TestFSModuleMIMEChangeShipsAsModule(t *testing.T) {
	base, step := offlineAuthor(t)
	stock := filepath.Join(base, "stock")
	step("modules", "export", stock)
	changed := filepath.Join(base, "changed")
	step("modules", "export", changed)

	wasm := filepath.Join(base, "fs-mime.wasm")
	build := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", wasm,
		"-ldflags", "-X main.versionOverride=1.2.1-mime -X lemon/plugins/fs/shape.Overrides=txt=text/x-lemon-e2e", "./plugins/fs")
	build.Dir = hosttest.RepoRoot()
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the changed fs module: %v\n%s", err, out)
	}
	pinModule(t, changed, "fs", wasm, "1.2.1-mime")

	set := filepath.Join(base, "set")
	copySet(t, stock, set)
	d := startDev(t, base, "--module-set", set)
	file := filepath.Join(d.cwd, "notes.txt")
	if err := os.WriteFile(file, []byte("hi\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mime := func() string {
		r := d.op.call(t, "node.fs.stat", map[string]any{"nodeId": d.nodeID, "path": file})
		if r.code != 0 {
			return ""
		}
		var st struct {
			Mime string `json:"mime"`
			Size int64  `json:"size"`
		}
		if json.Unmarshal([]byte(r.stdout), &st) != nil || st.Size != 3 {
			t.Fatalf("node.fs.stat: %s", r.stdout)
		}
		return st.Mime
	}
	if got := mime(); got != "text/plain" {
		t.Fatalf("stock module: mime %q", got)
	}
	repin := func(from, want string) {
		t.Helper()
		copySet(t, from, set)
		if err := d.p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		d.p.waitFor(t, regexp.MustCompile(`lemon dev: SIGHUP: re-pinned module set [0-9a-f]{64}`), 30*time.Second)
		deadline := time.Now().Add(60 * time.Second)
		for got := mime(); got != want; got = mime() {
			if time.Now().After(deadline) {
				t.Fatalf("after re-pinning, mime %q, want %q\n%s", got, want, d.p.output())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	repin(changed, "text/x-lemon-e2e")
	repin(stock, "text/plain")
	if d.p.exited() {
		t.Fatalf("lemon dev exited: %s", d.p.output())
	}
}

// pinModule replaces family's module of the set in dir by the file wasm,
// pinned at version with its sha256 and size.
func pinModule(t *testing.T, dir, family, wasm, version string) {
	t.Helper()
	m, _, err := moduleset.Load(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for i, mod := range m.Modules {
		if mod.Family != family {
			continue
		}
		sum := sha256.Sum256(b)
		m.Modules[i].SHA256, m.Modules[i].Size, m.Modules[i].Version = hex.EncodeToString(sum[:]), int64(len(b)), version
		if err := os.WriteFile(filepath.Join(dir, mod.File), b, 0o600); err != nil {
			t.Fatal(err)
		}
		found = true
	}
	if !found {
		t.Fatalf("no %s module in %s", family, dir)
	}
	mj, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, moduleset.ManifestFile), mj, 0o600); err != nil {
		t.Fatal(err)
	}
}

// copySet copies the set directory from into to (files replaced).
func copySet(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
