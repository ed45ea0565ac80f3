package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"lemon/client/fakecontrol"
	"lemon/policies/authority"
	"lemon/protocol"
)

// contextNode is a real `lemon node join` connected to a fake controller
// that sends node.invoke.request frames with any execution context, as a
// controller (or an attacker able to forge its frames) could.
type contextNode struct {
	t    *testing.T
	srv  *fakecontrol.Server
	conn *fakecontrol.Conn
	next int
}

const contextNodeID = "node-e2e-authority"

func startContextNode(t *testing.T, home, cwd string, extra ...string) *contextNode {
	t.Helper()
	token := "lnt_" + randHex(24)
	srv := fakecontrol.New(fakecontrol.Options{NodeToken: token, AuthNodeID: contextNodeID})
	t.Cleanup(srv.Close)
	args := append([]string{"node", "join", "--controller", srv.URL, "--name", "w1", "--cwd", cwd,
		"--state", newStateDir(t, filepath.Join(home, ".state"))}, extra...)
	p := start(t, "lemon node join", cwd, env(home, "LEMON_NODE_TOKEN="+token), args...)
	ctx, cancel := context.WithTimeout(context.Background(), readyWait)
	defer cancel()
	conn, err := srv.NextNode(ctx)
	if err != nil {
		t.Fatalf("node did not connect: %v\n%s", err, p.output())
	}
	return &contextNode{t: t, srv: srv, conn: conn}
}

// invoke sends method with params under ec (built for the request's
// invokeId when ec.RunID is "") and returns the result or the error.
func (n *contextNode) invoke(method string, params map[string]any, ec *authority.ExecutionContext) (map[string]any, *protocol.Error) {
	n.t.Helper()
	n.next++
	id := "inv-" + strconv.Itoa(n.next)
	params["nodeId"] = contextNodeID
	args, _ := json.Marshal(params)
	req := protocol.InvokeRequest{InvokeID: id, NodeID: contextNodeID, Method: method, Args: args, TimeoutMs: 20000}
	if ec != nil {
		c := *ec
		if c.RunID == "" {
			c.RunID = id
		}
		v, err := authority.New(c)
		if err != nil {
			n.t.Fatalf("context: %v", err)
		}
		if req.ExecutionContext, err = v.MarshalJSON(); err != nil {
			n.t.Fatal(err)
		}
	}
	if err := n.conn.SendEvent(protocol.EventInvokeRequest, req); err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := n.srv.NextResult(ctx)
	if err != nil || res.InvokeID != id {
		n.t.Fatalf("%s: result %+v %v", method, res, err)
	}
	if res.Error != nil {
		return nil, res.Error
	}
	var out map[string]any
	if err := json.Unmarshal(res.Result, &out); err != nil {
		n.t.Fatalf("%s: %s", method, res.Result)
	}
	return out, nil
}

func wantRefused(t *testing.T, what string, perr *protocol.Error, domain string) {
	t.Helper()
	if perr == nil || perr.DomainCode() != domain {
		t.Fatalf("%s: %+v, want %s", what, perr, domain)
	}
}

// TestAuthorityContextWorkspaceCannotBeEscaped: a context whose workspace
// is home/ws confines every path of the request to it on a real node whose
// root is all of home: absolute paths, `..`, symlinked files and
// directories, both ends of a move, a process cwd; a workspace outside the
// node's roots, or not canonical, is refused; read_only refuses each
// mutation (fs write, mkdir, move, delete, process run and cancel, secret
// set and delete); a context replayed on another request is refused.
func TestAuthorityContextWorkspaceCannotBeEscaped(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(base, "home")
	ws, other, outside := filepath.Join(home, "ws"), filepath.Join(home, "other"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(ws, "sub"), filepath.Join(other, "dir"), outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for p, s := range map[string]string{filepath.Join(ws, "in.txt"): "in", filepath.Join(other, "secret.txt"): "secret",
		filepath.Join(other, "dir", "f.txt"): "f", filepath.Join(outside, "x.txt"): "x"} {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"link-file": filepath.Join(other, "secret.txt"), "link-dir": "../other/dir", "link-out": outside} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	keyFile := filepath.Join(base, "vault.key")
	if err := os.WriteFile(keyFile, []byte(randHex(32)), 0o600); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(base, "worker.toml")
	if err := os.WriteFile(policy, []byte("[vault]\nkey_file = \""+keyFile+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startContextNode(t, home, home, "--policy", policy)
	rw := &authority.ExecutionContext{Principal: "ci", Provenance: "controller",
		Capabilities: []string{"exec", "read", "secrets", "write"},
		Workspace:    &authority.Workspace{Root: ws, Mode: authority.WorkspaceReadWrite}}

	if _, perr := n.invoke("node.fs.stat", map[string]any{"path": "in.txt"}, rw); perr != nil {
		t.Fatalf("stat inside the workspace: %v", perr)
	}
	// Without a context the node's root (home) holds other/secret.txt.
	if _, perr := n.invoke("node.fs.stat", map[string]any{"path": filepath.Join(other, "secret.txt")}, nil); perr != nil {
		t.Fatalf("stat without a context: %v", perr)
	}
	for _, p := range []string{filepath.Join(other, "secret.txt"), "../other/secret.txt", "link-file", "link-dir/f.txt",
		"link-out/x.txt", filepath.Join(outside, "x.txt")} {
		_, perr := n.invoke("node.fs.read", map[string]any{"path": p}, rw)
		if perr == nil || (perr.DomainCode() != protocol.DomainPathNotAllowed && perr.Code != protocol.CodeInvalidParams) {
			t.Fatalf("read %s: %+v, want path_not_allowed", p, perr)
		}
	}
	st, perr := n.invoke("node.fs.stat", map[string]any{"path": "in.txt"}, rw)
	if perr != nil {
		t.Fatal(perr)
	}
	mtime := st["mtimeMs"]
	_, perr = n.invoke("node.fs.move", map[string]any{"path": "in.txt", "destination": filepath.Join(other, "moved.txt"), "expectedModifiedAtMs": mtime}, rw)
	wantRefused(t, "move to outside the workspace", perr, protocol.DomainPathNotAllowed)
	fi, _ := os.Stat(filepath.Join(other, "secret.txt"))
	_, perr = n.invoke("node.fs.move", map[string]any{"path": filepath.Join(other, "secret.txt"), "destination": "stolen.txt",
		"expectedModifiedAtMs": fi.ModTime().UnixMilli()}, rw)
	wantRefused(t, "move from outside the workspace", perr, protocol.DomainPathNotAllowed)
	_, perr = n.invoke("node.fs.write", map[string]any{"path": "link-dir/new.txt", "dataBase64": base64.StdEncoding.EncodeToString([]byte("x"))}, rw)
	wantRefused(t, "write through a symlinked directory", perr, protocol.DomainPathNotAllowed)
	run := func(id, cwd string, ec *authority.ExecutionContext) *protocol.Error {
		_, perr := n.invoke(protocol.MethodProcessRun, map[string]any{"processId": id, "cwd": cwd, "argv": []string{"true"},
			"stdinBase64": "", "timeoutMs": 10000, "maxOutputBytes": 1024}, ec)
		return perr
	}
	wantRefused(t, "process cwd outside the workspace", run("cwd-out", other, rw), protocol.DomainPathNotAllowed)
	wantRefused(t, "process cwd through a symlink", run("cwd-link", filepath.Join(ws, "link-dir"), rw), protocol.DomainPathNotAllowed)
	if perr := run("cwd-in", ws, rw); perr != nil {
		t.Fatalf("process cwd inside the workspace: %v", perr)
	}
	for _, p := range []string{filepath.Join(other, "moved.txt"), filepath.Join(ws, "stolen.txt"), filepath.Join(other, "dir", "new.txt")} {
		if _, err := os.Lstat(p); err == nil {
			t.Fatalf("%s exists", p)
		}
	}

	// A workspace outside the node's roots, or spelled through a symlink.
	for _, root := range []string{outside, filepath.Join(ws, "link-dir")} {
		c := *rw
		c.Workspace = &authority.Workspace{Root: root, Mode: authority.WorkspaceReadWrite}
		_, perr := n.invoke("node.fs.stat", map[string]any{"path": "."}, &c)
		if perr == nil || (perr.DomainCode() != protocol.DomainPathNotAllowed && perr.DomainCode() != protocol.DomainContextMismatch) {
			t.Fatalf("workspace %s: %+v", root, perr)
		}
	}
	// A context replayed onto another request.
	c := *rw
	c.RunID = "inv-someone-else"
	_, perr = n.invoke("node.fs.stat", map[string]any{"path": "in.txt"}, &c)
	wantRefused(t, "runId mismatch", perr, protocol.DomainContextMismatch)

	// read_only refuses every mutation; reads still work.
	ro := *rw
	ro.Workspace = &authority.Workspace{Root: ws, Mode: authority.WorkspaceReadOnly}
	if _, perr := n.invoke("node.fs.read", map[string]any{"path": "in.txt"}, &ro); perr != nil {
		t.Fatalf("read under read_only: %v", perr)
	}
	for _, m := range []struct {
		method string
		params map[string]any
	}{
		{"node.fs.write", map[string]any{"path": "w.txt", "dataBase64": "eA=="}},
		{"node.fs.mkdir", map[string]any{"path": "made"}},
		{"node.fs.move", map[string]any{"path": "in.txt", "destination": "moved.txt", "expectedModifiedAtMs": mtime}},
		{"node.fs.delete", map[string]any{"path": "in.txt", "confirm": "in.txt", "confirmationToken": "t"}},
		{protocol.MethodProcessRun, map[string]any{"processId": "ro-run", "cwd": ws, "argv": []string{"true"}, "stdinBase64": "", "timeoutMs": 10000, "maxOutputBytes": 1024}},
		{protocol.MethodProcessCancel, map[string]any{"processId": "ro-cancel"}},
		{protocol.MethodSecretsSet, map[string]any{"name": "db", "value": "v"}},
		{protocol.MethodSecretsDelete, map[string]any{"name": "db"}},
	} {
		_, perr := n.invoke(m.method, m.params, &ro)
		wantRefused(t, m.method+" under read_only", perr, protocol.DomainWorkspaceReadOnly)
	}
	for _, p := range []string{"w.txt", "made", "moved.txt"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Fatalf("%s was made under read_only", p)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "in.txt")); err != nil {
		t.Fatalf("in.txt under read_only: %v", err)
	}
}
