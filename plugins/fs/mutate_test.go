//go:build !wasip1

package fs_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hfs "lemon/hostcalls/fs"
	"lemon/protocol"
)

// Tests of the fs module's mutation decisions through the real host
// (docs/FS.md, "Writes, moves and deletes"): revisions, move rules and
// delete preview tokens, which the module holds since the host offers
// only primitives (hostcalls/fs/prim_mut*.go).

func (f *fixture) mustInvoke(t *testing.T, method string, args any) json.RawMessage {
	t.Helper()
	b, _ := json.Marshal(args)
	out, perr := f.invoke(t, method, string(b))
	if perr != nil {
		t.Fatalf("%s %s: %v", method, b, perr)
	}
	return out
}

func (f *fixture) errOf(t *testing.T, method string, args any) *protocol.Error {
	t.Helper()
	b, _ := json.Marshal(args)
	_, perr := f.invoke(t, method, string(b))
	return perr
}

func (f *fixture) mtime(t *testing.T, rel string) int64 {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(f.root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return fi.ModTime().UnixMilli()
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestWriteRevisionsThroughModule: omitted or 0 expectedModifiedAtMs
// needs a missing file; otherwise the mtimeMs must match; each write
// leaves a strictly larger mtimeMs; a refused write changes nothing and
// says nothing was applied; a conflicting write creates no parents.
func TestWriteRevisionsThroughModule(t *testing.T) {
	f := newFixture(t)
	var r protocol.FSWriteResult
	out := f.mustInvoke(t, "node.fs.write", map[string]any{"nodeId": "n1", "path": "a.txt", "dataBase64": b64("one")})
	if json.Unmarshal(out, &r) != nil || r.Path != filepath.Join(f.root, "a.txt") || r.BytesWritten != 3 || r.Size != 3 || r.MtimeMs != f.mtime(t, "a.txt") {
		t.Fatalf("create: %s", out)
	}
	for _, exp := range []any{nil, 0, r.MtimeMs - 1, r.MtimeMs + 1} {
		args := map[string]any{"nodeId": "n1", "path": "a.txt", "dataBase64": b64("two")}
		if exp != nil {
			args["expectedModifiedAtMs"] = exp
		}
		perr := f.errOf(t, "node.fs.write", args)
		if perr == nil || perr.Code != protocol.CodeConflict || perr.DomainCode() != protocol.DomainRevisionConflict ||
			perr.Details.MutationMayHaveApplied != nil && *perr.Details.MutationMayHaveApplied {
			t.Errorf("expected %v: %+v", exp, perr)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(f.root, "a.txt")); string(b) != "one" {
		t.Fatalf("a refused write changed the file: %q", b)
	}
	// Back-to-back writes within one clock tick still advance mtimeMs.
	rev := r.MtimeMs
	for i := 0; i < 5; i++ {
		out = f.mustInvoke(t, "node.fs.write", map[string]any{"nodeId": "n1", "path": "a.txt", "dataBase64": b64(fmt.Sprint("v", i)),
			"expectedModifiedAtMs": rev, "offset": 0, "truncate": true})
		var w protocol.FSWriteResult
		json.Unmarshal(out, &w)
		if w.MtimeMs <= rev || w.MtimeMs != f.mtime(t, "a.txt") {
			t.Fatalf("write %d: mtimeMs %d after %d", i, w.MtimeMs, rev)
		}
		rev = w.MtimeMs
	}
	// Offset without truncate keeps the tail.
	f.mustInvoke(t, "node.fs.write", map[string]any{"nodeId": "n1", "path": "a.txt", "dataBase64": b64("X"),
		"expectedModifiedAtMs": rev, "offset": 1, "truncate": false})
	if b, _ := os.ReadFile(filepath.Join(f.root, "a.txt")); string(b) != "vX" {
		t.Fatalf("offset write: %q", b)
	}
	// A nonzero revision on a missing path with mkdirs is a conflict and
	// leaves no directory behind.
	perr := f.errOf(t, "node.fs.write", map[string]any{"nodeId": "n1", "path": "p/q/f", "dataBase64": b64("x"), "mkdirs": true, "expectedModifiedAtMs": 5})
	if perr.DomainCode() != protocol.DomainRevisionConflict {
		t.Errorf("missing parents with a revision: %v", perr)
	}
	if _, err := os.Lstat(filepath.Join(f.root, "p")); !os.IsNotExist(err) {
		t.Error("a conflicting write created a parent")
	}
	// Without a revision, mkdirs creates them.
	f.mustInvoke(t, "node.fs.write", map[string]any{"nodeId": "n1", "path": "p/q/f", "dataBase64": b64("x"), "mkdirs": true})
	if b, _ := os.ReadFile(filepath.Join(f.root, "p/q/f")); string(b) != "x" {
		t.Error("mkdirs write")
	}
}

// TestMoveRulesThroughModule: the move rules the module decides.
func TestMoveRulesThroughModule(t *testing.T) {
	f := newFixture(t)
	for _, n := range []string{"a", "b"} {
		os.WriteFile(filepath.Join(f.root, n), []byte(n), 0o644)
	}
	mt := f.mtime(t, "a")
	move := func(src, dst string, exp int64, overwrite bool) *protocol.Error {
		return f.errOf(t, "node.fs.move", map[string]any{"nodeId": "n1", "path": src, "destination": dst, "expectedModifiedAtMs": exp, "overwrite": overwrite})
	}
	for _, c := range []struct {
		name      string
		src, dst  string
		exp       int64
		overwrite bool
		want      string
	}{
		{"onto itself", "a", "a", mt, false, protocol.DomainAlreadyExists},
		{"onto itself, stale", "a", "a", mt - 1, true, protocol.DomainRevisionConflict},
		{"existing destination", "a", "b", mt, false, protocol.DomainAlreadyExists},
		{"stale revision", "a", "c", mt + 1, false, protocol.DomainRevisionConflict},
		{"missing", "zz", "c", 1, false, protocol.DomainNotFound},
	} {
		if perr := move(c.src, c.dst, c.exp, c.overwrite); perr.DomainCode() != c.want {
			t.Errorf("%s: %v", c.name, perr)
		}
	}
	if perr := move("a", "a", mt, true); perr != nil {
		t.Errorf("onto itself with overwrite: %v", perr)
	}
	out := f.mustInvoke(t, "node.fs.move", map[string]any{"nodeId": "n1", "path": "a", "destination": "b", "expectedModifiedAtMs": mt, "overwrite": true})
	var r protocol.FSMoveResult
	if json.Unmarshal(out, &r) != nil || !r.Moved || r.Destination != filepath.Join(f.root, "b") {
		t.Fatalf("overwrite: %s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(f.root, "b")); string(b) != "a" {
		t.Fatal("destination not replaced")
	}
}

func (f *fixture) preview(t *testing.T, path string, recursive bool) protocol.FSDeletePreviewResult {
	t.Helper()
	var r protocol.FSDeletePreviewResult
	out := f.mustInvoke(t, "node.fs.delete.preview", map[string]any{"nodeId": "n1", "path": path, "recursive": recursive})
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func (f *fixture) del(t *testing.T, path, confirm, token string) *protocol.Error {
	t.Helper()
	return f.errOf(t, "node.fs.delete", map[string]any{"nodeId": "n1", "path": path, "confirm": confirm, "confirmationToken": token})
}

// TestDeleteTokensThroughModule: tokens are 43 characters, expire five
// minutes after the preview, are used once (even by a failing delete),
// bind the path string, and a change to the tree makes them stale.
func TestDeleteTokensThroughModule(t *testing.T) {
	f := newFixture(t)
	os.MkdirAll(filepath.Join(f.root, "t/sub"), 0o755)
	os.WriteFile(filepath.Join(f.root, "t/sub/x"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(f.root, "n.txt"), []byte("n"), 0o644)
	p := f.preview(t, "n.txt", false)
	if len(p.ConfirmationToken) != 43 || len(p.ChildrenDigest) != 64 || p.CandidateCount != 1 || p.Stat.Mime != "text/plain" {
		t.Errorf("preview %+v", p)
	}
	if d := p.ExpiresAtMs - time.Now().UnixMilli(); d < 299000 || d > 300000 {
		t.Errorf("expiry in %d ms", d)
	}
	if perr := f.del(t, "n.txt", filepath.Join(f.root, "n.txt"), p.ConfirmationToken); perr.DomainCode() != protocol.DomainConfirmationMismatch {
		t.Errorf("expanded confirm: %v", perr)
	}
	if perr := f.del(t, "n.txt", "n.txt", p.ConfirmationToken); perr.DomainCode() != protocol.DomainStalePreview {
		t.Errorf("reused token: %v", perr)
	}
	p = f.preview(t, "n.txt", false)
	if perr := f.del(t, filepath.Join(f.root, "n.txt"), filepath.Join(f.root, "n.txt"), p.ConfirmationToken); perr.DomainCode() != protocol.DomainStalePreview {
		t.Errorf("other spelling of the path: %v", perr)
	}
	p = f.preview(t, "n.txt", false)
	if perr := f.del(t, "n.txt", "n.txt", p.ConfirmationToken); perr != nil {
		t.Fatalf("delete: %v", perr)
	}
	if _, err := os.Lstat(filepath.Join(f.root, "n.txt")); !os.IsNotExist(err) {
		t.Fatal("not deleted")
	}
	if perr := f.errOf(t, "node.fs.delete.preview", map[string]any{"nodeId": "n1", "path": "t"}); perr.DomainCode() != protocol.DomainDirectoryNotEmpty {
		t.Errorf("non-recursive: %v", perr)
	}
	p = f.preview(t, "t", true)
	if p.CandidateCount != 3 || p.ChildCount != 1 {
		t.Errorf("counts %+v", p)
	}
	os.WriteFile(filepath.Join(f.root, "t/sub/.new"), nil, 0o644)
	perr := f.del(t, "t", "t", p.ConfirmationToken)
	if perr.DomainCode() != protocol.DomainStalePreview || perr.Details.MutationMayHaveApplied != nil && *perr.Details.MutationMayHaveApplied {
		t.Errorf("changed tree: %+v", perr)
	}
	if _, err := os.Lstat(filepath.Join(f.root, "t/sub/x")); err != nil {
		t.Error("a stale delete removed something")
	}
	p = f.preview(t, "t", true)
	if perr := f.del(t, "t", "t", p.ConfirmationToken); perr != nil {
		t.Fatalf("recursive delete: %v", perr)
	}
	if names, _ := os.ReadDir(f.root); len(names) != 0 {
		t.Errorf("left behind: %v", names)
	}
}

// TestServiceWidePreviewLimitsThroughModule: the node keeps 128 previews;
// the 129th evicts the oldest, and the one after it stays valid. 20,000
// entries in total: two previews of 10,000 fit, a third evicts the first.
func TestServiceWidePreviewLimitsThroughModule(t *testing.T) {
	f := newFixture(t)
	os.WriteFile(filepath.Join(f.root, "f"), nil, 0o644)
	var toks []string
	for i := 0; i < 129; i++ {
		toks = append(toks, f.preview(t, "f", false).ConfirmationToken)
	}
	if perr := f.del(t, "f", "f", toks[0]); perr.DomainCode() != protocol.DomainStalePreview {
		t.Errorf("oldest not evicted: %v", perr)
	}
	if perr := f.del(t, "f", "f", toks[1]); perr != nil {
		t.Errorf("second oldest evicted: %v", perr)
	}

	f2 := newFixture(t)
	dir := filepath.Join(f2.root, "t")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(dir+"/0", nil, 0o644)
	for i := 1; i < 9999; i++ {
		if err := os.Link(dir+"/0", fmt.Sprintf("%s/%d", dir, i)); err != nil {
			t.Fatal(err)
		}
	}
	p1 := f2.preview(t, "t", true)
	p2 := f2.preview(t, "t", true)
	if p1.CandidateCount != 10000 {
		t.Fatalf("candidates %d", p1.CandidateCount)
	}
	f2.preview(t, "t", true)
	if perr := f2.del(t, "t", "t", p1.ConfirmationToken); perr.DomainCode() != protocol.DomainStalePreview {
		t.Errorf("first not evicted: %v", perr)
	}
	if perr := f2.del(t, "t", "t", p2.ConfirmationToken); perr != nil {
		t.Errorf("second evicted: %v", perr)
	}
	// 10,001 entries is preview_too_large.
	os.MkdirAll(dir, 0o755)
	for i := 0; i < 10000; i++ {
		os.WriteFile(fmt.Sprintf("%s/%d", dir, i), nil, 0o644)
	}
	if perr := f2.errOf(t, "node.fs.delete.preview", map[string]any{"nodeId": "n1", "path": "t", "recursive": true}); perr.DomainCode() != protocol.DomainPreviewTooLarge {
		t.Errorf("10,001 entries: %v", perr)
	}
}

// TestDeadlineForgetsTokens: a mutation whose host call passes the
// request deadline answers filesystem_outcome_unknown (possibly applied)
// and the module forgets every outstanding preview token, since the late
// work may still change what they bound (docs/FS.md).
func TestDeadlineForgetsTokens(t *testing.T) {
	var hold atomic.Bool
	release := make(chan struct{})
	f := newFixtureWith(t, hfs.Config{Deadline: 2 * time.Second, TestHook: func(op string) {
		if op == "write" && hold.Load() {
			<-release
		}
	}})
	os.WriteFile(filepath.Join(f.root, "b"), []byte("b"), 0o644)
	p := f.preview(t, "b", false)
	hold.Store(true)
	perr := f.errOf(t, "node.fs.write", map[string]any{"nodeId": "n1", "path": "new", "dataBase64": b64("x")})
	close(release)
	if perr.DomainCode() != protocol.DomainFilesystemOutcomeUnknown || perr.Details.MutationMayHaveApplied == nil || !*perr.Details.MutationMayHaveApplied {
		t.Fatalf("held write: %+v", perr)
	}
	if perr := f.del(t, "b", "b", p.ConfirmationToken); perr.DomainCode() != protocol.DomainStalePreview {
		t.Errorf("token survived a timeout: %v", perr)
	}
	if _, err := os.Lstat(filepath.Join(f.root, "b")); err != nil {
		t.Error("b was deleted")
	}
}

// TestRaceConcurrentPreviewsKeepEveryToken: previews made at once from
// several goroutines all land in the module's index (swapped with
// store.cas, never a lost update), and each token deletes its file once.
func TestRaceConcurrentPreviewsKeepEveryToken(t *testing.T) {
	f := newFixture(t)
	const workers, each = 4, 16
	for i := 0; i < workers*each; i++ {
		os.WriteFile(filepath.Join(f.root, fmt.Sprint("f", i)), nil, 0o644)
	}
	toks := make([]string, workers*each)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < each; j++ {
				i := w*each + j
				b, _ := json.Marshal(map[string]any{"nodeId": "n1", "path": fmt.Sprint("f", i)})
				out, perr := f.invoke(t, "node.fs.delete.preview", string(b))
				if perr != nil {
					t.Errorf("preview %d: %v", i, perr)
					return
				}
				var r protocol.FSDeletePreviewResult
				json.Unmarshal(out, &r)
				toks[i] = r.ConfirmationToken
			}
		}()
	}
	wg.Wait()
	for i, tok := range toks {
		p := fmt.Sprint("f", i)
		if perr := f.del(t, p, p, tok); perr != nil {
			t.Errorf("token %d lost: %v", i, perr)
		}
	}
	if names, _ := os.ReadDir(f.root); len(names) != 0 {
		t.Errorf("left: %d entries", len(names))
	}
}
