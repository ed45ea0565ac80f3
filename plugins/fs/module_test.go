//go:build !wasip1

// Tests and benchmarks of the fs module through the real host (wazero, the
// gate, blobs) with the real hostcalls/fs behind it.
package fs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"lemon/host"
	"lemon/host/hosttest"
	"lemon/hostcalls"
	hfs "lemon/hostcalls/fs"
	"lemon/hostcalls/store"
	"lemon/protocol"
)

func TestMain(m *testing.M) { hosttest.Main(m) }

type fixture struct {
	h    *host.Host
	fs   *hfs.FS
	root string // canonical allowed root and default cwd
}

func newFixture(t testing.TB) *fixture { return newFixtureWith(t, hfs.Config{}) }

// newFixtureWith is newFixture with cfg's Deadline and TestHook.
func newFixtureWith(t testing.TB, cfg hfs.Config) *fixture {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultCwd, cfg.Roots, cfg.Home = root, []string{root}, root
	f, err := hfs.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	// The module keeps its delete preview tokens in its store.
	st, err := store.New(store.Config{Path: filepath.Join(t.TempDir(), "store.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := hosttest.NewHost(t, host.Config{Ceiling: hostcalls.AllCapabilities, Tables: []hostcalls.Table{f.Table(), st.Table()}}, "fs", "plugins/fs")
	return &fixture{h: h, fs: f, root: root}
}

func (f *fixture) invoke(t testing.TB, method, args string) (json.RawMessage, *protocol.Error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return f.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "i1", NodeID: "n1", SessionGeneration: 1,
		Method: method, Args: json.RawMessage(args)})
}

// files creates n empty files dir/file-000000.txt ... under the root.
func (f *fixture) files(t testing.TB, dir string, n int) {
	t.Helper()
	d := filepath.Join(f.root, dir)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("file-%06d.txt", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkList500ThroughHost measures node.fs.list of a directory of 500
// files (every entry with its full stat fields and MIME type, ~100 KB of
// payload JSON) through the wasm module and the gate.
func BenchmarkList500ThroughHost(b *testing.B) {
	f := newFixture(b)
	f.files(b, "big", 500)
	args := `{"nodeId":"n1","path":"big"}`
	for b.Loop() {
		out, perr := f.invoke(b, "node.fs.list", args)
		if perr != nil || len(out) < 500*100 {
			b.Fatal(perr)
		}
	}
}

// BenchmarkDeletePreviewThroughHost measures node.fs.delete.preview of a
// directory of 500 files (recursive) through the wasm module and the gate.
func BenchmarkDeletePreviewThroughHost(b *testing.B) {
	f := newFixture(b)
	f.files(b, "big", 500)
	args := `{"nodeId":"n1","path":"big","recursive":true}`
	for b.Loop() {
		if _, perr := f.invoke(b, "node.fs.delete.preview", args); perr != nil {
			b.Fatal(perr)
		}
	}
}

// BenchmarkStatThroughHost measures node.fs.stat of one file through the
// wasm module and the gate: the fixed cost of a small invocation.
func BenchmarkStatThroughHost(b *testing.B) {
	f := newFixture(b)
	f.files(b, "big", 1)
	args := `{"nodeId":"n1","path":"big/file-000000.txt"}`
	for b.Loop() {
		if _, perr := f.invoke(b, "node.fs.stat", args); perr != nil {
			b.Fatal(perr)
		}
	}
}

// TestListThroughHost: node.fs.list answers exactly the natively shaped
// payload (odd and invalid UTF-8 names included), and invalid params stop
// in the module.
func TestListThroughHost(t *testing.T) {
	f := newFixture(t)
	f.files(t, "d", 3)
	for _, n := range []string{"<a>&b.HTML", "bad\xff.md", ".hidden.json"} {
		if err := os.WriteFile(filepath.Join(f.root, "d", n), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, hidden := range []bool{false, true} {
		out, perr := f.invoke(t, "node.fs.list", fmt.Sprintf(`{"nodeId":"n1","path":"d","showHidden":%v}`, hidden))
		if perr != nil {
			t.Fatal(perr)
		}
		want, err := nativeList(filepath.Join(f.root, "d"), hidden)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != string(want) {
			t.Fatalf("hidden=%v:\n got %s\nwant %s", hidden, out, want)
		}
		var r protocol.FSListResult
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		wantN := 5
		if hidden {
			wantN = 6
		}
		if len(r.Entries) != wantN || r.Entries[0].Mime != map[bool]string{false: "text/html", true: "application/json"}[hidden] {
			t.Fatalf("hidden=%v: entries %+v", hidden, r.Entries)
		}
	}
	for _, args := range []string{`{"nodeId":"n1"}`, `{"nodeId":"n1","path":"d","limit":5}`, `{"path":"d"}`} {
		if _, perr := f.invoke(t, "node.fs.list", args); perr == nil || perr.Code != protocol.CodeInvalidParams {
			t.Errorf("%s: %v", args, perr)
		}
	}
	if _, perr := f.invoke(t, "node.fs.list", `{"nodeId":"n1","path":"missing"}`); perr == nil || perr.DomainCode() != "not_found" {
		t.Errorf("missing: %v", perr)
	}
}

// TestDeletePreviewThroughHost: the host-built preview carries the stat's
// MIME type and a token node.fs.delete accepts.
func TestDeletePreviewThroughHost(t *testing.T) {
	f := newFixture(t)
	if err := os.WriteFile(filepath.Join(f.root, "report.PDF"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, perr := f.invoke(t, "node.fs.delete.preview", `{"nodeId":"n1","path":"report.PDF"}`)
	if perr != nil {
		t.Fatal(perr)
	}
	var r protocol.FSDeletePreviewResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	if r.Path != filepath.Join(f.root, "report.PDF") || r.Stat.Mime != "application/pdf" || r.Stat.Type != "regular" ||
		r.Stat.Size != 1 || r.CandidateCount != 1 || r.ConfirmationToken == "" {
		t.Fatalf("preview %s", out)
	}
	if again, _ := json.Marshal(r); string(again) != string(out) {
		t.Fatalf("shape differs from protocol.FSDeletePreviewResult:\n%s\n%s", out, again)
	}
	args, _ := json.Marshal(map[string]string{"nodeId": "n1", "path": "report.PDF", "confirm": "report.PDF", "confirmationToken": r.ConfirmationToken})
	if _, perr := f.invoke(t, "node.fs.delete", string(args)); perr != nil {
		t.Fatal(perr)
	}
	if _, err := os.Lstat(filepath.Join(f.root, "report.PDF")); !os.IsNotExist(err) {
		t.Fatal("not deleted")
	}
}

// TestStatThroughHost: node.fs.stat answers exactly the natively shaped
// payload, MIME type included, and refuses invalid params in the module.
func TestStatThroughHost(t *testing.T) {
	f := newFixture(t)
	if err := os.WriteFile(filepath.Join(f.root, "<a>&b.HTML"), []byte("xyz"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, perr := f.invoke(t, "node.fs.stat", `{"nodeId":"n1","path":"<a>&b.HTML"}`)
	if perr != nil {
		t.Fatal(perr)
	}
	want, err := nativeStat(filepath.Join(f.root, "<a>&b.HTML"))
	if err != nil {
		t.Fatal(err)
	}
	var st protocol.FSStat
	if string(out) != string(want) || json.Unmarshal(out, &st) != nil || st.Mime != "text/html" || st.Size != 3 ||
		st.Path != filepath.Join(f.root, "<a>&b.HTML") {
		t.Fatalf("stat = %s\nwant %s", out, want)
	}
	for _, args := range []string{`{"nodeId":"n1"}`, `{"nodeId":"n1","path":"a","showHidden":true}`} {
		if _, perr := f.invoke(t, "node.fs.stat", args); perr == nil || perr.Code != protocol.CodeInvalidParams {
			t.Errorf("%s: %v", args, perr)
		}
	}
}

// BenchmarkRead1MiBThroughHost measures node.fs.read of a 1 MiB chunk
// through the wasm module and the gate (bytes stay host-side; the host
// base64-encodes them into the payload).
func BenchmarkRead1MiBThroughHost(b *testing.B) {
	f := newFixture(b)
	data := make([]byte, 1<<20)
	if err := os.WriteFile(filepath.Join(f.root, "chunk.bin"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		out, perr := f.invoke(b, "node.fs.read", `{"nodeId":"n1","path":"chunk.bin"}`)
		if perr != nil || len(out) < 4<<20/3 {
			b.Fatal(perr)
		}
	}
}
