package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"lemon/client/fakecontrol"
	"lemon/host/moduleset"
	"lemon/policies"
	"lemon/protocol"
)

// --capabilities accepts a module's own capability names (kv) and
// refuses malformed ones, with a bounded message.
func TestNodeCapabilitiesFlagOpenNames(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	pol, _, _, err := nodeLayers(&nodeOptions{capabilities: "kv,read,write", cwd: dir}, noEnv, false)
	if err != nil {
		t.Fatalf("kv,read,write: %v", err)
	}
	if got := strings.Join(pol.Ceiling(), ","); got != "kv,read,write" {
		t.Fatalf("ceiling = %s", got)
	}
	if pol, _, _, err = nodeLayers(&nodeOptions{capabilities: "kv", cwd: dir}, noEnv, false); err != nil || strings.Join(pol.Ceiling(), ",") != "kv" {
		t.Fatalf("kv: %v %v", pol.Ceiling(), err)
	}
	for _, bad := range []string{"KV", "kv.get", "read,9x", "a" + strings.Repeat("b", 32)} {
		if _, _, _, err := nodeLayers(&nodeOptions{capabilities: bad, cwd: dir}, noEnv, false); err == nil ||
			!strings.Contains(err.Error(), "--capabilities: malformed capability") {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
	names := make([]string, 65)
	for i := range names {
		names[i] = "c" + strings.Repeat("x", i%30) + string(rune('a'+i/30))
	}
	if _, _, _, err := nodeLayers(&nodeOptions{capabilities: strings.Join(names[:64], ","), cwd: dir}, noEnv, false); err != nil {
		t.Fatalf("64 names: %v", err)
	}
	if _, _, _, err := nodeLayers(&nodeOptions{capabilities: strings.Join(names, ","), cwd: dir}, noEnv, false); err == nil {
		t.Fatal("65 names accepted")
	}
}

// `lemon policy check` warns about a ceiling name no host call needs and
// no method of the embedded set declares; built-in names and names a
// module's methods declare draw no warning; "all" draws none.
func TestCeilingWarnings(t *testing.T) {
	set := moduleset.Manifest{Modules: []moduleset.Module{{Family: "kv",
		Methods: []moduleset.Method{{Name: "node.kv.get", Version: 1, Capability: "kv"}}}}}
	w, err := policies.ParseWorker([]byte(`capabilities = ["kv", "read", "checksum"]` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := ceilingWarnings(w, set)
	if len(got) != 1 || !strings.Contains(got[0], `"checksum"`) {
		t.Fatalf("warnings = %q", got)
	}
	if got := ceilingWarnings(w, moduleset.Manifest{}); len(got) != 2 {
		t.Fatalf("warnings without kv declared = %q", got)
	}
	all, _ := policies.ParseWorker(nil)
	if got := ceilingWarnings(all, moduleset.Manifest{}); got != nil {
		t.Fatalf("all: %q", got)
	}
}

const modulesTestToken = "modules-test-operator-token"

func modulesServer(t *testing.T, res protocol.ModulesStatusResult) *fakecontrol.Server {
	srv := fakecontrol.New(fakecontrol.Options{OperatorToken: modulesTestToken,
		Handle: func(_ *fakecontrol.Conn, req protocol.Request) (any, *protocol.Error) {
			if req.Method == protocol.MethodModulesStatus {
				return res, nil
			}
			return nil, protocol.Errorf(protocol.CodeMethodNotFound, "unknown method")
		}})
	t.Cleanup(srv.Close)
	return srv
}

func runModulesT(args []string, e map[string]string) (int, string, string) {
	var out, errb bytes.Buffer
	code := runModules(context.Background(), args, env(e), &out, &errb)
	return code, out.String(), errb.String()
}

func TestModulesTableAndJSON(t *testing.T) {
	digest, other := strings.Repeat("d", 64), strings.Repeat("e", 64)
	sha := strings.Repeat("5", 64)
	res := protocol.ModulesStatusResult{
		Pinned: &protocol.PinnedSet{Digest: digest, Modules: []protocol.PinnedModule{
			{Family: "kv", Version: "1.0.0", SHA256: sha, Size: 1234, Methods: []string{"node.kv.get", "node.kv.put"}}}},
		Nodes: []protocol.NodeModules{
			{NodeID: "node-a", Name: "alpha", Online: true, ModuleSetDigest: digest, Current: true,
				Refused: []protocol.ModuleStatus{{Family: "kv", Version: "1.0.0", SHA256: sha, State: protocol.ModuleRefused,
					Reason: "compile_failed: compile failed"}}},
			{NodeID: "node-b", Name: "beta", ModuleSetDigest: other, Refused: []protocol.ModuleStatus{}},
		}}
	srv := modulesServer(t, res)
	e := map[string]string{envOperatorToken: modulesTestToken, envController: srv.URL}

	code, out, errOut := runModulesT(nil, e)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"pinned set " + digest + " (1 modules)", "kv      1.0.0    " + sha + "  1234  2",
		"alpha  node-a   online   current (dddddddddddd)  1", "beta   node-b   offline  other (eeeeeeeeeeee)    0",
		"refusals:", "alpha  kv      1.0.0    555555555555  compile_failed: compile failed"} {
		if !strings.Contains(out, want) {
			t.Fatalf("table lacks %q:\n%s", want, out)
		}
	}
	// `lemon modules status` is the same command.
	if code, out2, _ := runModulesT([]string{"status"}, e); code != 0 || out2 != out {
		t.Fatalf("status: exit %d\n%s", code, out2)
	}

	code, out, _ = runModulesT([]string{"--json"}, e)
	var flat modulesJSON
	if code != 0 || json.Unmarshal([]byte(out), &flat) != nil {
		t.Fatalf("--json: exit %d %s", code, out)
	}
	if flat.SetDigest != digest || len(flat.Modules) != 1 || len(flat.Nodes) != 2 || flat.Nodes[0].Refused != 1 ||
		!flat.Nodes[0].Current || flat.Nodes[1].Current || len(flat.Refusals) != 1 ||
		flat.Refusals[0] != (modulesRefusalRow{NodeID: "node-a", Name: "alpha", Family: "kv", Version: "1.0.0", SHA256: sha,
			Reason: "compile_failed: compile failed"}) {
		t.Fatalf("--json: %s", out)
	}
}

func TestModulesNoSetAndUsage(t *testing.T) {
	srv := modulesServer(t, protocol.ModulesStatusResult{Nodes: []protocol.NodeModules{}})
	e := map[string]string{envOperatorToken: modulesTestToken, envController: srv.URL}
	code, out, _ := runModulesT(nil, e)
	if code != 0 || !strings.Contains(out, "pinned set: none") || strings.Contains(out, "refusals:") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	code, out, _ = runModulesT([]string{"--json"}, e)
	if code != 0 || !strings.Contains(out, `"setDigest": ""`) || !strings.Contains(out, `"refusals": []`) {
		t.Fatalf("--json without a set: %s", out)
	}
	if code, _, errOut := runModulesT([]string{"frobnicate"}, e); code != 2 || !strings.Contains(errOut, `unknown subcommand "frobnicate"`) ||
		!strings.Contains(errOut, "lemon modules status") {
		t.Fatalf("unknown subcommand: exit %d %s", code, errOut)
	}
	if code, _, _ := runModulesT([]string{"--json", "extra"}, e); code != 2 {
		t.Fatalf("extra argument: exit %d", code)
	}
	if code, _, errOut := runModulesT(nil, map[string]string{envController: srv.URL}); code == 0 {
		t.Fatalf("no token: exit 0 %s", errOut)
	}
}

// A subcommand registered by another file of the package is dispatched
// with the arguments after its name.
func TestModulesSubcommandDispatch(t *testing.T) {
	var got []string
	modulesSubcommands["ztest"] = modulesSubcommand{usage: "lemon modules ztest ARGS", run: func(_ context.Context, args []string, _ func(string) string, _, _ io.Writer) int {
		got = args
		return 7
	}}
	defer delete(modulesSubcommands, "ztest")
	if code, _, _ := runModulesT([]string{"ztest", "a", "--b"}, nil); code != 7 || strings.Join(got, " ") != "a --b" {
		t.Fatalf("code %d args %q", code, got)
	}
}
