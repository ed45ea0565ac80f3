package fs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lemon/protocol"
)

func TestNewConfig(t *testing.T) {
	tmp := canonTemp(t)
	var dirs []string
	for i := 0; i < 65; i++ {
		d := filepath.Join(tmp, fmt.Sprintf("r%02d", i))
		os.Mkdir(d, 0o755)
		dirs = append(dirs, d)
	}
	os.WriteFile(filepath.Join(tmp, "file"), nil, 0o644)
	os.Symlink(dirs[0], filepath.Join(tmp, "alias"))
	cases := []struct {
		name  string
		roots []string
		ok    bool
	}{
		{"nil roots default to home", nil, true},
		{"explicit empty list refused", []string{}, false},
		{"64 roots", dirs[:64], true},
		{"65 roots refused", dirs[:65], false},
		{"missing root refused", []string{filepath.Join(tmp, "nope")}, false},
		{"file root refused", []string{filepath.Join(tmp, "file")}, false},
		{"relative root refused", []string{"r00"}, false},
		{"alias root kept once", []string{dirs[0], filepath.Join(tmp, "alias")}, true},
	}
	for _, c := range cases {
		f, err := New(Config{Roots: c.roots, Home: dirs[1], DefaultCwd: dirs[1]})
		if (err == nil) != c.ok {
			t.Errorf("%s: err=%v, want ok=%v", c.name, err, c.ok)
		}
		if err != nil && strings.Contains(err.Error(), tmp) {
			t.Errorf("%s: error leaks a path: %v", c.name, err)
		}
		if err == nil {
			switch c.name {
			case "nil roots default to home":
				if !reflect.DeepEqual(f.Roots(), []string{dirs[1]}) {
					t.Errorf("default roots %v", f.Roots())
				}
			case "alias root kept once":
				if len(f.Roots()) != 1 {
					t.Errorf("alias not deduplicated: %v", f.Roots())
				}
				// The configured alias spelling resolves too.
				os.WriteFile(filepath.Join(dirs[0], "x"), []byte("1"), 0o644)
				st, err := f.Stat(filepath.Join(tmp, "alias", "x"))
				if err != nil || st.Path != filepath.Join(dirs[0], "x") {
					t.Errorf("alias spelling: %v %v", st, err)
				}
			}
			f.Close()
		}
	}
}

func TestCwdOutsideRootsGrantsNothing(t *testing.T) {
	tmp := canonTemp(t)
	build(t, tmp, []node{{path: "root/a", file: "1"}, {path: "cwd/b", file: "2"}})
	f, err := New(Config{Roots: []string{tmp + "/root"}, DefaultCwd: tmp + "/cwd"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Stat("b"); domain(err) != "path_not_allowed" {
		t.Errorf("relative path in a cwd outside roots: %v", err)
	}
	if st, err := f.Stat(tmp + "/root/a"); err != nil || st.Size != 1 {
		t.Errorf("absolute path in root: %v %v", st, err)
	}
}

func TestStat(t *testing.T) {
	e := newEnv(t, []node{{path: "root/a.txt", file: "hello"}, {path: "root/d", dir: true}}, "root")
	st, err := e.f.Stat("a.txt")
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(e.abs("root/a.txt"))
	want := protocol.FSStat{Path: e.abs("root/a.txt"), Type: "regular", Size: 5, MtimeMs: fi.ModTime().UnixMilli(),
		Mode: uint32(unix.S_IFREG | 0o644), Readable: true, Writable: true}
	if *st != want {
		t.Errorf("stat = %+v, want %+v", *st, want)
	}
	// mtimeMs truncates nanoseconds.
	ts := time.Unix(1791936000, 123999999)
	os.Chtimes(e.abs("root/a.txt"), ts, ts)
	st, _ = e.f.Stat("a.txt")
	if st.MtimeMs != 1791936000123 {
		t.Errorf("mtimeMs = %d", st.MtimeMs)
	}
	st, _ = e.f.Stat("d")
	if st.Type != "directory" || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		t.Errorf("dir stat %+v", st)
	}
	// The root itself can be stat'ed and is reported canonically.
	st, err = e.f.Stat(e.abs("root"))
	if err != nil || st.Path != e.abs("root") || st.Type != "directory" {
		t.Errorf("root stat %+v %v", st, err)
	}
}

// TestAccessChecks: readable/writable come from faccessat, not mode bits.
// As root every file is readable, so a read-only bind of the check is the
// only way to see false; without privileges, mode 0 shows both false.
func TestAccessChecks(t *testing.T) {
	e := newEnv(t, []node{{path: "root/locked", file: "x"}}, "root")
	os.Chmod(e.abs("root/locked"), 0)
	st, err := e.f.Stat("locked")
	if err != nil {
		t.Fatal(err)
	}
	wantReadable := unix.Access(e.abs("root/locked"), unix.R_OK) == nil
	if st.Readable != wantReadable || st.Writable != (unix.Access(e.abs("root/locked"), unix.W_OK) == nil) {
		t.Errorf("access: %+v", st)
	}
	if os.Geteuid() != 0 && (st.Readable || st.Writable) {
		t.Errorf("mode 0 file reported accessible to a non-root worker")
	}
	if os.Geteuid() == 0 && !st.Readable {
		t.Errorf("root can read a mode 0 file; a mode-bit guess would say no")
	}
}

func TestList(t *testing.T) {
	e := newEnv(t, []node{
		{path: "root/d/b.txt", file: "bb"},
		{path: "root/d/a.txt", file: "a"},
		{path: "root/d/.hidden", file: "h"},
		{path: "root/d/sub", dir: true},
		{path: "root/d/ln", symlink: "/etc/passwd"},
		{path: "root/d/Z", file: ""},
	}, "root")
	r, err := e.f.List("d", false)
	if err != nil {
		t.Fatal(err)
	}
	var names, types []string
	for _, en := range r.Entries {
		names = append(names, en.Name)
		types = append(types, en.Type)
	}
	if !reflect.DeepEqual(names, []string{"Z", "a.txt", "b.txt", "ln", "sub"}) {
		t.Errorf("names %v", names)
	}
	if !reflect.DeepEqual(types, []string{"regular", "regular", "regular", "symlink", "directory"}) {
		t.Errorf("types %v", types)
	}
	if r.Limit != 500 || r.Truncated || r.Path != e.abs("root/d") {
		t.Errorf("list header %+v", r)
	}
	// The symlink entry discloses no target: its JSON has no target field
	// and its size is the link's own.
	b, _ := json.Marshal(r.Entries[3])
	if strings.Contains(string(b), "passwd") {
		t.Errorf("link target disclosed: %s", b)
	}
	if bytes.Contains(b, []byte(`"path"`)) {
		t.Errorf("entry has a path: %s", b)
	}
	r, _ = e.f.List("d", true)
	if len(r.Entries) != 6 || r.Entries[0].Name != ".hidden" {
		t.Errorf("showHidden: %+v", r.Entries)
	}
}

// TestListLimit: 500 visible entries are all returned untruncated; 501
// gives the first 500 by name and truncated; hidden names do not count.
func TestListLimit(t *testing.T) {
	for _, n := range []int{500, 501} {
		e := newEnv(t, nil, "root")
		os.Mkdir(e.abs("root/big"), 0o755)
		os.WriteFile(e.abs("root/base"), nil, 0o644)
		for i := 0; i < n; i++ {
			os.Link(e.abs("root/base"), e.abs(fmt.Sprintf("root/big/f%04d", n-1-i)))
			os.Link(e.abs("root/base"), e.abs(fmt.Sprintf("root/big/.h%04d", i)))
		}
		r, err := e.f.List("big", false)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Entries) != 500 || r.Truncated != (n > 500) {
			t.Errorf("n=%d: %d entries, truncated=%v", n, len(r.Entries), r.Truncated)
		}
		if r.Entries[0].Name != "f0000" || r.Entries[499].Name != "f0499" {
			t.Errorf("n=%d: not the first 500 sorted: %s..%s", n, r.Entries[0].Name, r.Entries[499].Name)
		}
	}
}

func TestRead(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), (1<<20)/16+1) // 1 MiB + 16
	e := newEnv(t, []node{{path: "root/note.txt", file: "Hello world"}, {path: "root/empty", file: ""}}, "root")
	os.WriteFile(e.abs("root/big"), big, 0o644)
	type want struct {
		data string
		n    int64
		eof  bool
		err  string
	}
	cases := []struct {
		path           string
		offset, length int64
		w              want
	}{
		{"note.txt", 0, 6, want{"Hello ", 6, false, ""}},
		{"note.txt", 6, 1048576, want{"world", 5, true, ""}},
		{"note.txt", 11, 1, want{"", 0, true, ""}},
		{"note.txt", 400, 1, want{"", 0, true, ""}},
		{"note.txt", protocol.FSMaxOffset, 1, want{"", 0, true, ""}},
		{"note.txt", protocol.FSMaxOffset + 1, 1, want{err: "invalid"}},
		{"note.txt", -1, 1, want{err: "invalid"}},
		{"note.txt", 0, 0, want{err: "invalid"}},
		{"note.txt", 0, 1048577, want{err: "invalid"}},
		{"empty", 0, 1, want{"", 0, true, ""}},
	}
	for _, c := range cases {
		call := newCall()
		r, err := e.f.Read(c.path, c.offset, c.length, call.PutBlob)
		if c.w.err != "" {
			if pe, ok := err.(*protocol.Error); !ok || pe.Code != protocol.CodeInvalidParams {
				t.Errorf("%s@%d+%d: got %v, want INVALID_PARAMS", c.path, c.offset, c.length, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s@%d: %v", c.path, c.offset, err)
		}
		got, _ := call.Blob(r.Blob)
		if string(got) != c.w.data || r.Length != c.w.n || r.EOF != c.w.eof || r.Offset != c.offset {
			t.Errorf("%s@%d+%d: %q %+v", c.path, c.offset, c.length, got, *r)
		}
	}
	// Length at the 1 MiB limit returns exactly 1 MiB of a larger file.
	call := newCall()
	r, err := e.f.Read("big", 0, 1048576, call.PutBlob)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := call.Blob(r.Blob)
	if r.Length != 1048576 || !bytes.Equal(got, big[:1048576]) || r.EOF || r.Size != int64(len(big)) {
		t.Errorf("1 MiB read: length %d eof %v size %d", r.Length, r.EOF, r.Size)
	}
	// MaxReadChunk shortens chunks (short chunks are allowed).
	e.f.maxRead = 1000
	r, _ = e.f.Read("big", 0, 1048576, newCall().PutBlob)
	if r.Length != 1000 || r.EOF {
		t.Errorf("short chunk: %+v", *r)
	}
}

func TestReadThroughTable(t *testing.T) {
	e := newEnv(t, []node{{path: "root/a.txt", file: "hello"}}, "root")
	call := newCall()
	out, perr := e.call("fs.read", map[string]any{"path": "a.txt", "offset": 1, "length": 3}, call)
	if perr != nil {
		t.Fatal(perr)
	}
	var r protocol.FSReadCall
	json.Unmarshal(out, &r)
	b, _ := call.Blob(r.Blob)
	if string(b) != "ell" || r.Path != e.abs("root/a.txt") || r.Size != 5 || r.EOF {
		t.Errorf("%s / %q", out, b)
	}
	if strings.Contains(string(out), "ell") {
		t.Errorf("file bytes in host-call JSON: %s", out)
	}
	// Strict args: unknown fields are refused.
	if _, perr := e.call("fs.read", map[string]any{"path": "a.txt", "offset": 0, "length": 1, "x": 1}, nil); perr == nil || perr.Code != protocol.CodeInvalidParams {
		t.Errorf("unknown field accepted: %v", perr)
	}
}

func write(e *env, path string, data string, exp *int64, mut func(*protocol.FSWriteCall)) (*protocol.FSWriteResult, error) {
	a := protocol.FSWriteCall{Path: path, Truncate: true, ExpectedModifiedAtMs: exp}
	if mut != nil {
		mut(&a)
	}
	return e.f.Write(a, []byte(data))
}

func TestWriteChunksAndTruncate(t *testing.T) {
	e := newEnv(t, nil, "root")
	// Spec example: "Hello " then "world" at 6, carrying mtimeMs.
	r1, err := write(e, "results/note.txt", "Hello ", ptr(int64(0)), func(a *protocol.FSWriteCall) { a.Mkdirs = true })
	if err != nil {
		t.Fatal(err)
	}
	if r1.BytesWritten != 6 || r1.Size != 6 || r1.Offset != 0 || r1.Path != e.abs("root/results/note.txt") {
		t.Errorf("first chunk %+v", r1)
	}
	r2, err := write(e, "results/note.txt", "world", &r1.MtimeMs, func(a *protocol.FSWriteCall) { a.Offset = 6 })
	if err != nil {
		t.Fatal(err)
	}
	if e.content("root/results/note.txt") != "Hello world" || r2.Size != 11 || r2.MtimeMs <= r1.MtimeMs {
		t.Errorf("second chunk %+v %q", r2, e.content("root/results/note.txt"))
	}
	// Reusing the previous revision is a conflict and writes nothing.
	if _, err := write(e, "results/note.txt", "XX", &r1.MtimeMs, nil); domain(err) != "revision_conflict" {
		t.Errorf("stale revision: %v", err)
	}
	if e.content("root/results/note.txt") != "Hello world" {
		t.Error("conflicting write changed the file")
	}
	// truncate:false keeps the suffix; truncate:true cuts at offset+n but
	// keeps the prefix.
	r3, err := write(e, "results/note.txt", "J", &r2.MtimeMs, func(a *protocol.FSWriteCall) { a.Truncate = false })
	if err != nil || e.content("root/results/note.txt") != "Jello world" {
		t.Fatalf("truncate:false: %v %q", err, e.content("root/results/note.txt"))
	}
	r4, err := write(e, "results/note.txt", "W", &r3.MtimeMs, func(a *protocol.FSWriteCall) { a.Offset = 6 })
	if err != nil || e.content("root/results/note.txt") != "Jello W" || r4.Size != 7 {
		t.Fatalf("truncate:true: %v %q", err, e.content("root/results/note.txt"))
	}
	// Empty data is allowed and still advances the revision.
	r5, err := write(e, "results/note.txt", "", &r4.MtimeMs, func(a *protocol.FSWriteCall) { a.Offset = 2 })
	if err != nil || e.content("root/results/note.txt") != "Je" || r5.MtimeMs <= r4.MtimeMs || r5.BytesWritten != 0 {
		t.Fatalf("empty write: %v %+v %q", err, r5, e.content("root/results/note.txt"))
	}
	// Without mkdirs, parents must exist.
	if _, err := write(e, "nope/x", "1", nil, nil); domain(err) != "not_found" || e.exists("root/nope") {
		t.Errorf("missing parent: %v", err)
	}
}

func TestWriteRevisionRules(t *testing.T) {
	e := newEnv(t, []node{{path: "root/a", file: "aaa"}, {path: "root/alias", symlink: "a"}}, "root")
	m := e.mtime("root/a")
	cases := []struct {
		name string
		path string
		exp  *int64
		want string
	}{
		{"existing without revision", "a", nil, "revision_conflict"},
		{"existing with 0", "a", ptr(int64(0)), "revision_conflict"},
		{"existing with wrong revision", "a", ptr(m + 1), "revision_conflict"},
		{"missing with a revision", "missing", ptr(m), "revision_conflict"},
		{"missing without revision", "new1", nil, ""},
		{"missing with 0", "new2", ptr(int64(0)), ""},
		{"alias with revision", "alias", ptr(m), ""},
	}
	for _, c := range cases {
		_, err := write(e, c.path, "Z", c.exp, nil)
		if domain(err) != c.want {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
	if e.content("root/a") != "Z" || e.content("root/new1") != "Z" || e.exists("root/missing") {
		t.Errorf("effects wrong: a=%q", e.content("root/a"))
	}
	if fi, _ := os.Lstat(e.abs("root/alias")); fi.Mode()&os.ModeSymlink == 0 {
		t.Error("alias write replaced the symlink")
	}
}

// TestWriteSizeBoundary: 1 MiB decoded passes; one byte more is refused
// before any parent directory is created.
func TestWriteSizeBoundary(t *testing.T) {
	e := newEnv(t, nil, "root")
	data := bytes.Repeat([]byte{'x'}, protocol.FSMaxWriteBytes)
	r, err := e.f.Write(protocol.FSWriteCall{Path: "p/ok", Mkdirs: true, Truncate: true}, data)
	if err != nil || r.BytesWritten != 1048576 {
		t.Fatalf("1 MiB: %v", err)
	}
	_, err = e.f.Write(protocol.FSWriteCall{Path: "q/big", Mkdirs: true, Truncate: true}, append(data, 'x'))
	if pe, ok := err.(*protocol.Error); !ok || pe.Code != protocol.CodeInvalidParams {
		t.Errorf("1 MiB + 1: %v", err)
	}
	if e.exists("root/q") {
		t.Error("oversized write created its parent")
	}
	// The same through the table, with a blob.
	call := newCall()
	id := call.PutBlob(append(data, 'x'))
	if _, perr := e.call("fs.write_at", map[string]any{"path": "q2/big", "blob": id, "mkdirs": true, "truncate": true}, call); perr == nil || perr.Details.Field != "blob" || e.exists("root/q2") {
		t.Errorf("table oversized: %v", perr)
	}
	// Offsets: 2^53-1 is accepted (a sparse write far out would need that
	// much disk, so use empty data), 2^53 is not.
	if _, err := e.f.Write(protocol.FSWriteCall{Path: "sparse", Offset: protocol.FSMaxOffset, Truncate: false}, nil); err != nil && domain(err) != "filesystem_error" {
		t.Errorf("max offset: %v", err)
	}
	if _, err := e.f.Write(protocol.FSWriteCall{Path: "sparse2", Offset: protocol.FSMaxOffset + 1}, nil); err == nil || e.exists("root/sparse2") {
		t.Errorf("offset 2^53 accepted")
	}
}

// TestWriteAdvancesMtimeWithinOneTick freezes the file's mtime in the
// future so the clock cannot advance it; every write must still return a
// strictly larger mtimeMs.
func TestWriteAdvancesMtimeWithinOneTick(t *testing.T) {
	e := newEnv(t, []node{{path: "root/a", file: "x"}}, "root")
	future := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	os.Chtimes(e.abs("root/a"), future, future)
	rev := future.UnixMilli()
	for i := 0; i < 5; i++ {
		r, err := write(e, "a", "y", &rev, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.MtimeMs != rev+1 {
			t.Fatalf("write %d: mtimeMs %d, want %d", i, r.MtimeMs, rev+1)
		}
		if e.mtime("root/a") != r.MtimeMs {
			t.Fatalf("reported mtime differs from the file's")
		}
		rev = r.MtimeMs
	}
}

// TestWriteSerializedAcrossAliases races many writers, half through a
// symlink alias, each carrying the revision it last observed. CAS must let
// exactly one writer win per revision: the count of successes equals the
// number of distinct revisions, and the final content is one whole write.
func TestWriteSerializedAcrossAliases(t *testing.T) {
	e := newEnv(t, []node{{path: "root/a", file: "init"}, {path: "root/alias", symlink: "a"}}, "root")
	start := e.mtime("root/a")
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := map[int64]int{}
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			path := "a"
			if w%2 == 1 {
				path = "alias"
			}
			rev := start
			for i := 0; i < 30; i++ {
				r, err := write(e, path, fmt.Sprintf("writer-%d-%02d", w, i), &rev, nil)
				if err == nil {
					mu.Lock()
					wins[rev]++
					mu.Unlock()
					rev = r.MtimeMs
					continue
				}
				if domain(err) != "revision_conflict" {
					t.Errorf("unexpected %v", err)
					return
				}
				st, err := e.f.Stat(path)
				if err != nil {
					t.Error(err)
					return
				}
				rev = st.MtimeMs
			}
		}(w)
	}
	wg.Wait()
	for rev, n := range wins {
		if n != 1 {
			t.Errorf("revision %d was written %d times", rev, n)
		}
	}
	if got := e.content("root/a"); !strings.HasPrefix(got, "writer-") || len(got) != len("writer-0-00") {
		t.Errorf("final content %q", got)
	}
}

func TestMkdir(t *testing.T) {
	e := newEnv(t, []node{{path: "root/f", file: ""}}, "root")
	for i := 0; i < 2; i++ { // idempotent
		r, err := e.f.Mkdir("x/y/z")
		if err != nil || !r.Created || r.Path != e.abs("root/x/y/z") {
			t.Fatalf("mkdir %d: %+v %v", i, r, err)
		}
	}
	if fi, err := os.Stat(e.abs("root/x/y/z")); err != nil || !fi.IsDir() {
		t.Error("not created")
	}
	if _, err := e.f.Mkdir("f"); domain(err) != "already_exists" {
		t.Errorf("mkdir over a file: %v", err)
	}
	if _, err := e.f.Mkdir("f/sub"); domain(err) != "not_directory" {
		t.Errorf("mkdir under a file: %v", err)
	}
	if r, err := e.f.Mkdir(e.abs("root")); err != nil || r.Path != e.abs("root") {
		t.Errorf("mkdir of the root: %v", err)
	}
}

func TestMove(t *testing.T) {
	tree := []node{
		{path: "root/a", file: "A"}, {path: "root/b", file: "B"}, {path: "root/d/x", file: "X"},
		{path: "root/empty", dir: true}, {path: "other/o", file: "O"}, {path: "root/la", symlink: "a"},
	}
	type tc struct {
		name, src, dst string
		exp            func(e *env) int64
		overwrite      bool
		want           string
		check          func(e *env) bool
	}
	mt := func(rel string) func(e *env) int64 { return func(e *env) int64 { return e.mtime(rel) } }
	cases := []tc{
		{"simple", "a", "c", mt("root/a"), false, "", func(e *env) bool { return e.content("root/c") == "A" && !e.exists("root/a") }},
		{"no overwrite", "a", "b", mt("root/a"), false, "already_exists", func(e *env) bool { return e.content("root/b") == "B" && e.content("root/a") == "A" }},
		{"overwrite", "a", "b", mt("root/a"), true, "", func(e *env) bool { return e.content("root/b") == "A" && !e.exists("root/a") }},
		{"wrong revision", "a", "c", func(e *env) int64 { return e.mtime("root/a") - 1 }, false, "revision_conflict", func(e *env) bool { return e.content("root/a") == "A" && !e.exists("root/c") }},
		{"dir", "d", "d2", mt("root/d"), false, "", func(e *env) bool { return e.content("root/d2/x") == "X" }},
		{"into itself", "d", "d/sub", mt("root/d"), false, "INVALID_PARAMS", func(e *env) bool { return e.exists("root/d/x") }},
		{"onto itself", "a", "a", mt("root/a"), false, "already_exists", func(e *env) bool { return e.content("root/a") == "A" }},
		{"across roots", "a", "../other/x", mt("root/a"), false, "path_not_allowed", nil},
		{"across roots absolute", "a", "${TMP}/other/a", mt("root/a"), false, "", func(e *env) bool { return e.content("other/a") == "A" }},
		{"missing source", "zz", "c", func(*env) int64 { return 1 }, false, "not_found", nil},
		{"missing dest parent", "a", "no/c", mt("root/a"), false, "not_found", func(e *env) bool { return e.exists("root/a") }},
		{"dir over file", "d", "b", mt("root/d"), true, "already_exists", func(e *env) bool { return e.content("root/b") == "B" }},
		{"file over empty dir", "a", "empty", mt("root/a"), true, "already_exists", func(e *env) bool { return e.exists("root/a") }},
		{"root as source", "${TMP}/root", "x", mt("root"), false, "path_not_allowed", nil},
		{"root as destination", "a", "${TMP}/other", mt("root/a"), true, "path_not_allowed", func(e *env) bool { return e.content("other/o") == "O" }},
		{"symlink source moves target", "la", "c", mt("root/a"), false, "", func(e *env) bool { return e.content("root/c") == "A" && !e.exists("root/a") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, tree, "root", "other")
			_, err := e.f.Move(expand(c.src, e.tmp), expand(c.dst, e.tmp), c.exp(e), c.overwrite)
			got := domain(err)
			if c.want == "INVALID_PARAMS" {
				if pe, ok := err.(*protocol.Error); ok && pe.Code == protocol.CodeInvalidParams {
					got = c.want
				}
			}
			if got != c.want {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if c.check != nil && !c.check(e) {
				t.Error("effects wrong")
			}
			for _, n := range e.dirNames("root") {
				if strings.HasPrefix(n, ".lemon-") {
					t.Errorf("capture entry left behind: %s", n)
				}
			}
		})
	}
}

// TestRenameComparesInTable: fs.rename through the table compares expect
// on the captured source and refuses an existing destination with
// noReplace; both are precondition_failed naming the expectation.
func TestRenameComparesInTable(t *testing.T) {
	e := newEnv(t, []node{{path: "root/a", file: "A"}, {path: "root/b", file: "B"}}, "root")
	mt := e.mtime("root/a")
	_, perr := e.call("fs.rename", map[string]any{"path": "a", "destination": "c", "expect": mtimeExpect(mt - 1)}, nil)
	if perr == nil || perr.Code != protocol.CodeConflict || perr.DomainCode() != "precondition_failed" || perr.Details.Field != "mtime" || !e.exists("root/a") {
		t.Errorf("stale mtime: %v", perr)
	}
	_, perr = e.call("fs.rename", map[string]any{"path": "a", "destination": "b", "noReplace": true, "expect": mtimeExpect(mt)}, nil)
	if perr == nil || perr.DomainCode() != "precondition_failed" || perr.Details.Field != "destination" || e.content("root/b") != "B" {
		t.Errorf("existing destination: %v", perr)
	}
	if _, perr = e.call("fs.rename", map[string]any{"path": "a", "destination": "c", "noReplace": true, "expect": mtimeExpect(mt)}, nil); perr != nil || e.content("root/c") != "A" {
		t.Errorf("rename: %v", perr)
	}
}

// TestMoveAncestorOfRootRefused: moving a directory that contains another
// allowed root would move that root.
func TestMoveAncestorOfRootRefused(t *testing.T) {
	e := newEnv(t, []node{{path: "top/inner/x", file: "1"}}, "top", "top/inner")
	if _, err := e.f.Move("inner", "moved", e.mtime("top/inner"), false); domain(err) != "path_not_allowed" {
		t.Errorf("moving a nested root: %v", err)
	}
}

func TestMoveOrDeleteAncestorOfNestedRootRefused(t *testing.T) {
	e := newEnv(t, []node{{path: "top/a/b/x", file: "1"}}, "top", "top/a/b")
	if _, err := e.f.Move("a", "moved", e.mtime("top/a"), false); domain(err) != "path_not_allowed" {
		t.Errorf("moving an ancestor of a root: %v", err)
	}
	if _, err := e.f.Preview("a", true); domain(err) != "path_not_allowed" {
		t.Errorf("previewing an ancestor of a root: %v", err)
	}
}

func TestOpenDir(t *testing.T) {
	e := newEnv(t, []node{{path: "root/d/x", file: "1"}, {path: "root/out", symlink: "/"}}, "root")
	fd, canon, err := e.f.OpenDir("d")
	if err != nil || canon != e.abs("root/d") {
		t.Fatalf("OpenDir: %v %q", err, canon)
	}
	var st unix.Stat_t
	unix.Fstatat(fd, "x", &st, unix.AT_SYMLINK_NOFOLLOW)
	unix.Close(fd)
	if st.Size != 1 || e.f.fdsInUse.Load() != 0 {
		t.Errorf("descriptor wrong or budget leaked: %d", e.f.fdsInUse.Load())
	}
	for p, want := range map[string]string{"out": "path_not_allowed", "d/x": "not_directory", "nope": "not_found", "../d": "path_not_allowed"} {
		if _, _, err := e.f.OpenDir(p); domain(err) != want {
			t.Errorf("%s: %v, want %s", p, err, want)
		}
	}
}
