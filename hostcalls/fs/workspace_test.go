package fs

import (
	"encoding/json"
	"os"
	"testing"

	"lemon/hostcalls"
	"lemon/protocol"
)

// wsEnv is a node root "root" holding a workspace root/ws and, beside it,
// root/other; outside the node's root lies "outside". Inside the
// workspace: a file, a symlink to a file outside the workspace (but inside
// the node root), a symlink to a directory outside it, and a symlink to a
// directory outside the node.
func wsEnv(t *testing.T) (*env, *fakeCall) {
	e := newEnv(t, []node{
		{path: "root/ws/in.txt", file: "in"},
		{path: "root/ws/sub", dir: true},
		{path: "root/other/secret.txt", file: "other"},
		{path: "root/other/dir/f.txt", file: "other"},
		{path: "outside/x.txt", file: "outside"},
		{path: "root/ws/link-file", symlink: "${TMP}/root/other/secret.txt"},
		{path: "root/ws/link-dir", symlink: "../other/dir"},
		{path: "root/ws/link-out", symlink: "${TMP}/outside"},
		{path: "root/ws/link-in", symlink: "in.txt"},
	}, "root")
	c := newCall()
	c.auth = hostcalls.Authority{Principal: "ops", Workspace: e.abs("root/ws")}
	return e, c
}

func wantDomain(t *testing.T, what string, err *protocol.Error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: accepted, want %s", what, code)
	}
	if d := domain(err); d != code {
		t.Fatalf("%s: %s (%s), want %s", what, d, err.Message, code)
	}
}

// TestAdvWorkspaceEscapes: under a context workspace, a path outside it is
// path_not_allowed even inside the node's root: absolute paths, `..`,
// symlinked files and directories leading out, and paths outside the node.
// Paths inside it (relative to it, absolute, through an inner symlink) work.
func TestAdvWorkspaceEscapes(t *testing.T) {
	e, c := wsEnv(t)
	for _, p := range []string{
		e.abs("root/other/secret.txt"), // absolute, inside the node root
		e.abs("root"),                  // the node root itself
		"../other/secret.txt",          // ..
		"sub/../../other/secret.txt",
		"link-file",      // symlinked file leading out
		"link-dir/f.txt", // symlinked directory leading out
		"link-out/x.txt", // symlinked directory leading out of the node
		e.abs("outside/x.txt"),
		"/etc/passwd",
	} {
		_, err := e.call("fs.open", map[string]any{"path": p}, c)
		wantDomain(t, "open "+p, err, protocol.DomainPathNotAllowed)
		_, err = e.call("fs.stat", map[string]any{"path": p}, c)
		wantDomain(t, "stat "+p, err, protocol.DomainPathNotAllowed)
		_, err = e.call("fs.read", map[string]any{"path": p, "offset": 0, "length": 10}, c)
		wantDomain(t, "read "+p, err, protocol.DomainPathNotAllowed)
	}
	for _, p := range []string{"in.txt", e.abs("root/ws/in.txt"), "link-in", "./sub/../in.txt"} {
		if p == "./sub/../in.txt" {
			continue // `..` is refused everywhere, in or out
		}
		if _, err := e.call("fs.open", map[string]any{"path": p}, c); err != nil {
			t.Fatalf("open %s inside the workspace: %v", p, err)
		}
		if _, err := e.call("fs.stat", map[string]any{"path": p}, c); err != nil {
			t.Fatalf("stat %s inside the workspace: %v", p, err)
		}
	}
	// The same outside path is allowed without a context (the node's root).
	if _, err := e.call("fs.open", map[string]any{"path": e.abs("root/other/secret.txt")}, nil); err != nil {
		t.Fatalf("without a workspace: %v", err)
	}
}

// TestAdvWorkspaceMutationsConfined: write, mkdir, move (both ends) and
// delete stay inside the workspace.
func TestAdvWorkspaceMutationsConfined(t *testing.T) {
	e, c := wsEnv(t)
	blob := c.PutBlob([]byte("x"))
	mt := e.mtime("root/ws/in.txt")
	outside := e.abs("root/other/new.txt")
	_, err := e.call("fs.write_at", map[string]any{"expect": map[string]any{"absent": true}, "path": outside, "blob": blob, "offset": 0, "truncate": true}, c)
	wantDomain(t, "write outside", err, protocol.DomainPathNotAllowed)
	_, err = e.call("fs.write_at", map[string]any{"expect": map[string]any{"absent": true}, "path": "link-dir/f.txt", "blob": blob, "offset": 0, "truncate": true}, c)
	wantDomain(t, "write through a symlinked directory", err, protocol.DomainPathNotAllowed)
	_, err = e.call("fs.mkdirs", map[string]any{"path": e.abs("root/other/made")}, c)
	wantDomain(t, "mkdir outside", err, protocol.DomainPathNotAllowed)
	_, err = e.call("fs.rename", map[string]any{"path": "in.txt", "destination": e.abs("root/other/moved.txt"), "noReplace": true, "expect": mtimeExpect(mt)}, c)
	wantDomain(t, "move destination outside", err, protocol.DomainPathNotAllowed)
	_, err = e.call("fs.rename", map[string]any{"path": e.abs("root/other/secret.txt"), "destination": "stolen.txt", "noReplace": true, "expect": mtimeExpect(e.mtime("root/other/secret.txt"))}, c)
	wantDomain(t, "move source outside", err, protocol.DomainPathNotAllowed)
	_, err = e.call("fs.walk", map[string]any{"path": e.abs("root/other/secret.txt"), "maxEntries": 10, "maxDepth": 1, "maxBytes": 1 << 20}, c)
	wantDomain(t, "delete preview outside", err, protocol.DomainPathNotAllowed)
	_, err = e.call("fs.rename", map[string]any{"path": e.abs("root/ws"), "destination": "x", "noReplace": true, "expect": mtimeExpect(e.mtime("root/ws"))}, c)
	if err == nil {
		t.Fatal("moving the workspace root itself was accepted")
	}
	for _, p := range []string{"root/other/new.txt", "root/other/made", "root/other/moved.txt", "root/ws/stolen.txt"} {
		if e.exists(p) {
			t.Fatalf("%s was created", p)
		}
	}
	if !e.exists("root/other/secret.txt") || !e.exists("root/ws/in.txt") {
		t.Fatal("a file moved")
	}
	// Inside the workspace every mutation works.
	if _, err := e.call("fs.write_at", map[string]any{"expect": map[string]any{"absent": true}, "path": "sub/new.txt", "blob": blob, "offset": 0, "truncate": true}, c); err != nil {
		t.Fatalf("write inside: %v", err)
	}
	if _, err := e.call("fs.rename", map[string]any{"path": "in.txt", "destination": "sub/in.txt", "noReplace": true, "expect": mtimeExpect(mt)}, c); err != nil {
		t.Fatalf("move inside: %v", err)
	}
}

// TestAdvWorkspaceRootRules: a workspace must be canonical and lie inside
// the node's roots: one outside the node, one spelled through a symlink,
// with `..`, relative, or not a directory is refused, and so is a
// workspace whose path became a symlink.
func TestAdvWorkspaceRootRules(t *testing.T) {
	e, _ := wsEnv(t)
	for _, ws := range []string{
		e.abs("outside"),               // a root outside the node
		e.abs("root/ws/link-dir"),      // through a symlink
		e.abs("root/ws/link-out"),      // through a symlink out of the node
		e.abs("root/ws") + "/../other", // not clean
		"root/ws",                      // relative
		e.abs("root/ws/in.txt"),        // not a directory
		e.abs("root/ws/missing"),       // missing
		e.abs("root/ws") + "/",         // not clean
	} {
		c := newCall()
		c.auth.Workspace = ws
		_, err := e.call("fs.open", map[string]any{"path": "in.txt"}, c)
		wantDomain(t, "workspace "+ws, err, protocol.DomainPathNotAllowed)
	}
	// A workspace that is replaced by a symlink is refused from then on.
	c := newCall()
	c.auth.Workspace = e.abs("root/ws/sub")
	if _, err := e.call("fs.open", map[string]any{"path": "."}, c); err != nil {
		t.Fatalf("list the workspace: %v", err)
	}
	if err := os.Rename(e.abs("root/ws/sub"), e.abs("root/ws/sub2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.abs("outside"), e.abs("root/ws/sub")); err != nil {
		t.Fatal(err)
	}
	_, err := e.call("fs.open", map[string]any{"path": "."}, c)
	wantDomain(t, "workspace swapped for a symlink", err, protocol.DomainPathNotAllowed)
}

// TestWorkspaceMaxFileBytes: a write may end at max_file_bytes, not one
// byte past it.
func TestWorkspaceMaxFileBytes(t *testing.T) {
	e, c := wsEnv(t)
	c.auth.MaxFileBytes = 10
	blob := c.PutBlob([]byte("0123456789"))
	if _, err := e.call("fs.write_at", map[string]any{"expect": map[string]any{"absent": true}, "path": "ten.txt", "blob": blob, "offset": 0, "truncate": true}, c); err != nil {
		t.Fatalf("10 bytes at the limit: %v", err)
	}
	_, err := e.call("fs.write_at", map[string]any{"expect": map[string]any{"absent": true}, "path": "ten.txt", "blob": blob, "offset": 1, "truncate": false}, c)
	wantDomain(t, "one byte past", err, protocol.DomainLimitExceeded)
	if e.content("root/ws/ten.txt") != "0123456789" {
		t.Fatal("refused write changed the file")
	}
}

// TestWorkspaceMaxFileBytesRead: one read returns at most max_file_bytes
// (a short chunk).
func TestWorkspaceMaxFileBytesRead(t *testing.T) {
	e, c := wsEnv(t)
	c.auth.MaxFileBytes = 1
	out, err := e.call("fs.read", map[string]any{"path": "in.txt", "offset": 0, "length": 10}, c)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Blob   uint32 `json:"blob"`
		Length int64  `json:"length"`
	}
	if jerr := json.Unmarshal(out, &r); jerr != nil {
		t.Fatal(jerr)
	}
	if b, _ := c.Blob(r.Blob); string(b) != "i" {
		t.Fatalf("read under max_file_bytes 1: %s (%q)", out, b)
	}
	c.auth.MaxFileBytes = 2
	out, _ = e.call("fs.read", map[string]any{"path": "in.txt", "offset": 0, "length": 10}, c)
	json.Unmarshal(out, &r)
	if b, _ := c.Blob(r.Blob); string(b) != "in" {
		t.Fatalf("read under max_file_bytes 2 (the whole file): %s (%q)", out, b)
	}
}

// mtimeExpect is fs.rename's expect for a millisecond revision ms.
func mtimeExpect(ms int64) map[string]any {
	return map[string]any{"mtimeNsMin": ms * 1e6, "mtimeNsMax": ms*1e6 + 999_999}
}
