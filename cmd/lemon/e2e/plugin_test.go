package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPluginAuthorPathWithTheStockBinary follows docs/PLUGINS.md "Your
// first plugin" with the built binary only, offline: plugin new, build
// with GOPROXY=off and an empty module cache, conformance, plugin run,
// modules export, plugin build --set, lemon dev --module-set, and
// node.describe listing the new method. Every step's --help answers on
// stdout with exit 0.
func TestPluginAuthorPathWithTheStockBinary(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOCACHE: %v", err)
	}
	environ := env(home, "GOCACHE="+strings.TrimSpace(string(gocache)), "GOPROXY=off", "GOFLAGS=-mod=mod",
		"GOSUMDB=off", "GOMODCACHE="+filepath.Join(base, "modcache"), "GOTOOLCHAIN=local")
	step := func(args ...string) result {
		t.Helper()
		r := run(t, base, environ, nil, args...)
		if r.code != 0 {
			t.Fatalf("lemon %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return r
	}
	for _, args := range [][]string{{"--help"}, {"plugin", "new", "--help"}, {"plugin", "build", "--help"},
		{"plugin", "inspect", "--help"}, {"plugin", "run", "--help"}, {"modules", "export", "--help"}, {"dev", "--help"}} {
		if r := step(args...); !strings.Contains(r.stdout, "usage:") || r.stderr != "" {
			t.Errorf("lemon %s: stdout %q, stderr %q", strings.Join(args, " "), r.stdout, r.stderr)
		}
	}

	step("plugin", "new", "greet")
	step("plugin", "build", "greet", "-o", "greet.wasm")
	if r := step("plugin", "conformance", "greet.wasm", "--cases", "greet/conformance"); !strings.Contains(r.stdout, "conformance: 10 passed, 0 failed") {
		t.Fatalf("conformance: %s", r.stdout)
	}
	r := step("plugin", "run", "greet.wasm", "node.greet.echo", `{"message":"hello"}`)
	if strings.TrimSpace(r.stdout) != "{\n  \"message\": \"hello\"\n}" {
		t.Fatalf("plugin run: %q", r.stdout)
	}
	step("modules", "export", "set")
	step("plugin", "build", "greet", "--set", "set")

	d := startDev(t, base, "--module-set", filepath.Join(base, "set"))
	desc := d.op.must(t, "node.describe", map[string]any{"nodeId": d.nodeID})
	methods, _ := desc["methods"].(map[string]any)
	if fmt.Sprint(methods["node.greet.echo"]) != "1" || methods["node.fs.read"] == nil {
		t.Fatalf("node.describe methods %v: want node.greet.echo beside the built-in families", methods)
	}
	b, _ := os.ReadFile(filepath.Join(base, "set", "manifest.json"))
	var man struct {
		Modules []struct {
			Family string `json:"family"`
		} `json:"modules"`
	}
	if json.Unmarshal(b, &man) != nil || len(man.Modules) != 5 {
		t.Fatalf("set manifest: %s", b)
	}
}
