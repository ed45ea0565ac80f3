package fs

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"lemon/hostcalls/contract"
	"lemon/protocol"
)

func openH(t *testing.T, e *env, call *fakeCall, path string, noFollow bool) (contract.FSOpenResult, *protocol.Error) {
	t.Helper()
	out, perr := e.call("fs.open", map[string]any{"path": path, "noFollow": noFollow}, call)
	var r contract.FSOpenResult
	if perr == nil {
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
	}
	return r, perr
}

// TestOpenHandleBudget: an invocation holds at most 16 handles (the 16th
// open passes, the 17th is FORBIDDEN limit_exceeded); fs.close frees one;
// the end of the invocation closes every descriptor.
func TestOpenHandleBudget(t *testing.T) {
	e := newEnv(t, []node{{path: "root/a.txt", file: "a"}}, "root")
	call := newCall()
	base := e.f.fdsInUse.Load()
	var last uint32
	for i := 0; i < contract.FSMaxHandles; i++ {
		r, perr := openH(t, e, call, "a.txt", false)
		if perr != nil {
			t.Fatalf("open %d: %v", i+1, perr)
		}
		last = r.Handle
	}
	if got := e.f.fdsInUse.Load(); got != base+contract.FSMaxHandles {
		t.Fatalf("descriptors in use %d, want %d", got, base+contract.FSMaxHandles)
	}
	if _, perr := openH(t, e, call, "a.txt", false); perr == nil || perr.Code != protocol.CodeForbidden || perr.DomainCode() != protocol.DomainLimitExceeded {
		t.Fatalf("17th open: %+v", perr)
	}
	if _, perr := e.call("fs.close", map[string]any{"handle": last}, call); perr != nil {
		t.Fatal(perr)
	}
	if _, perr := e.call("fs.close", map[string]any{"handle": last}, call); perr == nil || perr.Code != protocol.CodeInvalidParams {
		t.Fatalf("second close: %+v", perr)
	}
	if _, perr := openH(t, e, call, "a.txt", false); perr != nil {
		t.Fatalf("open after close: %v", perr)
	}
	call.end()
	if got := e.f.fdsInUse.Load(); got != base {
		t.Fatalf("after the invocation %d descriptors in use, want %d", got, base)
	}
	// Another invocation does not see this one's handles.
	if _, perr := e.call("fs.pread", map[string]any{"handle": 1, "offset": 0, "length": 1}, nil); perr == nil || perr.Code != protocol.CodeInvalidParams {
		t.Fatalf("foreign handle: %+v", perr)
	}
}

// TestOpenConfinement: fs.open keeps the walker's guarantees (the shared
// case table of docs/FS.md): .. and symlinks out of the roots are
// path_not_allowed; a symlink inside resolves to its canonical target,
// or with noFollow is stat'ed itself with its target in link.
func TestOpenConfinement(t *testing.T) {
	e := newEnv(t, []node{{path: "root/d/a.md", file: "abc"}, {path: "root/in", symlink: "d/a.md"},
		{path: "root/out", symlink: "${TMP}/secret"}, {path: "secret", file: "s"}, {path: "root/abs", symlink: "/etc/passwd"}}, "root")
	for _, p := range []string{"../secret", "out", "abs", "d/../../secret", e.abs("secret")} {
		if _, perr := openH(t, e, nil, p, false); perr == nil || perr.DomainCode() != protocol.DomainPathNotAllowed {
			t.Errorf("%s: %+v", p, perr)
		}
	}
	r, perr := openH(t, e, nil, "in", false)
	if perr != nil || r.Path != e.abs("root/d/a.md") || r.Stat.Mode&0o170000 != 0o100000 || r.Stat.Size != 3 || !r.Stat.Readable || r.Link != "" {
		t.Fatalf("in: %+v %v", r, perr)
	}
	r, perr = openH(t, e, nil, "in", true)
	if perr != nil || r.Path != e.abs("root/in") || r.Stat.Mode&0o170000 != 0o120000 || r.Link != "d/a.md" {
		t.Fatalf("in noFollow: %+v %v", r, perr)
	}
	if _, perr := openH(t, e, nil, "missing", false); perr == nil || perr.DomainCode() != protocol.DomainNotFound {
		t.Fatalf("missing: %+v", perr)
	}
}

func statP(t *testing.T, e *env, call *fakeCall, path string, noFollow bool) (contract.FSStatResult, *protocol.Error) {
	t.Helper()
	out, perr := e.call("fs.stat", map[string]any{"path": path, "noFollow": noFollow}, call)
	var r contract.FSStatResult
	if perr == nil {
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
	}
	return r, perr
}

// TestStatPrimitive: fs.stat keeps fs.open's confinement and answers the
// same canonical path and stat (a file, a directory, the root itself, a
// symlink followed or not, a FIFO it must not open) without taking a
// handle or keeping a descriptor.
func TestStatPrimitive(t *testing.T) {
	e := newEnv(t, []node{{path: "root/d/a.md", file: "abc"}, {path: "root/in", symlink: "d/a.md"},
		{path: "root/out", symlink: "${TMP}/secret"}, {path: "secret", file: "s"}, {path: "root/abs", symlink: "/etc/passwd"},
		{path: "root/p", fifo: true}}, "root")
	for _, p := range []string{"../secret", "out", "abs", "d/../../secret", e.abs("secret")} {
		if _, perr := statP(t, e, nil, p, false); perr == nil || perr.DomainCode() != protocol.DomainPathNotAllowed {
			t.Errorf("%s: %+v", p, perr)
		}
	}
	if _, perr := statP(t, e, nil, "missing", false); perr == nil || perr.DomainCode() != protocol.DomainNotFound {
		t.Fatalf("missing: %+v", perr)
	}
	call := newCall()
	base := e.f.fdsInUse.Load()
	for _, c := range []struct {
		path     string
		noFollow bool
	}{{"d/a.md", false}, {"in", false}, {"in", true}, {"d", false}, {".", false}, {"p", false}} {
		s, perr := statP(t, e, call, c.path, c.noFollow)
		if perr != nil {
			t.Fatalf("stat %s: %v", c.path, perr)
		}
		o, perr := openH(t, e, call, c.path, c.noFollow)
		if perr != nil {
			t.Fatalf("open %s: %v", c.path, perr)
		}
		if s.Path != o.Path || s.Stat != o.Stat || s.Link != o.Link {
			t.Errorf("%s (noFollow %v): stat %+v, open %+v", c.path, c.noFollow, s, o)
		}
	}
	if s, _ := statP(t, e, call, "in", true); s.Path != e.abs("root/in") || s.Stat.Mode&0o170000 != 0o120000 || s.Link != "d/a.md" {
		t.Fatalf("in noFollow: %+v", s)
	}
	if s, _ := statP(t, e, call, "in", false); s.Path != e.abs("root/d/a.md") || s.Stat.Size != 3 || !s.Stat.Readable || !s.Stat.Writable {
		t.Fatalf("in: %+v", s)
	}
	if got := e.f.fdsInUse.Load(); got != base+6 {
		t.Fatalf("descriptors in use %d after 6 opens and 8 stats, want %d", got, base+6)
	}
	call.end()
}

// TestReadDirBatches: fs.readdir returns every name once across calls
// whatever maxBytes is (512 is the least; 511 and 1 MiB+1 are refused),
// then eof; statat gives each name's stat or error record in order.
func TestReadDirBatches(t *testing.T) {
	var tree []node
	for i := 0; i < 40; i++ {
		tree = append(tree, node{path: fmt.Sprintf("root/d/%02d%s", i, strings.Repeat("x", 60)), file: "1"})
	}
	e := newEnv(t, tree, "root")
	for _, max := range []int{511, contract.FSReadDirMaxBytes + 1} {
		call := newCall()
		r, _ := openH(t, e, call, "d", false)
		if _, perr := e.call("fs.readdir", map[string]any{"handle": r.Handle, "maxBytes": max}, call); perr == nil || perr.DomainCode() != "" || perr.Code != protocol.CodeInvalidParams {
			t.Errorf("maxBytes %d: %+v", max, perr)
		}
		call.end()
	}
	for _, max := range []int{512, 0, contract.FSReadDirMaxBytes} {
		call := newCall()
		r, _ := openH(t, e, call, "d", false)
		seen := map[string]int{}
		calls := 0
		for eof := false; !eof; calls++ {
			out, perr := e.call("fs.readdir", map[string]any{"handle": r.Handle, "maxBytes": max}, call)
			if perr != nil {
				t.Fatal(perr)
			}
			if len(out) > max && max != 0 {
				t.Fatalf("a %d-byte result for maxBytes %d", len(out), max)
			}
			var err error
			eof, err = contract.ParseFSReadDir(out, func(en contract.FSDirEntry) {
				seen[string(en.Name)]++
				if en.Type != 8 {
					t.Errorf("%s: d_type %d", en.Name, en.Type)
				}
			})
			if err != nil || calls > 100 {
				t.Fatal(err, calls)
			}
		}
		if len(seen) != 40 || (max == 512 && calls < 5) {
			t.Fatalf("maxBytes %d: %d names in %d calls", max, len(seen), calls)
		}
		for n, c := range seen {
			if c != 1 {
				t.Fatalf("%s seen %d times", n, c)
			}
		}
		call.end()
	}
	call := newCall()
	defer call.end()
	r, _ := openH(t, e, call, "d", false)
	names := []string{"00" + strings.Repeat("x", 60), "nope", "..", "a/b", "01" + strings.Repeat("x", 60)}
	out, perr := e.call("fs.statat", map[string]any{"handle": r.Handle, "names": names}, call)
	if perr != nil {
		t.Fatal(perr)
	}
	var got []string
	contract.ParseFSStatAt(out, func(st *contract.FSRawStat, code string) {
		if st != nil {
			got = append(got, fmt.Sprintf("size %d", st.Size))
		} else {
			got = append(got, code)
		}
	})
	if want := "[size 1 not_found invalid_path invalid_path size 1]"; fmt.Sprint(got) != want {
		t.Fatalf("statat = %v, want %s", got, want)
	}
	if _, perr := e.call("fs.statat", map[string]any{"handle": r.Handle, "names": make([]string, contract.FSStatAtMaxNames+1)}, call); perr == nil || perr.Code != protocol.CodeInvalidParams {
		t.Fatalf("1025 names: %+v", perr)
	}
	f, _ := openH(t, e, call, "d/00"+strings.Repeat("x", 60), false)
	if _, perr := e.call("fs.readdir", map[string]any{"handle": f.Handle}, call); perr == nil || perr.DomainCode() != protocol.DomainNotDirectory {
		t.Fatalf("readdir of a file: %+v", perr)
	}
}

// TestPRead: fs.pread reads a range of a regular-file handle into a blob,
// refuses a directory handle and out-of-range arguments, and caps a chunk
// by the result room as fs.read does.
func TestPRead(t *testing.T) {
	big := strings.Repeat("0123456789", 10000)
	e := newEnv(t, []node{{path: "root/a", file: "hello"}, {path: "root/big", file: big}, {path: "root/d", dir: true}}, "root")
	call := newCall()
	defer call.end()
	a, _ := openH(t, e, call, "a", false)
	out, perr := e.call("fs.pread", map[string]any{"handle": a.Handle, "offset": 1, "length": 3}, call)
	var r contract.FSPReadResult
	json.Unmarshal(out, &r)
	if b, _ := call.Blob(r.Blob); perr != nil || string(b) != "ell" || r.Length != 3 || r.Size != 5 || r.EOF {
		t.Fatalf("pread: %s %v", out, perr)
	}
	for _, c := range []struct {
		args   map[string]any
		field  string
		domain string
	}{
		{map[string]any{"handle": a.Handle, "offset": -1, "length": 1}, "offset", ""},
		{map[string]any{"handle": a.Handle, "offset": 0, "length": 0}, "length", ""},
		{map[string]any{"handle": a.Handle, "offset": 0, "length": protocol.FSMaxReadLength + 1}, "length", ""},
		{map[string]any{"handle": 99, "offset": 0, "length": 1}, "handle", ""},
	} {
		if _, perr := e.call("fs.pread", c.args, call); perr == nil || perr.Code != protocol.CodeInvalidParams || perr.Details.Field != c.field {
			t.Errorf("%v: %+v", c.args, perr)
		}
	}
	d, _ := openH(t, e, call, "d", false)
	if _, perr := e.call("fs.pread", map[string]any{"handle": d.Handle, "offset": 0, "length": 1}, call); perr == nil || perr.DomainCode() != protocol.DomainNotRegularFile {
		t.Fatalf("pread of a directory: %+v", perr)
	}
	call.maxResult = 65536 - 131
	b, _ := openH(t, e, call, "big", false)
	out, _ = e.call("fs.pread", map[string]any{"handle": b.Handle, "offset": 0, "length": protocol.FSMaxReadLength}, call)
	json.Unmarshal(out, &r)
	if want := ReadChunkFor(call.maxResult, e.abs("root/big")); r.Length != int64(want) || r.EOF {
		t.Fatalf("room-capped chunk %d, want %d", r.Length, want)
	}
}

// TestReadDirSmallest: fs.readdir with smallest reads the whole directory
// at once and returns its smallest names in byte order (flag bit 1 when
// names were left out: none at exactly as many names as smallest, set at
// one fewer), skipHidden leaves out dot names, stat appends each name's
// lstat record; smallest 0 to 1024 only, and not with maxBytes.
func TestReadDirSmallest(t *testing.T) {
	var tree []node
	var want []string
	for i := 0; i < 30; i++ {
		n := fmt.Sprintf("%02d", 29-i)
		tree = append(tree, node{path: "root/d/" + n, file: strings.Repeat("x", i)})
		want = append(want, n)
	}
	tree = append(tree, node{path: "root/d/.hidden", file: "h"}, node{path: "root/d/sub/x", file: "1"})
	want = append(want, "sub")
	slices.Sort(want)
	e := newEnv(t, tree, "root")
	list := func(args map[string]any) (names []string, sizes []int64, more bool) {
		call := newCall()
		defer call.end()
		r, _ := openH(t, e, call, "d", false)
		args["handle"] = r.Handle
		out, perr := e.call("fs.readdir", args, call)
		if perr != nil {
			t.Fatalf("%v: %+v", args, perr)
		}
		if args["stat"] == true {
			eof, m, err := contract.ParseFSReadDirStat(out, func(en contract.FSDirEntry, st *contract.FSRawStat, code string) {
				names = append(names, string(en.Name))
				if st == nil {
					t.Fatalf("%s: %s", en.Name, code)
				}
				sizes = append(sizes, st.Size)
			})
			if err != nil || !eof {
				t.Fatal(err, eof)
			}
			return names, sizes, m
		}
		eof, err := contract.ParseFSReadDir(out, func(en contract.FSDirEntry) { names = append(names, string(en.Name)) })
		if err != nil || !eof {
			t.Fatal(err, eof)
		}
		return names, nil, out[0]&2 != 0
	}
	all := len(want) // 31 visible names
	if got, _, more := list(map[string]any{"smallest": all, "skipHidden": true}); fmt.Sprint(got) != fmt.Sprint(want) || more {
		t.Fatalf("smallest %d: %v more=%v, want %v", all, got, more, want)
	}
	if got, _, more := list(map[string]any{"smallest": all - 1, "skipHidden": true}); fmt.Sprint(got) != fmt.Sprint(want[:all-1]) || !more {
		t.Fatalf("smallest %d: %v more=%v", all-1, got, more)
	}
	if got, _, more := list(map[string]any{"smallest": 1}); fmt.Sprint(got) != "[.hidden]" || !more {
		t.Fatalf("smallest 1 with hidden: %v more=%v", got, more)
	}
	got, sizes, _ := list(map[string]any{"smallest": 3, "skipHidden": true, "stat": true})
	if fmt.Sprint(got) != "[00 01 02]" || fmt.Sprint(sizes) != "[29 28 27]" {
		t.Fatalf("smallest 3 with stat: %v %v", got, sizes)
	}
	// Directory order with stat and skipHidden: every visible name once,
	// with its record, across 512-byte batches.
	call := newCall()
	r, _ := openH(t, e, call, "d", false)
	seen := 0
	for eof, calls := false, 0; !eof; calls++ {
		out, perr := e.call("fs.readdir", map[string]any{"handle": r.Handle, "maxBytes": 512, "skipHidden": true, "stat": true}, call)
		if perr != nil || len(out) > 512 || calls > 50 {
			t.Fatal(perr, len(out), calls)
		}
		var err error
		eof, _, err = contract.ParseFSReadDirStat(out, func(en contract.FSDirEntry, st *contract.FSRawStat, code string) {
			if en.Name[0] == '.' || st == nil {
				t.Errorf("%s: %v %s", en.Name, st, code)
			}
			seen++
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	call.end()
	if seen != all {
		t.Fatalf("%d names with stat, want %d", seen, all)
	}
	call = newCall()
	defer call.end()
	r, _ = openH(t, e, call, "d", false)
	for _, bad := range []map[string]any{
		{"handle": r.Handle, "smallest": contract.FSReadDirMaxSmallest + 1},
		{"handle": r.Handle, "smallest": -1},
		{"handle": r.Handle, "smallest": 5, "maxBytes": 4096},
	} {
		if _, perr := e.call("fs.readdir", bad, call); perr == nil || perr.Code != protocol.CodeInvalidParams {
			t.Errorf("%v: %+v", bad, perr)
		}
	}
	if _, perr := e.call("fs.readdir", map[string]any{"handle": r.Handle, "smallest": contract.FSReadDirMaxSmallest}, call); perr != nil {
		t.Errorf("smallest 1024: %+v", perr)
	}
}
