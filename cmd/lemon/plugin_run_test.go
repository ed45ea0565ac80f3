package main

import (
	"encoding/json"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lemon/host/hosttest"
	"lemon/host/moduleset/defaultset"
	"lemon/protocol"
)

// builtinModule writes the embedded module of family to a temp file.
func builtinModule(t *testing.T, family string) string {
	t.Helper()
	b, err := iofs.ReadFile(defaultset.FS(), family+".wasm")
	if err != nil {
		t.Fatalf("%s.wasm is not in the embedded set (run ./build.sh): %v", family, err)
	}
	p := filepath.Join(t.TempDir(), family+".wasm")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// plugin run gives the module the chosen cwd, roots and ceiling, as a node would.
func TestPluginRunUsesTheChosenCwdRootsAndCeiling(t *testing.T) {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root, outside := filepath.Join(tmp, "root"), filepath.Join(tmp, "outside")
	for _, d := range []string{root, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "f.txt"), []byte("12345"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	hostinfo := builtinModule(t, "hostinfo")
	code, out, errOut := pluginT("run", hostinfo, "node.host.info", "--cwd", outside)
	var info map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info["defaultCwd"] != outside {
		t.Fatalf("host.info --cwd: exit %d, stdout %s, stderr %s", code, out, errOut)
	}

	fsMod := builtinModule(t, "fs")
	code, out, errOut = pluginT("run", fsMod, "node.fs.stat", `{"path":"`+filepath.Join(root, "f.txt")+`"}`,
		"--allowed-root", root, "--cwd", root)
	var st map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st["size"] != 5.0 {
		t.Fatalf("stat inside the root: exit %d, stdout %s, stderr %s", code, out, errOut)
	}
	code, out, errOut = pluginT("run", fsMod, "node.fs.stat", `{"path":"`+filepath.Join(outside, "f.txt")+`"}`,
		"--allowed-root", root, "--cwd", root)
	var perr protocol.Error
	if code != 1 || out != "" || json.Unmarshal([]byte(errOut), &perr) != nil || perr.Code == "" || perr.Code == protocol.CodeInternal {
		t.Fatalf("stat outside the roots: exit %d, stdout %s, stderr %s", code, out, errOut)
	}
	if strings.Contains(errOut, "12345") {
		t.Fatal("file bytes in an error")
	}
	// Two roots: the second one serves too.
	code, _, errOut = pluginT("run", fsMod, "node.fs.stat", `{"path":"`+filepath.Join(outside, "f.txt")+`"}`,
		"--allowed-root", root, "--allowed-root", outside, "--cwd", root)
	if code != 0 {
		t.Fatalf("stat in the second root: exit %d, stderr %s", code, errOut)
	}
	code, _, errOut = pluginT("run", fsMod, "node.fs.stat", `{"path":"f.txt"}`, "--cwd", root, "--capabilities", "write")
	if code != 1 || json.Unmarshal([]byte(errOut), &perr) != nil || perr.Code != protocol.CodeForbidden {
		t.Fatalf("stat with ceiling write: exit %d, stderr %s", code, errOut)
	}
	if code, _, errOut := pluginT("run", fsMod, "node.fs.stat", `{}`, "--allowed-root", filepath.Join(tmp, "missing")); code != 2 || !strings.Contains(errOut, "--allowed-root") {
		t.Fatalf("missing root: exit %d, stderr %s", code, errOut)
	}
	// PARAMS_JSON up to the 1 MiB frame cap reaches the module; one byte
	// more is refused before the host is built.
	pad := func(n int) string {
		head := `{"nodeId":"local","path":"`
		return head + strings.Repeat("p", n-len(head)-2) + `"}`
	}
	at := pad(protocol.DefaultMaxPayload)
	if len(at) != protocol.DefaultMaxPayload {
		t.Fatalf("pad: %d bytes", len(at))
	}
	if code, _, errOut := pluginT("run", fsMod, "node.fs.stat", at, "--cwd", root); code != 1 || !strings.HasPrefix(errOut, `{"code":"INVALID_PARAMS"`) {
		t.Fatalf("params of exactly 1 MiB: exit %d, stderr %.200s", code, errOut)
	}
	if code, _, errOut := pluginT("run", fsMod, "node.fs.stat", pad(protocol.DefaultMaxPayload+1), "--cwd", root); code != 2 || !strings.Contains(errOut, "larger than 1048576 bytes") {
		t.Fatalf("params of 1 MiB + 1: exit %d, stderr %.200s", code, errOut)
	}
	if code, _, _ := pluginT("run", fsMod); code != 2 {
		t.Fatalf("no method: exit %d", code)
	}
}

// plugin run shows the module's own log records and a trap's panic on
// stderr (not the per-host-call audit events), so an author sees them.
func TestPluginRunShowsModuleLogsAndPanics(t *testing.T) {
	mod := filepath.Join(t.TempDir(), "guestmod.wasm")
	if err := os.WriteFile(mod, hosttest.Build(t, "host/testdata/guestmod"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := pluginT("run", mod, "guest.log", `{"level":"warn","message":"hello from the guest","sdk":true}`)
	if code != 0 || !strings.Contains(errOut, "hello from the guest") || !strings.Contains(errOut, "level=WARN") {
		t.Fatalf("guest.log: exit %d, stdout %s, stderr %s", code, out, errOut)
	}
	if strings.Contains(errOut, "execution_node.host_io") {
		t.Fatalf("audit events reached stderr: %s", errOut)
	}
	code, out, errOut = pluginT("run", mod, "guest.panic", `{"message":"the module broke"}`)
	if code != 1 || !strings.Contains(errOut, "execution_node.module_trapped") || !strings.Contains(errOut, "the module broke") {
		t.Fatalf("guest.panic: exit %d, stdout %s, stderr %s", code, out, errOut)
	}
}
