package fs

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"lemon/hostcalls/contract"
	"lemon/protocol"
)

func mustPreview(t *testing.T, e *env, path string, recursive bool) *protocol.FSDeletePreviewResult {
	t.Helper()
	r, err := e.f.Preview(path, recursive)
	if err != nil {
		t.Fatalf("preview %s: %v", path, err)
	}
	return r
}

func TestDeleteFile(t *testing.T) {
	e := newEnv(t, []node{{path: "root/results/note.txt", file: "hi"}}, "root")
	p := mustPreview(t, e, "results/note.txt", false)
	if p.Path != e.abs("root/results/note.txt") || p.CandidateCount != 1 || p.ChildCount != 0 || p.Stat.Size != 2 || p.Stat.Type != "regular" {
		t.Errorf("preview %+v", p)
	}
	if len(p.ConfirmationToken) != 43 || len(p.ChildrenDigest) != 64 {
		t.Errorf("token/digest shapes: %d %d", len(p.ConfirmationToken), len(p.ChildrenDigest))
	}
	if d := p.ExpiresAtMs - time.Now().UnixMilli(); d < 299000 || d > 300000 {
		t.Errorf("expiry in %d ms", d)
	}
	// confirm must be the original string, not an expanded equivalent.
	if _, err := e.f.Delete("results/note.txt", e.abs("root/results/note.txt"), p.ConfirmationToken); domain(err) != "confirmation_mismatch" {
		t.Errorf("expanded confirm: %v", err)
	}
	// The token was consumed by that attempt.
	if _, err := e.f.Delete("results/note.txt", "results/note.txt", p.ConfirmationToken); domain(err) != "stale_preview" {
		t.Errorf("reused token: %v", err)
	}
	p = mustPreview(t, e, "results/note.txt", false)
	r, err := e.f.Delete("results/note.txt", "results/note.txt", p.ConfirmationToken)
	if err != nil || !r.Deleted || r.Path != e.abs("root/results/note.txt") || e.exists("root/results/note.txt") {
		t.Fatalf("delete: %+v %v", r, err)
	}
	if names := e.dirNames("root/results"); len(names) != 0 {
		t.Errorf("left behind: %v", names)
	}
	// One use.
	if _, err := e.f.Delete("results/note.txt", "results/note.txt", p.ConfirmationToken); domain(err) != "stale_preview" {
		t.Errorf("second use: %v", err)
	}
}

func TestDeletePathMustMatchPreview(t *testing.T) {
	e := newEnv(t, []node{{path: "root/a", file: "1"}}, "root")
	p := mustPreview(t, e, "a", false)
	if _, err := e.f.Delete(e.abs("root/a"), e.abs("root/a"), p.ConfirmationToken); domain(err) != "stale_preview" || !e.exists("root/a") {
		t.Errorf("different path spelling: %v", err)
	}
}

func TestDeleteNonRecursiveRules(t *testing.T) {
	e := newEnv(t, []node{{path: "root/empty", dir: true}, {path: "root/full/.h", file: ""}}, "root")
	if _, err := e.f.Preview("full", false); domain(err) != "directory_not_empty" {
		t.Errorf("nonempty without recursive (hidden child only): %v", err)
	}
	p := mustPreview(t, e, "empty", false)
	if _, err := e.f.Delete("empty", "empty", p.ConfirmationToken); err != nil || e.exists("root/empty") {
		t.Errorf("empty dir: %v", err)
	}
	// An empty directory that gains a child before delete is stale.
	os.Mkdir(e.abs("root/e2"), 0o755)
	p = mustPreview(t, e, "e2", false)
	os.WriteFile(e.abs("root/e2/new"), nil, 0o644)
	if _, err := e.f.Delete("e2", "e2", p.ConfirmationToken); domain(err) != "stale_preview" || !e.exists("root/e2/new") {
		t.Errorf("grown empty dir: %v", err)
	}
}

var recTree = []node{
	{path: "root/t/a.txt", file: "a"},
	{path: "root/t/.hidden", file: "h"},
	{path: "root/t/sub/b.txt", file: "b"},
	{path: "root/t/sub/deep/c.txt", file: "c"},
	{path: "root/t/link-out", symlink: "${TMP}/outside"},
	{path: "root/t/link-file-out", symlink: "${TMP}/outside/secret.txt"},
	{path: "outside/secret.txt", file: "CANARY"},
}

func TestDeleteRecursive(t *testing.T) {
	e := newEnv(t, recTree, "root")
	p := mustPreview(t, e, "t", true)
	if p.ChildCount != 5 || p.CandidateCount != 9 || p.Stat.Type != "directory" {
		t.Errorf("counts: child %d candidates %d", p.ChildCount, p.CandidateCount)
	}
	r, err := e.f.Delete("t", "t", p.ConfirmationToken)
	if err != nil || !r.Deleted || e.exists("root/t") {
		t.Fatalf("delete: %v", err)
	}
	// Child symlinks were unlinked, never followed.
	if e.content("outside/secret.txt") != "CANARY" {
		t.Fatal("outside changed")
	}
	if names := e.dirNames("root"); len(names) != 0 {
		t.Errorf("left in root: %v", names)
	}
}

// TestDeleteStale: every kind of change between preview and delete is
// stale_preview and deletes nothing (hidden entries included).
func TestDeleteStale(t *testing.T) {
	changes := map[string]func(e *env){
		"added hidden":   func(e *env) { os.WriteFile(e.abs("root/t/sub/.new"), nil, 0o644) },
		"removed hidden": func(e *env) { os.Remove(e.abs("root/t/.hidden")) },
		"modified deep":  func(e *env) { os.WriteFile(e.abs("root/t/sub/deep/c.txt"), []byte("cc"), 0o644) },
		"touched":        func(e *env) { ts := time.Now().Add(time.Hour); os.Chtimes(e.abs("root/t/a.txt"), ts, ts) },
		"chmod":          func(e *env) { os.Chmod(e.abs("root/t/a.txt"), 0o600) },
		"replaced": func(e *env) {
			os.Remove(e.abs("root/t/a.txt"))
			os.WriteFile(e.abs("root/t/a.txt"), []byte("a"), 0o644)
		},
		"link retargeted": func(e *env) { os.Remove(e.abs("root/t/link-out")); os.Symlink("/", e.abs("root/t/link-out")) },
		"target replaced": func(e *env) { os.Rename(e.abs("root/t"), e.abs("root/t-old")); os.Mkdir(e.abs("root/t"), 0o755) },
		"target removed":  func(e *env) { os.RemoveAll(e.abs("root/t")) },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, recTree, "root")
			p := mustPreview(t, e, "t", true)
			change(e)
			before := e.dirNames("root")
			if _, err := e.f.Delete("t", "t", p.ConfirmationToken); domain(err) != "stale_preview" {
				t.Fatalf("got %v", err)
			}
			if after := e.dirNames("root"); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Errorf("root changed: %v -> %v", before, after)
			}
		})
	}
}

func TestDeleteRootRefused(t *testing.T) {
	e := newEnv(t, []node{{path: "root/x", file: ""}, {path: "root/link-root", symlink: "."}}, "root", "root/nested")
	for _, p := range []string{e.abs("root"), "link-root", "nested"} {
		if _, err := e.f.Preview(p, true); domain(err) != "path_not_allowed" {
			t.Errorf("%s: %v", p, err)
		}
	}
	// A tree that contains another root cannot be previewed either.
	e2 := newEnv(t, []node{{path: "top/sub/x", file: ""}}, "top", "top/sub/x2")
	os.Mkdir(e2.abs("top/sub/x2"), 0o755)
	if _, err := e2.f.Preview("sub", true); domain(err) != "path_not_allowed" {
		t.Errorf("tree holding a root: %v", err)
	}
}

// TestPreviewEntryLimit: 10,000 candidates (target + 9,999) pass; 10,001
// is preview_too_large.
func TestPreviewEntryLimit(t *testing.T) {
	e := newEnv(t, nil, "root")
	manyLinks(t, e.abs("root/t"), 9999)
	p := mustPreview(t, e, "t", true)
	if p.CandidateCount != 10000 {
		t.Fatalf("candidates %d", p.CandidateCount)
	}
	os.WriteFile(e.abs("root/t/one-more"), nil, 0o644)
	if _, err := e.f.Preview("t", true); domain(err) != "preview_too_large" {
		t.Errorf("10,001: %v", err)
	}
}

// TestPreviewDepthLimit: entries 64 levels below the target pass, 65 fail.
func TestPreviewDepthLimit(t *testing.T) {
	e := newEnv(t, nil, "root")
	p := e.abs("root/t")
	for i := 0; i < 63; i++ {
		p += "/d"
	}
	os.MkdirAll(p, 0o755)
	os.WriteFile(p+"/f", nil, 0o644) // level 64
	r := mustPreview(t, e, "t", true)
	if r.CandidateCount != 65 {
		t.Errorf("candidates %d", r.CandidateCount)
	}
	os.Mkdir(p+"/e", 0o755)
	os.WriteFile(p+"/e/f", nil, 0o644) // level 65
	if _, err := e.f.Preview("t", true); domain(err) != "preview_too_large" {
		t.Errorf("65 levels: %v", err)
	}
	// Deleting the 64-level tree works (the descriptor budget suffices).
	os.RemoveAll(p + "/e")
	r = mustPreview(t, e, "t", true)
	if _, err := e.f.Delete("t", "t", r.ConfirmationToken); err != nil || e.exists("root/t") {
		t.Errorf("deep delete: %v", err)
	}
}

// TestPreviewByteLimit: candidate storage is len(relative path) + 64 per
// entry plus len(canonical target) + 64; exactly the budget passes, one
// byte less fails. The real 8 MiB budget is unreachable within 10,000
// entries of short names, so the test sets the walk's budget (the
// module's maxBytes) to the exact cost.
func TestPreviewByteLimit(t *testing.T) {
	e := newEnv(t, []node{{path: "root/t/ab", file: ""}, {path: "root/t/c/d", file: ""}}, "root")
	cost := int64(len(e.abs("root/t"))+64) + (2 + 64) + (1 + 64) + (3 + 64)
	defer func(b int64) { testWalkLimits.MaxBytes = b }(testWalkLimits.MaxBytes)
	testWalkLimits.MaxBytes = cost
	if _, err := e.f.Preview("t", true); err != nil {
		t.Errorf("at budget: %v", err)
	}
	testWalkLimits.MaxBytes = cost - 1
	if _, err := e.f.Preview("t", true); domain(err) != "preview_too_large" {
		t.Errorf("one past: %v", err)
	}
	if protocol.FSPreviewMaxBytes != 8<<20 || protocol.FSPreviewsMaxBytes != 16<<20 {
		t.Error("production byte budgets are not the spec's")
	}
}

// TestWalkLimitBounds: fs.walk's own bounds on the limits a module may
// ask for, each at its edge and one past.
func TestWalkLimitBounds(t *testing.T) {
	e := newEnv(t, []node{{path: "root/f", file: ""}}, "root")
	ok := contract.FSWalkArgs{Path: "f", MaxEntries: 1, MaxDepth: 0, MaxBytes: 1 << 20, EntryOverhead: 0}
	for _, c := range []struct {
		field string
		mut   func(a *contract.FSWalkArgs)
		bad   func(a *contract.FSWalkArgs)
	}{
		{"maxEntries", func(a *contract.FSWalkArgs) { a.MaxEntries = 100000 }, func(a *contract.FSWalkArgs) { a.MaxEntries = 100001 }},
		{"maxEntries", func(a *contract.FSWalkArgs) { a.MaxEntries = 1 }, func(a *contract.FSWalkArgs) { a.MaxEntries = 0 }},
		{"maxDepth", func(a *contract.FSWalkArgs) { a.MaxDepth = 256 }, func(a *contract.FSWalkArgs) { a.MaxDepth = 257 }},
		{"maxBytes", func(a *contract.FSWalkArgs) { a.MaxBytes = 64 << 20 }, func(a *contract.FSWalkArgs) { a.MaxBytes = 64<<20 + 1 }},
		{"entryOverhead", func(a *contract.FSWalkArgs) { a.EntryOverhead = 4096 }, func(a *contract.FSWalkArgs) { a.EntryOverhead = 4097 }},
	} {
		a := ok
		c.mut(&a)
		if _, err := e.f.Walk(a); err != nil {
			t.Errorf("%s at its bound: %v", c.field, err)
		}
		a = ok
		c.bad(&a)
		if _, err := e.f.Walk(a); err == nil || protocol.AsError(err).Details.Field != c.field {
			t.Errorf("%s past its bound: %v", c.field, err)
		}
	}
}

// TestDeadline: a request still running at the deadline returns
// filesystem_outcome_unknown with mutationMayHaveApplied for mutations.
// (That the fs module then forgets every preview token is
// plugins/fs TestDeadlineForgetsTokens.)
func TestDeadline(t *testing.T) {
	e := newEnv(t, []node{{path: "root/a", file: "1"}, {path: "root/b", file: "2"}}, "root")
	release := make(chan struct{})
	e.f.testHook = func(op string) {
		if op == "write" {
			<-release
		}
	}
	e.f.lim.deadline = time.Millisecond
	call := newCall()
	id := call.PutBlob([]byte("x"))
	_, perr := e.call("fs.write_at", map[string]any{"path": "new", "blob": id, "truncate": true, "expect": map[string]any{"absent": true}}, call)
	close(release)
	if perr == nil || perr.DomainCode() != "filesystem_outcome_unknown" || perr.Code != protocol.CodeTimeout ||
		perr.Details.MutationMayHaveApplied == nil || !*perr.Details.MutationMayHaveApplied || *perr.Details.RetrySafe {
		t.Fatalf("deadline: %+v", perr)
	}
	// A read that times out says nothing was mutated.
	e.f.lim.deadline = time.Millisecond
	release2 := make(chan struct{})
	e.f.testHook = func(op string) { <-release2 }
	_, perr = e.call("fs.open", map[string]any{"path": "a"}, nil)
	close(release2)
	if perr == nil || perr.DomainCode() != "filesystem_outcome_unknown" || *perr.Details.MutationMayHaveApplied {
		t.Errorf("read deadline: %+v", perr)
	}
	// A caller context already done runs nothing.
	e.f.testHook = nil
	e.f.lim.deadline = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, hc := range e.f.Table() {
		if hc.Name == "fs.mkdirs" {
			_, err := hc.Func(ctx, newCall(), []byte(`{"path":"never"}`))
			if domain(err) != "filesystem_outcome_unknown" || e.exists("root/never") {
				t.Errorf("cancelled ctx: %v", err)
			}
		}
	}
}

// TestDescriptorBudget: with every descriptor of the budget in use a
// request is filesystem_busy (retry-safe) and nothing leaks afterwards.
func TestDescriptorBudget(t *testing.T) {
	e := newEnv(t, []node{{path: "root/d/a", file: "1"}}, "root")
	e.f.fdsInUse.Store(e.f.lim.descriptors)
	_, err := e.f.Read("d/a", 0, 1, newCall().PutBlob)
	pe, _ := err.(*protocol.Error)
	if domain(err) != "filesystem_busy" || pe.Code != protocol.CodeUnavailable || !*pe.Details.RetrySafe {
		t.Fatalf("exhausted: %v", err)
	}
	e.f.fdsInUse.Store(e.f.lim.descriptors - 2) // d and a: exactly enough
	if _, err := e.f.Read("d/a", 0, 1, newCall().PutBlob); err != nil {
		t.Errorf("at the budget: %v", err)
	}
	e.f.fdsInUse.Store(0)
	for _, op := range []func(){
		func() { e.f.Read("d/a", 0, 1, newCall().PutBlob) },
		func() { e.f.List("d", true) },
		func() { e.f.Stat("d/a") },
		func() { p, _ := e.f.Preview("d", true); e.f.Delete("d", "d", p.ConfirmationToken) },
	} {
		op()
		if n := e.f.fdsInUse.Load(); n != 0 {
			t.Fatalf("descriptors leaked: %d", n)
		}
	}
	if protocol.FSMaxDescriptors != 128 || defaultLimits.descriptors != 128 {
		t.Error("descriptor budget is not the spec's 128")
	}
}

func TestCloseRefusesRequests(t *testing.T) {
	e := newEnv(t, []node{{path: "root/a", file: "1"}}, "root")
	e.f.Close()
	_, perr := e.call("fs.open", map[string]any{"path": "a"}, nil)
	if perr == nil || perr.DomainCode() != "filesystem_busy" {
		t.Errorf("after close: %v", perr)
	}
}

// manyLinks makes dir holding n names: hard links to one empty file
// (creating links is far cheaper than creating inodes, and each name is
// still one bound entry).
func manyLinks(t *testing.T, dir string, n int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	base := dir + "/0"
	if err := os.WriteFile(base, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; i++ {
		if err := os.Link(base, fmt.Sprintf("%s/%d", dir, i)); err != nil {
			t.Fatal(err)
		}
	}
}
