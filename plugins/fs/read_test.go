//go:build !wasip1

package fs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"lemon/plugins/fs/shape"
	"lemon/protocol"
)

// fixUTF8 is each invalid UTF-8 byte of s replaced by U+FFFD, as the
// spec's payloads show such names.
func fixUTF8(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func typeName(m uint32) string { return shape.TypeName(m) }

func access(dir int, name string, mode uint32) bool {
	return unix.Faccessat2(dir, name, mode, unix.AT_EACCESS|unix.AT_SYMLINK_NOFOLLOW) == nil
}

// nativeList is node.fs.list done in plain Go: read every name, keep the
// visible ones in byte order, the first 500, lstat each, add the MIME
// type, and encode with encoding/json. It is the reference of the
// module's bytes and the native side of BenchmarkRatioList500.
func nativeList(dir string, showHidden bool) ([]byte, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	all, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	names := all[:0]
	for _, n := range all {
		if showHidden || n[0] != '.' {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	r := protocol.FSListResult{Path: fixUTF8(dir), Entries: []protocol.FSListEntry{}, Limit: 500}
	if len(names) > 500 {
		names, r.Truncated = names[:500], true
	}
	fd := int(d.Fd())
	for _, n := range names {
		if !utf8.ValidString(n) {
			r.Entries = append(r.Entries, protocol.FSListEntry{Name: fixUTF8(n), Error: protocol.DomainInvalidPath})
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			r.Entries = append(r.Entries, protocol.FSListEntry{Name: n, Error: protocol.DomainNotFound})
			continue
		}
		r.Entries = append(r.Entries, protocol.FSListEntry{Name: n, FSEntryStat: &protocol.FSEntryStat{
			Type: typeName(st.Mode), Size: st.Size, MtimeMs: st.Mtim.Sec*1000 + st.Mtim.Nsec/1e6, Mode: st.Mode,
			Mime: shape.MIME(n), Readable: access(fd, n, unix.R_OK), Writable: access(fd, n, unix.W_OK)}})
	}
	return json.Marshal(r)
}

// nativeStat is node.fs.stat in plain Go (path canonical).
func nativeStat(path string) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, err
	}
	dir, name := filepath.Split(path)
	d, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(d)
	return json.Marshal(protocol.FSStat{Path: fixUTF8(path), Type: typeName(st.Mode), Size: st.Size,
		MtimeMs: st.Mtim.Sec*1000 + st.Mtim.Nsec/1e6, Mode: st.Mode, Mime: shape.MIME(fixUTF8(path)),
		Readable: access(d, name, unix.R_OK), Writable: access(d, name, unix.W_OK)})
}

// oddNames are file names whose JSON encoding is not the identity.
var oddNames = []string{
	"plain.txt", "UPPER.PNG", "<a>&b.html", `q"b\s.json`, "ctl\x01\x1f\b\f\t.go", "ls\u2028ps\u2029.md",
	"bad\xff\xfe.txt", "cut\xc3.md", "mixed\xe2\x82.x\xffy.csv", "emoji-\U0001F600.csv", ".hidden.yml",
	"noext", "trail.", ".dotonly", "Tab.TXT",
}

// TestListOddNamesThroughHost: node.fs.list through the module is byte
// for byte the natively shaped payload for names JSON must escape or
// cannot hold (moved from hostcalls/fs TestPayloadMatchesModuleShaping and
// TestListPayloadValues), in a directory with a subdirectory, a symlink
// and a FIFO.
func TestListOddNamesThroughHost(t *testing.T) {
	f := newFixture(t)
	d := filepath.Join(f.root, "d")
	os.MkdirAll(filepath.Join(d, "sub"), 0o755)
	os.Symlink("plain.txt", filepath.Join(d, "ln"))
	unix.Mkfifo(filepath.Join(d, "pipe"), 0o644)
	for _, n := range oddNames {
		if err := os.WriteFile(filepath.Join(d, n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, hidden := range []bool{false, true} {
		out, perr := f.invoke(t, "node.fs.list", fmt.Sprintf(`{"nodeId":"n1","path":"d","showHidden":%v}`, hidden))
		if perr != nil {
			t.Fatal(perr)
		}
		want, err := nativeList(d, hidden)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, want) {
			t.Fatalf("hidden=%v:\n got %s\nwant %s", hidden, out, want)
		}
	}
	out, _ := f.invoke(t, "node.fs.list", `{"nodeId":"n1","path":"d"}`)
	var r protocol.FSListResult
	json.Unmarshal(out, &r)
	mime, invalid := map[string]string{}, []string{}
	for _, e := range r.Entries {
		if e.FSEntryStat == nil {
			invalid = append(invalid, e.Name+":"+e.Error)
			continue
		}
		mime[e.Name] = e.Mime
	}
	if mime["UPPER.PNG"] != "image/png" || mime["<a>&b.html"] != "text/html" || mime["noext"] != "application/octet-stream" ||
		mime["sub"] != "application/octet-stream" || mime["Tab.TXT"] != "text/plain" || len(mime) != 13 {
		t.Errorf("mime by name %v", mime)
	}
	wantInvalid := []string{"bad\uFFFD\uFFFD.txt:invalid_path", "cut\uFFFD.md:invalid_path", "mixed\uFFFD\uFFFD.x\uFFFDy.csv:invalid_path"}
	if fmt.Sprint(invalid) != fmt.Sprint(wantInvalid) {
		t.Errorf("invalid names %q", invalid)
	}
	if !bytes.Contains(out, []byte(`"name":"\u003ca\u003e\u0026b.html"`)) || bytes.Contains(out, []byte{0xff}) {
		t.Errorf("encoding: %s", out)
	}
	// A path through a symlink whose target is not UTF-8 lists under its
	// canonical path, shown with U+FFFD.
	os.MkdirAll(filepath.Join(f.root, "b\xffad"), 0o755)
	os.WriteFile(filepath.Join(f.root, "b\xffad", "x.TXT"), []byte("x"), 0o644)
	os.Symlink("b\xffad", filepath.Join(f.root, "alias"))
	for _, p := range []string{"alias", "alias/x.TXT"} {
		method, native := "node.fs.list", func() ([]byte, error) { return nativeList(filepath.Join(f.root, "b\xffad"), false) }
		if p != "alias" {
			method, native = "node.fs.stat", func() ([]byte, error) { return nativeStat(filepath.Join(f.root, "b\xffad", "x.TXT")) }
		}
		out, perr := f.invoke(t, method, fmt.Sprintf(`{"nodeId":"n1","path":%q}`, p))
		want, err := native()
		if perr != nil || err != nil || !bytes.Equal(out, want) {
			t.Errorf("%s %s: %v %v\n got %s\nwant %s", method, p, perr, err, out, want)
		}
	}
}

// TestListLimitThroughHost: 500 visible entries pass untruncated, 501
// give the first 500 in byte order and truncated:true (moved from
// hostcalls/fs TestListPayloadLimit); hidden names do not count.
func TestListLimitThroughHost(t *testing.T) {
	for _, n := range []int{500, 501} {
		f := newFixture(t)
		f.files(t, "big", n)
		os.WriteFile(filepath.Join(f.root, "big", ".zz"), nil, 0o644)
		out, perr := f.invoke(t, "node.fs.list", `{"nodeId":"n1","path":"big"}`)
		if perr != nil {
			t.Fatal(perr)
		}
		var r protocol.FSListResult
		json.Unmarshal(out, &r)
		if len(r.Entries) != 500 || r.Truncated != (n > 500) || r.Entries[499].Name != "file-000499.txt" ||
			r.Entries[499].Mime != "text/plain" || r.Limit != 500 {
			t.Errorf("n=%d: %d entries, truncated=%v", n, len(r.Entries), r.Truncated)
		}
		if want, _ := nativeList(filepath.Join(f.root, "big"), false); !bytes.Equal(out, want) {
			t.Errorf("n=%d: differs from the native listing", n)
		}
	}
}

// TestListManyBatchesThroughHost: a directory whose names take several
// fs.readdir batches (3,000 names of 200 bytes, ~600 KB) lists the 500
// smallest exactly.
func TestListManyBatchesThroughHost(t *testing.T) {
	f := newFixture(t)
	d := filepath.Join(f.root, "many")
	os.MkdirAll(d, 0o755)
	for i := 2999; i >= 0; i-- {
		os.WriteFile(filepath.Join(d, fmt.Sprintf("%04d%s", i, strings.Repeat("n", 196))), nil, 0o644)
	}
	out, perr := f.invoke(t, "node.fs.list", `{"nodeId":"n1","path":"many"}`)
	want, _ := nativeList(d, false)
	if perr != nil || !bytes.Equal(out, want) {
		t.Fatalf("%v: module and native listings differ (%d vs %d bytes)", perr, len(out), len(want))
	}
}

// TestReadErrorsThroughHost: node.fs.read of a directory, a FIFO and a
// missing path answer the fs errors; a read past EOF is an empty chunk.
func TestReadErrorsThroughHost(t *testing.T) {
	f := newFixture(t)
	os.Mkdir(filepath.Join(f.root, "dir"), 0o755)
	unix.Mkfifo(filepath.Join(f.root, "pipe"), 0o644)
	os.WriteFile(filepath.Join(f.root, "a.md"), []byte("hello"), 0o644)
	for p, want := range map[string]string{"dir": "not_regular_file", "pipe": "not_regular_file", "missing": "not_found", "../x": "path_not_allowed"} {
		if _, perr := f.invoke(t, "node.fs.read", fmt.Sprintf(`{"nodeId":"n1","path":%q}`, p)); perr == nil || perr.DomainCode() != want {
			t.Errorf("%s: %v, want %s", p, perr, want)
		}
	}
	out, perr := f.invoke(t, "node.fs.read", `{"nodeId":"n1","path":"a.md","offset":1,"length":3}`)
	want := fmt.Sprintf(`{"path":%q,"offset":1,"length":3,"size":5,"mime":"text/markdown","eof":false,"dataBase64":"ZWxs"}`, filepath.Join(f.root, "a.md"))
	if perr != nil || string(out) != want {
		t.Fatalf("read: %v\n got %s\nwant %s", perr, out, want)
	}
	out, _ = f.invoke(t, "node.fs.read", `{"nodeId":"n1","path":"a.md","offset":9}`)
	if !bytes.Contains(out, []byte(`"length":0,"size":5,"mime":"text/markdown","eof":true,"dataBase64":""`)) {
		t.Fatalf("past EOF: %s", out)
	}
}

// deepListing is issue 9's input: below base, 17 nested directories with
// 200-byte names (the last one sized so that the directory's canonical
// path is exactly 3,438 bytes), holding 500 files with 255-byte names
// made of fill and a 3-character counter. It returns the directory.
func deepListing(t testing.TB, base string, fill string) string {
	t.Helper()
	const depth, nameLen, files, want = 17, 200, 500, 3438
	last := nameLen + want - (len(base) + depth*(nameLen+1))
	if last < 1 || last > protocol.FSMaxNameBytes {
		t.Skipf("temp dir %q is too long to build a %d-byte path", base, want)
	}
	dir := base
	for i := 0; i < depth; i++ {
		n := nameLen
		if i == depth-1 {
			n = last
		}
		dir += "/" + strings.Repeat(string(rune('a'+i)), n)
	}
	if len(dir) != want {
		t.Fatalf("fixture path is %d bytes", len(dir))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < files; i++ {
		name := strings.Repeat(fill, protocol.FSMaxNameBytes-3) + string(rune('A'+i/100)) + string(rune('0'+i/10%10)) + string(rune('0'+i%10))
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestListDeepMaximalNamesFitsDefaultPayload (moved from hostcalls/fs,
// now through the module): a listing of 500 entries with 255-byte names
// in a directory whose canonical path is 3,438 bytes fits the default
// maxPayload as a node.invoke.result frame, also when every name byte is
// one JSON writes as a 6-byte escape ("<" is \u003c), and its entries are
// exactly {name, type, size, mtimeMs, mode, mime, readable, writable}.
func TestListDeepMaximalNamesFitsDefaultPayload(t *testing.T) {
	for _, fill := range []string{"x", "<"} {
		t.Run(fill, func(t *testing.T) {
			f := newFixture(t)
			dir := deepListing(t, f.root, fill)
			payload, perr := f.invoke(t, "node.fs.list", fmt.Sprintf(`{"nodeId":"n1","path":%q}`, dir))
			if perr != nil {
				t.Fatal(perr)
			}
			frame, err := protocol.AppendInvokeResult(nil, "i", payload)
			if err != nil {
				t.Fatal(err)
			}
			if len(frame)+1024 > protocol.DefaultMaxPayload {
				t.Fatalf("a maximal listing is a %d-byte result frame; the default maxPayload is %d", len(frame), protocol.DefaultMaxPayload)
			}
			var r struct {
				Path      string                       `json:"path"`
				Entries   []map[string]json.RawMessage `json:"entries"`
				Limit     int                          `json:"limit"`
				Truncated bool                         `json:"truncated"`
			}
			if err := json.Unmarshal(payload, &r); err != nil {
				t.Fatal(err)
			}
			if r.Path != dir || len(r.Entries) != 500 || r.Limit != 500 || r.Truncated {
				t.Fatalf("path %d bytes, %d entries, limit %d, truncated %v", len(r.Path), len(r.Entries), r.Limit, r.Truncated)
			}
			if n := bytes.Count(payload, []byte(`"path":`)); n != 1 {
				t.Errorf("the payload has %d path fields, want only the listing's", n)
			}
			want := "mime,mode,mtimeMs,name,readable,size,type,writable"
			for _, en := range r.Entries {
				keys := make([]string, 0, len(en))
				for k := range en {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				if strings.Join(keys, ",") != want {
					t.Fatalf("entry keys %v, want %s", keys, want)
				}
			}
		})
	}
}

// TestStatListErrorsThroughHost (moved from hostcalls/fs
// TestPayloadCallsTable): the fs errors of stat and list reach the caller
// as the host classifies them, with no path in the message.
func TestStatListErrorsThroughHost(t *testing.T) {
	f := newFixture(t)
	os.WriteFile(filepath.Join(f.root, "a.txt"), []byte("a"), 0o644)
	for _, c := range []struct{ method, path, code, domain string }{
		{"node.fs.stat", "nope", protocol.CodeNotFound, "not_found"},
		{"node.fs.stat", "../x", protocol.CodeForbidden, "path_not_allowed"},
		{"node.fs.list", "nope", protocol.CodeNotFound, "not_found"},
		{"node.fs.list", "a.txt", protocol.CodeInvalidRequest, "not_directory"},
		{"node.fs.list", "/etc", protocol.CodeForbidden, "path_not_allowed"},
	} {
		_, perr := f.invoke(t, c.method, fmt.Sprintf(`{"nodeId":"n1","path":%q}`, c.path))
		if perr == nil || perr.Code != c.code || perr.DomainCode() != c.domain || strings.Contains(perr.Message, f.root) {
			t.Errorf("%s %s: %+v, want %s %s", c.method, c.path, perr, c.code, c.domain)
		}
	}
}
