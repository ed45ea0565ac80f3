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
// modules export, plugin build --set, lemon dev --module-set,
// node.describe listing the new method, and the method called through
// the controller (lemon call and node.invoke, schema refusals naming the
// field). Every step's --help answers on stdout with exit 0.
func TestPluginAuthorPathWithTheStockBinary(t *testing.T) {
	base, step := offlineAuthor(t)
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
	// The scaffolded method through the controller: directly and through
	// node.invoke, its 1,024-byte boundary in the controller's schema
	// check, and a field the schema does not know.
	wantExactly(t, "node.greet.echo", d.op.must(t, "node.greet.echo", map[string]any{"nodeId": d.nodeID, "message": "hello"}),
		`{"message":"hello"}`)
	wantExactly(t, "node.invoke node.greet.echo", d.op.must(t, "node.invoke", map[string]any{"nodeId": d.nodeID,
		"method": "node.greet.echo", "args": map[string]any{"message": "via invoke"}}), `{"message":"via invoke"}`)
	long := strings.Repeat("m", 1024)
	wantExactly(t, "node.greet.echo 1024 bytes", d.op.must(t, "node.greet.echo", map[string]any{"nodeId": d.nodeID, "message": long}),
		fmt.Sprintf(`{"message":%q}`, long))
	for field, params := range map[string]map[string]any{
		"message": {"nodeId": d.nodeID, "message": long + "m"},
		"extra":   {"nodeId": d.nodeID, "message": "hello", "extra": true},
	} {
		e := d.op.callError(t, "node.greet.echo", params)
		if e.Code != "INVALID_PARAMS" || e.detail("field") != field || !strings.Contains(e.Message, "params."+field) {
			t.Fatalf("node.greet.echo breaking the schema at %s: %+v", field, e)
		}
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

// offlineAuthor is a plugin author's workspace for the stock binary,
// offline: a fresh HOME under base, GOPROXY=off, an empty module cache
// (a scaffold needs nothing but the SDK lemon vendors into it) and the
// caller's build cache. step runs lemon there and fails the test on a
// non-zero exit.
func offlineAuthor(t *testing.T) (base string, step func(args ...string) result) {
	t.Helper()
	base = t.TempDir()
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
	return base, func(args ...string) result {
		t.Helper()
		r := run(t, base, environ, nil, args...)
		if r.code != 0 {
			t.Fatalf("lemon %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return r
	}
}
