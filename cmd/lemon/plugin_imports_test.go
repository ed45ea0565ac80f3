package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A module importing a host call its manifest does not declare: build
// fails and writes nothing (every node refuses such a module at load);
// inspect shows the warning in its output and on stderr.
func TestBuildFailsAndInspectWarnsOnAnUndeclaredImport(t *testing.T) {
	offlineGo(t)
	base := t.TempDir()
	dir := filepath.Join(base, "undecl")
	if code, _, errOut := pluginT("new", "undecl", "--dir", dir); code != 0 {
		t.Fatal(errOut)
	}
	editMain(t, dir, func(s string) string {
		s = strings.Replace(s, "func init() {", "//go:wasmimport lemon sysinfo.snapshot\nfunc sysinfoSnapshot(ptr, size uint32) uint64\n\nfunc init() {", 1)
		return strings.Replace(s, "\tif p.Message == nil {", "\tif p.NodeID == \"snapshot\" {\n\t\t_ = sdk.Call(sysinfoSnapshot, nil, nil)\n\t}\n\tif p.Message == nil {", 1)
	})
	out := filepath.Join(base, "undecl.wasm")
	code, stdout, errOut := pluginT("build", dir, "-o", out)
	if code != 1 || stdout != "" || !strings.Contains(errOut, `imports host calls its manifest does not declare in HostCalls (sysinfo.snapshot)`) ||
		!strings.Contains(errOut, "warning: imports host call \"sysinfo.snapshot\"") {
		t.Fatalf("build: exit %d, stdout %q, stderr %q", code, stdout, errOut)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("build wrote a module every node refuses")
	}

	// The same module built by hand: inspect reports, and does not fail.
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-buildvcs=false", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	code, stdout, errOut = pluginT("inspect", out)
	var rep struct {
		Imports  []string `json:"imports"`
		Warnings []string `json:"warnings"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &rep) != nil || strings.Join(rep.Imports, ",") != "sysinfo.snapshot" ||
		len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], `"sysinfo.snapshot", which its manifest does not declare`) ||
		!strings.Contains(errOut, "lemon plugin inspect: warning:") {
		t.Fatalf("inspect: exit %d, stdout %s, stderr %q", code, stdout, errOut)
	}
	// And the host refuses it, as the warning says.
	if code, _, errOut := pluginT("run", out, "node.undecl.echo", `{"message":"x"}`); code != 1 || !strings.Contains(errOut, `imports undeclared host call "sysinfo.snapshot"`) {
		t.Fatalf("run: exit %d, stderr %q", code, errOut)
	}
}

// A host call declared but never imported: build warns and succeeds.
func TestBuildWarnsOnADeclaredButUnusedHostCall(t *testing.T) {
	offlineGo(t)
	_, wasm := scaffoldAndBuildEdited(t, "unused", func(s string) string {
		s = strings.Replace(s, `Capabilities: []string{"unused"},`, `Capabilities: []string{"unused", "hostinfo"},`, 1)
		return strings.Replace(s, "HostCalls: []string{},", `HostCalls: []string{"sysinfo.snapshot"},`, 1)
	})
	code, stdout, errOut := pluginT("inspect", wasm)
	var rep struct {
		Warnings []string `json:"warnings"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &rep) != nil || len(rep.Warnings) != 1 ||
		rep.Warnings[0] != `declares host call "sysinfo.snapshot" in HostCalls but never imports it` ||
		!strings.Contains(errOut, "warning: declares host call") {
		t.Fatalf("inspect: exit %d, stdout %s, stderr %q", code, stdout, errOut)
	}
}

func editMain(t *testing.T, dir string, edit func(string) string) {
	t.Helper()
	p := filepath.Join(dir, "main.go")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := edit(string(b))
	if s == string(b) {
		t.Fatal("edit changed nothing: the scaffold's main.go changed shape")
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// scaffoldAndBuildEdited is scaffoldAndBuild with main.go edited first;
// the build's stderr must carry a warning.
func scaffoldAndBuildEdited(t *testing.T, name string, edit func(string) string) (string, string) {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, name)
	if code, _, errOut := pluginT("new", name, "--dir", dir); code != 0 {
		t.Fatal(errOut)
	}
	editMain(t, dir, edit)
	wasm := filepath.Join(base, name+".wasm")
	code, stdout, errOut := pluginT("build", dir, "-o", wasm)
	if code != 0 || !strings.Contains(errOut, "lemon plugin build: warning:") || !strings.Contains(stdout, `"warnings"`) {
		t.Fatalf("build: exit %d, stdout %q, stderr %q", code, stdout, errOut)
	}
	return dir, wasm
}

// A module that declares a host call without the host call's capability
// is refused by every node at load, so build fails on it too (and names
// the call and the capability), writing nothing.
func TestBuildFailsOnAHostCallWithoutItsCapability(t *testing.T) {
	offlineGo(t)
	base := t.TempDir()
	dir := filepath.Join(base, "nocap")
	if code, _, errOut := pluginT("new", "nocap", "--dir", dir); code != 0 {
		t.Fatal(errOut)
	}
	editMain(t, dir, func(s string) string {
		s = strings.Replace(s, "\"lemon/plugins/sdk\"\n", "\"lemon/plugins/sdk\"\n\tsdksys \"lemon/plugins/sdk/sysinfo\"\n", 1)
		s = strings.Replace(s, "HostCalls: []string{},", "HostCalls: []string{\"sysinfo.snapshot\"},", 1)
		return strings.Replace(s, "\tif p.Message == nil {", "\tif p.NodeID == \"snapshot\" {\n\t\t_, _ = sdksys.Snapshot()\n\t}\n\tif p.Message == nil {", 1)
	})
	out := filepath.Join(base, "nocap.wasm")
	code, stdout, errOut := pluginT("build", dir, "-o", out)
	if code != 1 || stdout != "" || !strings.Contains(errOut, `host call "sysinfo.snapshot" needs capability "hostinfo", which Capabilities does not declare`) {
		t.Fatalf("build: exit %d, stdout %q, stderr %q", code, stdout, errOut)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("build wrote a module every node refuses")
	}
}
