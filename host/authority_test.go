package host_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lemon/host"
	"lemon/host/hosttest"
	"lemon/hostcalls"
	"lemon/hostcalls/fs"
	"lemon/policies/authority"
	"lemon/protocol"
)

func (f *fixture) invokeWith(t *testing.T, invokeID, method string, ec json.RawMessage) *protocol.Error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, perr := f.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: invokeID, NodeID: "n1", Method: method,
		Args: json.RawMessage(`{}`), ExecutionContext: ec})
	return perr
}

func wantErr(t *testing.T, what string, perr *protocol.Error, code, domain string) {
	t.Helper()
	if perr == nil || perr.Code != code || perr.DomainCode() != domain {
		t.Fatalf("%s: %v, want %s/%s", what, perr, code, domain)
	}
}

func canonDir(t *testing.T) string {
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestNodeBindsContext: the node parses the context strictly, requires
// runId = invokeId, binds a canonical workspace, decides the method again
// and hands the principal and limits to host calls (docs/POLICY.md, "Node
// enforcement").
func TestNodeBindsContext(t *testing.T) {
	f := newFixture(t, host.Config{Ceiling: []string{hostcalls.CapAll}})
	ws := canonDir(t)
	link := filepath.Join(canonDir(t), "ws-link")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	full := func(runID string) authority.ExecutionContext {
		return authority.ExecutionContext{RunID: runID, Principal: "ops", Provenance: "controller",
			Capabilities: []string{"hostinfo", "write"}, Workspace: &authority.Workspace{Root: ws, Mode: authority.WorkspaceReadWrite},
			Limits: authority.Limits{MaxFileBytes: 100, MaxTimeoutMs: 5000}}
	}
	// Accepted: the host call sees the principal, workspace and limits.
	if perr := f.invokeWith(t, "i-ok", "test.ping", hosttest.ContextOf(t, full("i-ok"))); perr != nil {
		t.Fatal(perr)
	}
	got := f.tt.lastAuth
	if got.Principal != "ops" || got.Workspace != ws || got.ReadOnly || got.MaxFileBytes != 100 || got.MaxTimeoutMs != 5000 {
		t.Fatalf("authority seen by the host call: %+v", got)
	}
	// runId must be the invokeId.
	wantErr(t, "runId mismatch", f.invokeWith(t, "i-2", "test.ping", hosttest.ContextOf(t, full("i-other"))),
		protocol.CodeForbidden, protocol.DomainContextMismatch)
	// A workspace root must be canonical and exist on this node.
	for _, root := range []string{link, filepath.Join(ws, "missing")} {
		c := full("i-3")
		c.Workspace = &authority.Workspace{Root: root, Mode: authority.WorkspaceReadWrite}
		wantErr(t, "workspace "+root, f.invokeWith(t, "i-3", "test.ping", hosttest.ContextOf(t, c)),
			protocol.CodeForbidden, protocol.DomainContextMismatch)
	}
	// The node decides the method again.
	c := full("i-4")
	pol, err := authority.ParseJSON([]byte(`{"deny":["test.ping"]}`))
	if err != nil {
		t.Fatal(err)
	}
	c.Policy = pol
	wantErr(t, "policy deny", f.invokeWith(t, "i-4", "test.ping", hosttest.ContextOf(t, c)),
		protocol.CodeForbidden, protocol.DomainPolicyDenied)
	// The node's ceiling still bounds the context: capabilities it lacks
	// are refused.
	g := newFixture(t, host.Config{Ceiling: []string{"write"}})
	wantErr(t, "context wider than the ceiling", g.invokeWith(t, "i-5", "test.ping", hosttest.ContextOf(t, full("i-5"))),
		protocol.CodeForbidden, protocol.DomainCapabilityDenied)
}

// TestContextWorkspaceResolvedPerRequest: the host keeps the parse of a
// context it saw before (contextCache), never its workspace binding: the
// same context, byte for byte but its runId, is refused once its root has
// become a symlink and accepted again once it is a directory.
func TestContextWorkspaceResolvedPerRequest(t *testing.T) {
	f := newFixture(t, host.Config{Ceiling: []string{hostcalls.CapAll}})
	parent := canonDir(t)
	ws := filepath.Join(parent, "ws")
	other := filepath.Join(parent, "other")
	for _, d := range []string{ws, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	ctxFor := func(runID string) json.RawMessage {
		return hosttest.ContextOf(t, authority.ExecutionContext{RunID: runID, Principal: "ops", Provenance: "controller",
			Capabilities: []string{"hostinfo"}, Workspace: &authority.Workspace{Root: ws, Mode: authority.WorkspaceReadWrite}})
	}
	for i, id := range []string{"i-a", "i-b"} {
		if perr := f.invokeWith(t, id, "test.ping", ctxFor(id)); perr != nil {
			t.Fatalf("call %d: %v", i, perr)
		}
		if f.tt.lastAuth.Workspace != ws {
			t.Fatalf("call %d: workspace %q", i, f.tt.lastAuth.Workspace)
		}
	}
	if err := os.Remove(ws); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, ws); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "root now a symlink", f.invokeWith(t, "i-c", "test.ping", ctxFor("i-c")),
		protocol.CodeForbidden, protocol.DomainContextMismatch)
	if err := os.Remove(ws); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "root now missing", f.invokeWith(t, "i-d", "test.ping", ctxFor("i-d")),
		protocol.CodeForbidden, protocol.DomainContextMismatch)
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if perr := f.invokeWith(t, "i-e", "test.ping", ctxFor("i-e")); perr != nil {
		t.Fatalf("root a directory again: %v", perr)
	}
	// A context that failed to parse stays refused however often it comes.
	bad := json.RawMessage(strings.Replace(string(ctxFor("i-f")), `"version":1`, `"version":2`, 1))
	for i := 0; i < 2; i++ {
		wantErr(t, "malformed", f.invokeWith(t, "i-f", "test.ping", bad), protocol.CodeInvalidParams, "")
	}
}

// TestAdvContextRunIDMismatch: a context replayed onto another request
// (its runId is another invokeId) is refused before the module runs.
func TestAdvContextRunIDMismatch(t *testing.T) {
	f := newFixture(t, host.Config{})
	ec := hosttest.Context(t, "i-first", "hostinfo", "write")
	if perr := f.invokeWith(t, "i-first", "test.write", ec); perr != nil {
		t.Fatal(perr)
	}
	wantErr(t, "replayed", f.invokeWith(t, "i-second", "test.write", ec), protocol.CodeForbidden, protocol.DomainContextMismatch)
	if f.tt.writes != 1 {
		t.Fatalf("writes = %d, want 1", f.tt.writes)
	}
}

// TestAdvReadOnlyRefusesMutations: under a read_only workspace a
// mutation-class method is refused before its module runs; nothing is
// written.
func TestAdvReadOnlyRefusesMutations(t *testing.T) {
	f := newFixture(t, host.Config{})
	ec := func(id string) json.RawMessage {
		return hosttest.ContextOf(t, authority.ExecutionContext{RunID: id, Principal: "ops", Capabilities: []string{"hostinfo", "write"},
			Workspace: &authority.Workspace{Root: canonDir(t), Mode: authority.WorkspaceReadOnly}})
	}
	for _, m := range []string{"test.write", "test.writeping", "test.writewrite"} {
		wantErr(t, m, f.invokeWith(t, "ro-"+m, m, ec("ro-"+m)), protocol.CodeForbidden, protocol.DomainWorkspaceReadOnly)
	}
	if f.tt.writes != 0 {
		t.Fatalf("writes = %d under read_only", f.tt.writes)
	}
}

// TestRogueHostinfoModuleRefused: a module pinned as hostinfo whose
// read-class node.host.info (scope operator.read, uses write) calls
// fs.mkdir is refused at the gate for an operator.read caller; no
// directory is made, with or without a context.
func TestRogueHostinfoModuleRefused(t *testing.T) {
	ctx := context.Background()
	root := canonDir(t)
	files, err := fs.New(fs.Config{Roots: []string{root}, DefaultCwd: root, Home: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { files.Close() })
	h, err := host.New(ctx, host.Config{CacheDir: hosttest.CacheDir(t), Ceiling: []string{hostcalls.CapAll},
		Tables: []hostcalls.Table{files.Table()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	wasm := hosttest.Build(t, "host/testdata/roguehostinfo")
	if _, err := h.Load(ctx, hosttest.Pin("hostinfo", wasm), wasm); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(root, "made-by-rogue")
	args, _ := json.Marshal(map[string]string{"nodeId": "n1", "path": target})
	for name, ec := range map[string]json.RawMessage{
		"no context": nil,
		// what the controller sends an operator.read caller: the method's
		// {capability} ∪ uses
		"operator.read context": hosttest.ContextOf(t, authority.ExecutionContext{RunID: "rogue", Principal: "reader",
			Capabilities: []string{"hostinfo", "write"}}),
	} {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, perr := h.Invoke(cctx, protocol.InvokeRequest{InvokeID: "rogue", NodeID: "n1", Method: "node.host.info",
			Args: args, ExecutionContext: ec})
		cancel()
		wantErr(t, name, perr, protocol.CodeForbidden, protocol.DomainReadMethodEffect)
		if _, err := os.Stat(target); err == nil {
			t.Fatalf("%s: the rogue module made a directory", name)
		}
	}
}
