package main

import (
	"bytes"
	"context"
	"encoding/json"
	iofs "io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"lemon/host"
	"lemon/host/hosttest"
	"lemon/host/moduleset"
	"lemon/host/moduleset/defaultset"
	"lemon/protocol"
)

func pluginT(args ...string) (int, string, string) {
	var o, e bytes.Buffer
	code := pluginMain(args, &o, &e)
	return code, o.String(), e.String()
}

// The family name: 2 to 32 of [a-z0-9] starting with a letter, and not a
// first-party family, namespace or capability.
func TestPluginNewValidatesTheName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"ab", true}, {"a", false},
		{strings.Repeat("k", 32), true}, {strings.Repeat("k", 33), false},
		{"kv2", true}, {"2kv", false}, {"Kv", false}, {"k-v", false}, {"k.v", false}, {"k/v", false}, {"", false},
		{"hostinfo", false}, {"host", false}, {"fs", false}, {"process", false}, {"secrets", false},
		{"describe", false}, {"invoke", false}, {"modules", false},
		{"read", false}, {"write", false}, {"exec", false},
		{"all", false}, {"none", false}, {"std", false}, {"cmd", false}, {"tool", false},
	} {
		dir := filepath.Join(t.TempDir(), "out")
		code, _, errOut := pluginT("new", tc.name, "--dir", dir)
		_, statErr := os.Stat(filepath.Join(dir, "go.mod"))
		if tc.ok && (code != 0 || statErr != nil) {
			t.Errorf("plugin new %q: exit %d (%s), go.mod: %v; want it scaffolded", tc.name, code, errOut, statErr)
		}
		if !tc.ok && (code != 2 || statErr == nil || !strings.Contains(errOut, "lemon plugin new:")) {
			t.Errorf("plugin new %q: exit %d, stderr %q; want exit 2 and nothing written", tc.name, code, errOut)
		}
	}
}

func TestPluginNewRefusesANonEmptyDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := pluginT("new", "kv", "--dir", dir)
	if code != 1 || !strings.Contains(errOut, "exists and is not empty") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "keep.txt")); string(b) != "mine" {
		t.Fatal("the existing file was touched")
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
		t.Fatal("scaffold written into a non-empty directory")
	}
}

// offlineGo makes every go command of the test offline: no proxy, an
// empty module cache, -mod=mod (a scaffold has no go.sum to trust).
func offlineGo(t *testing.T) {
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOFLAGS", "-mod=mod")
	t.Setenv("GOMODCACHE", t.TempDir())
	t.Setenv("GONOSUMDB", "")
	t.Setenv("GOSUMDB", "off")
}

// scaffoldAndBuild runs `plugin new NAME` and `plugin build` offline and
// returns the scaffold directory and the module's path.
func scaffoldAndBuild(t *testing.T, name string) (string, string) {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, name)
	if code, out, errOut := pluginT("new", name, "--dir", dir); code != 0 || !strings.Contains(out, "lemon plugin build") {
		t.Fatalf("plugin new: exit %d\n%s%s", code, out, errOut)
	}
	wasm := filepath.Join(base, name+".wasm")
	code, out, errOut := pluginT("build", dir, "-o", wasm)
	if code != 0 {
		t.Fatalf("plugin build (GOPROXY=off): exit %d\n%s%s", code, out, errOut)
	}
	return dir, wasm
}

// The whole author path on the SDK the binary carries, offline: scaffold,
// build with GOPROXY=off and an empty module cache, conformance (with the
// 1024/1025-byte boundary), plugin run, then the module added to an
// exported built-in set that lemon dev --module-set serves.
func TestScaffoldBuildsOfflineRunsAndJoinsASet(t *testing.T) {
	offlineGo(t)
	dir, wasm := scaffoldAndBuild(t, "echoer")

	// The manifest declares the method with the shared shapes.
	code, out, errOut := pluginT("inspect", wasm)
	var rep struct {
		Manifest struct {
			Family  string             `json:"family"`
			Methods []moduleset.Method `json:"methods"`
		} `json:"manifest"`
		Imports  []string `json:"imports"`
		Warnings []string `json:"warnings"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || errOut != "" {
		t.Fatalf("inspect: exit %d\n%s%s", code, out, errOut)
	}
	if len(rep.Manifest.Methods) != 1 || rep.Imports == nil || len(rep.Imports) != 0 || rep.Warnings != nil {
		t.Fatalf("inspect: %s", out)
	}
	m := rep.Manifest.Methods[0]
	if m.Name != "node.echoer.echo" || m.Scope != protocol.ScopeRead || m.Retry != protocol.RetryRead ||
		m.Capability != "echoer" || m.Params == nil || m.Params.Properties["message"] == nil ||
		m.Params.Properties["message"].MaxLength == nil || *m.Params.Properties["message"].MaxLength != 1024 ||
		strings.Join(m.Params.Required, ",") != "nodeId,message" || m.Params.AdditionalProperties == nil || *m.Params.AdditionalProperties {
		t.Fatalf("declaration: %+v", m)
	}

	t.Run("conformance", func(t *testing.T) {
		code, out, errOut := pluginT("conformance", wasm, "--cases", filepath.Join(dir, "conformance"))
		if code != 0 || !strings.Contains(out, "conformance: 10 passed, 0 failed") ||
			!strings.Contains(out, "ok   echo.json / a message of exactly 1024 bytes passes") ||
			!strings.Contains(out, "ok   echo.json / a message one byte past 1024 is invalid params naming it") {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
	})

	t.Run("run", func(t *testing.T) {
		at := `{"message":"` + strings.Repeat("m", 1024) + `"}`
		code, out, errOut := pluginT("run", wasm, "node.echoer.echo", at)
		var got map[string]string
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got["message"] != strings.Repeat("m", 1024) || errOut != "" {
			t.Fatalf("1024 bytes: exit %d, stdout %.80q, stderr %q", code, out, errOut)
		}
		past := `{"nodeId":"local","message":"` + strings.Repeat("m", 1025) + `"}`
		code, out, errOut = pluginT("run", wasm, "node.echoer.echo", past)
		var perr protocol.Error
		if code != 1 || out != "" || json.Unmarshal([]byte(errOut), &perr) != nil || perr.Code != protocol.CodeInvalidParams ||
			perr.Details == nil || perr.Details.Field != "message" {
			t.Fatalf("1025 bytes: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		// A ceiling without the family's capability refuses at the gate.
		code, _, errOut = pluginT("run", wasm, "node.echoer.echo", `{"message":"hi"}`, "--capabilities", "read,write")
		if code != 1 || json.Unmarshal([]byte(errOut), &perr) != nil || perr.Code != protocol.CodeForbidden ||
			perr.Details == nil || perr.Details.Code != protocol.DomainCapabilityDenied {
			t.Fatalf("ceiling read,write: exit %d, stderr %q", code, errOut)
		}
		code, _, errOut = pluginT("run", wasm, "node.echoer.nope", `{}`)
		if code != 1 || json.Unmarshal([]byte(errOut), &perr) != nil || perr.Code != protocol.CodeMethodNotFound {
			t.Fatalf("unknown method: exit %d, stderr %q", code, errOut)
		}
		for _, bad := range []string{`[1]`, `nope`, `null`} {
			if code, _, errOut := pluginT("run", wasm, "node.echoer.echo", bad); code != 2 || !strings.Contains(errOut, "JSON object") {
				t.Errorf("params %s: exit %d, stderr %q", bad, code, errOut)
			}
		}
		if code, _, errOut := pluginT("run", wasm, "node.echoer.echo", `{}`, "--capabilities", "Bad Cap"); code != 2 || !strings.Contains(errOut, "not a capability name") {
			t.Errorf("bad capability: exit %d, stderr %q", code, errOut)
		}
	})

	t.Run("set", func(t *testing.T) {
		set := filepath.Join(t.TempDir(), "set")
		if code, out, errOut := modulesT("export", set); code != 0 || !strings.Contains(out, "written to "+set) {
			t.Fatalf("modules export: exit %d\n%s%s", code, out, errOut)
		}
		builtin, _, err := defaultset.Load()
		if err != nil {
			t.Fatal(err)
		}
		code, out, errOut := pluginT("build", dir, "--set", set)
		if code != 0 || !strings.Contains(errOut, "echoer 0.1.0 added to "+set) {
			t.Fatalf("build --set: exit %d\n%s%s", code, out, errOut)
		}
		// Built again (a replacement): still one module of the family.
		if code, out, errOut := pluginT("build", dir, "--set", set); code != 0 {
			t.Fatalf("build --set again: exit %d\n%s%s", code, out, errOut)
		}
		got, mods, err := moduleset.LoadDir(set)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Modules) != len(builtin.Modules)+1 {
			t.Fatalf("set has %d modules, want the %d built-in ones plus echoer", len(got.Modules), len(builtin.Modules))
		}
		for _, b := range builtin.Modules {
			if g, ok := got.Find(b.Family); !ok || g.SHA256 != b.SHA256 {
				t.Errorf("built-in %s changed or missing", b.Family)
			}
		}
		e, ok := got.Find("echoer")
		wasmBytes, _ := os.ReadFile(wasm)
		if !ok || e.File != "echoer.wasm" || !bytes.Equal(mods["echoer"], wasmBytes) || len(e.Methods) != 1 || e.Methods[0].Name != "node.echoer.echo" {
			t.Fatalf("echoer in the set: %+v", e)
		}

		t.Run("dev", func(t *testing.T) { devServesSet(t, set, got.Digest()) })
	})
}

// devServesSet runs lemon dev --module-set set in-process and checks its
// node serves the set: node.describe lists node.echoer.echo and the set's
// digest. (Calling node.echoer.echo through the controller needs the
// controller to route methods the pinned set declares.)
func devServesSet(t *testing.T, set, digest string) {
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &hosttest.LogBuffer{}, &hosttest.LogBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- runDev(ctx, []string{"--listen", "127.0.0.1:0", "--state", t.TempDir(), "--cwd", t.TempDir(),
			"--module-set", set}, func(string) string { return "" }, stdout, stderr)
	}()
	defer func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("lemon dev exit %d\n%s", code, stderr.String())
			}
		case <-time.After(time.Minute):
			t.Error("lemon dev did not stop within a minute of its context ending")
		}
	}()
	ready := regexp.MustCompile(`controller on (ws://\S+), node "dev" \(nodeId (\S+)\)[\s\S]*operator token \(generated\): (\S+)\n[\s\S]*try:`)
	var m []string
	deadline := time.Now().Add(4 * time.Minute)
	for m == nil {
		select {
		case code := <-done:
			done <- code
			t.Fatalf("lemon dev exited %d before it was ready\n%s", code, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if m = ready.FindStringSubmatch(stdout.String()); m == nil && time.Now().After(deadline) {
			t.Fatalf("lemon dev not ready within 4 minutes\n%s\n%s", stdout.String(), stderr.String())
		}
	}
	code, out, errOut := runCallT([]string{"--controller", m[1], protocol.MethodNodeDescribe, `{"nodeId":"` + m[2] + `"}`},
		map[string]string{envOperatorToken: m[3]}, "")
	var desc protocol.NodeDescription
	if code != 0 || json.Unmarshal([]byte(out), &desc) != nil {
		t.Fatalf("node.describe: exit %d\n%s%s", code, out, errOut)
	}
	if desc.Methods["node.echoer.echo"] != 1 || desc.Methods["node.host.info"] != 1 || desc.ModuleSetDigest != digest {
		t.Fatalf("node.describe: methods %v, moduleSetDigest %s, want node.echoer.echo and the set's digest %s", desc.Methods, desc.ModuleSetDigest, digest)
	}
}

// modulesT runs `lemon modules export ARGS...` (modulesExport, not the
// `lemon modules` dispatcher, which another file may own).
func modulesT(args ...string) (int, string, string) {
	if len(args) == 0 || args[0] != "export" {
		panic("modulesT runs export only")
	}
	var o, e bytes.Buffer
	code := modulesExport(args[1:], &o, &e)
	return code, o.String(), e.String()
}

// lemon modules export writes the embedded set byte for byte, refuses to
// overwrite a set without --force, and the shared manifest writer (the
// one build.sh's mkset runs) reproduces the embedded manifest exactly.
func TestModulesExportIsByteIdenticalAndManifestWriterMatchesMkset(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "set")
	code, out, errOut := modulesT("export", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	embedded := defaultset.FS()
	entries, err := iofs.ReadDir(embedded, ".")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".wasm") && e.Name() != moduleset.ManifestFile {
			continue
		}
		want, _ := iofs.ReadFile(embedded, e.Name())
		got, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s differs from the embedded file (%v)", e.Name(), err)
		}
		n++
	}
	if n < 5 {
		t.Fatalf("only %d files exported", n)
	}
	if code, _, errOut := modulesT("export", dir); code != 1 || !strings.Contains(errOut, "--force") {
		t.Fatalf("second export: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := modulesT("export", dir, "--force"); code != 0 {
		t.Fatalf("export --force: exit %d, stderr %q", code, errOut)
	}
	want, _ := iofs.ReadFile(embedded, moduleset.ManifestFile)
	if code, _, errOut := modulesT("export"); code != 2 || !strings.Contains(errOut, "usage: lemon modules export DIR") {
		t.Fatalf("modules export without DIR: exit %d, stderr %q", code, errOut)
	}
	if err := os.Remove(filepath.Join(dir, moduleset.ManifestFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := moduleset.WriteManifest(dir, hostDescribe); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, moduleset.ManifestFile))
	if !bytes.Equal(got, want) {
		t.Fatalf("WriteManifest over the exported modules:\n%s\nwant the embedded manifest:\n%s", got, want)
	}
}

var hostDescribe = host.DescribeModule

// The scaffold carries every package of the SDK, the typed host-call
// wrappers included (docs/PLUGINS.md tells authors to import them): a
// scaffold importing each of them builds offline.
func TestScaffoldCarriesTheTypedWrappers(t *testing.T) {
	offlineGo(t)
	base := t.TempDir()
	dir := filepath.Join(base, "wrapped")
	if code, out, errOut := pluginT("new", "wrapped", "--dir", dir); code != 0 {
		t.Fatalf("plugin new: exit %d\n%s%s", code, out, errOut)
	}
	src := "package main\n\nimport (\n"
	for _, p := range []string{"blob", "config", "fs", "log", "spawn", "store", "sysinfo", "vault"} {
		src += "\t_ \"lemon/plugins/sdk/" + p + "\"\n"
	}
	src += ")\n"
	if err := os.WriteFile(filepath.Join(dir, "wrappers.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := pluginT("build", dir, "-o", filepath.Join(base, "wrapped.wasm")); code != 0 {
		t.Fatalf("plugin build with the wrappers imported (GOPROXY=off): exit %d\n%s%s", code, out, errOut)
	}
}
