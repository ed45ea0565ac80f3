package fs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"lemon/hostcalls"
	"lemon/protocol"
)

// moduleShapedList is what fs modules before 1.1.0 returned for a plain
// fs.list result: decode, add each entry's MIME type, re-encode.
func moduleShapedList(t *testing.T, hostJSON []byte) []byte {
	t.Helper()
	var r protocol.FSListResult
	if err := json.Unmarshal(hostJSON, &r); err != nil {
		t.Fatal(err)
	}
	for i := range r.Entries {
		if st := r.Entries[i].FSEntryStat; st != nil {
			st.Mime = protocol.MIMEFromName(r.Entries[i].Name)
		}
	}
	if r.Entries == nil {
		r.Entries = []protocol.FSListEntry{}
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// moduleShapedStat is the same for a plain fs.stat result.
func moduleShapedStat(t *testing.T, hostJSON []byte) []byte {
	t.Helper()
	var r protocol.FSStat
	if err := json.Unmarshal(hostJSON, &r); err != nil {
		t.Fatal(err)
	}
	r.Mime = protocol.MIMEFromName(r.Path)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// oddNames are file names whose JSON encoding is not the identity:
// HTML characters, quotes, control bytes, line separators, invalid and
// truncated UTF-8, multi-byte runes, upper-case and missing extensions.
var oddNames = []string{
	"plain.txt", "UPPER.PNG", "<a>&b.html", `q"b\s.json`, "ctl\x01\x1f.go", "ls\u2028ps\u2029.md",
	"bad\xff\xfe.txt", "cut\xc3.md", "mixed\xe2\x82.x\xffy.csv", "emoji-\U0001F600.csv", ".hidden.yml",
	"noext", "trail.", ".dotonly",
}

func oddTree() []node {
	tree := []node{
		{path: "root/d/sub", dir: true},
		{path: "root/d/ln", symlink: "plain.txt"},
		{path: "root/d/pipe", fifo: true},
		{path: "root/b\xffad/x.TXT", file: "x"},
		{path: "root/alias", symlink: "b\xffad"},
	}
	for _, n := range oddNames {
		tree = append(tree, node{path: "root/d/" + n, file: n})
	}
	return tree
}

// TestPayloadMatchesModuleShaping: the host-built payloads are byte for
// byte what the module produced from the plain results, odd names and
// canonical paths with invalid UTF-8 included.
func TestPayloadMatchesModuleShaping(t *testing.T) {
	e := newEnv(t, oddTree(), "root")
	for _, c := range []struct {
		path   string
		hidden bool
	}{{"d", false}, {"d", true}, {"alias", false}, {"d/sub", false}} {
		r, err := e.f.List(c.path, c.hidden)
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := json.Marshal(r)
		want := moduleShapedList(t, plain)
		got, err := listPayload(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("list %s hidden=%v:\n got %s\nwant %s", c.path, c.hidden, got, want)
		}
	}
	for _, n := range append([]string{"alias/x.TXT", "alias", "d/sub", "d/pipe", "d"}, oddNames...) {
		p := n
		if !strings.Contains(n, "/") && n != "alias" && n != "d" {
			p = "d/" + n
		}
		if !utf8.ValidString(p) {
			continue // request paths are UTF-8; such names are reached through listings and aliases
		}
		st, err := e.f.Stat(p)
		if err != nil {
			t.Fatalf("stat %q: %v", p, err)
		}
		plain, _ := json.Marshal(st)
		want := moduleShapedStat(t, plain)
		got, err := statPayload(st)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("stat %q:\n got %s\nwant %s", p, got, want)
		}
	}
	// Entries that vanished during listing carry {name, error} only; an
	// empty listing is entries:[].
	for _, r := range []*protocol.FSListResult{
		{Path: "/r/d\xff", Limit: 500, Entries: []protocol.FSListEntry{
			{Name: "gone\xff.txt", Error: "not_found"},
			{Name: "a.txt", FSEntryStat: &protocol.FSEntryStat{Type: "regular", Size: 3, MtimeMs: 5, Mode: 0o100644, Readable: true}},
		}},
		{Path: "/r/empty", Limit: 500},
	} {
		plain, _ := json.Marshal(r)
		want := moduleShapedList(t, plain)
		got, err := listPayload(r)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("synthetic list:\n got %s %v\nwant %s", got, err, want)
		}
	}
}

// TestListPayloadValues checks the payload's values, not only its
// equality with the old shaping.
func TestListPayloadValues(t *testing.T) {
	e := newEnv(t, oddTree(), "root")
	out, perr := e.call("fs.list_payload", map[string]any{"path": "d", "showHidden": false}, nil)
	_ = out
	call := newCall()
	out, perr = e.call("fs.list_payload", map[string]any{"path": "d", "showHidden": false}, call)
	if perr != nil {
		t.Fatal(perr)
	}
	var pc struct {
		PayloadBlob uint32 `json:"payloadBlob"`
	}
	if err := protocol.DecodeParams(out, &pc); err != nil || pc.PayloadBlob == 0 {
		t.Fatalf("result %s: %v", out, err)
	}
	blob, ok := call.Blob(pc.PayloadBlob)
	if !ok {
		t.Fatal("no payload blob")
	}
	var r protocol.FSListResult
	if err := json.Unmarshal(blob, &r); err != nil {
		t.Fatal(err)
	}
	if r.Path != e.abs("root/d") || r.Limit != 500 || r.Truncated {
		t.Errorf("header %+v", r)
	}
	mime := map[string]string{}
	var invalid []string
	for _, en := range r.Entries {
		if en.Error == "invalid_path" && en.FSEntryStat == nil {
			invalid = append(invalid, en.Name)
			continue
		}
		if en.FSEntryStat == nil || en.Error != "" {
			t.Errorf("entry %+v", en)
			continue
		}
		mime[en.Name] = en.Mime
	}
	want := map[string]string{
		"plain.txt": "text/plain", "UPPER.PNG": "image/png", "<a>&b.html": "text/html",
		`q"b\s.json`: "application/json", "ctl\x01\x1f.go": "text/x-go", "ls\u2028ps\u2029.md": "text/markdown",
		"emoji-\U0001F600.csv": "text/csv",
		"noext":                "application/octet-stream", "trail.": "application/octet-stream",
		"sub": "application/octet-stream", "ln": "application/octet-stream", "pipe": "application/octet-stream",
	}
	if fmt.Sprint(mime) != fmt.Sprint(want) {
		t.Errorf("mime by name\n got %v\nwant %v", mime, want)
	}
	// Names that are not UTF-8 are listed, sorted by their bytes, as
	// {name, error:"invalid_path"} with U+FFFD for each bad byte.
	wantInvalid := []string{"bad\uFFFD\uFFFD.txt", "cut\uFFFD.md", "mixed\uFFFD\uFFFD.x\uFFFDy.csv"}
	if fmt.Sprint(invalid) != fmt.Sprint(wantInvalid) {
		t.Errorf("invalid names\n got %q\nwant %q", invalid, wantInvalid)
	}
	if !bytes.Contains(blob, []byte(`"name":"\u003ca\u003e\u0026b.html"`)) || bytes.Contains(blob, []byte{0xff}) {
		t.Errorf("encoding: %s", blob)
	}
	// The blob is a fixed point of decode and re-encode: nothing is left
	// for a module to normalise.
	again, _ := json.Marshal(r)
	if !bytes.Equal(again, blob) {
		t.Errorf("not canonical:\n%s\n%s", blob, again)
	}
}

// TestListPayloadLimit: 500 visible entries pass untruncated, 501 give the
// first 500 and truncated:true.
func TestListPayloadLimit(t *testing.T) {
	for _, n := range []int{500, 501} {
		e := newEnv(t, nil, "root")
		os.Mkdir(e.abs("root/big"), 0o755)
		os.WriteFile(e.abs("root/base"), nil, 0o644)
		for i := 0; i < n; i++ {
			os.Link(e.abs("root/base"), e.abs(fmt.Sprintf("root/big/f%04d.txt", i)))
		}
		b, err := e.f.ListPayload("big", false)
		if err != nil {
			t.Fatal(err)
		}
		var r protocol.FSListResult
		json.Unmarshal(b, &r)
		if len(r.Entries) != 500 || r.Truncated != (n > 500) || r.Entries[499].Name != "f0499.txt" || r.Entries[499].Mime != "text/plain" {
			t.Errorf("n=%d: %d entries, truncated=%v", n, len(r.Entries), r.Truncated)
		}
	}
}

// TestPayloadCallsTable: capabilities, strict args, errors pass through
// without leaving a blob.
func TestPayloadCallsTable(t *testing.T) {
	e := newEnv(t, []node{{path: "root/d/a.txt", file: "a"}}, "root")
	want := map[string]string{"fs.list_payload": hostcalls.CapRead, "fs.stat_payload": hostcalls.CapRead}
	audit := map[string]hostcalls.AuditClass{"fs.list_payload": hostcalls.AuditRead, "fs.stat_payload": hostcalls.AuditMeta}
	for _, hc := range e.f.Table() {
		if c, ok := want[hc.Name]; ok {
			if hc.Capability != c || hc.Audit != audit[hc.Name] {
				t.Errorf("%s: %+v", hc.Name, hc)
			}
			delete(want, hc.Name)
		}
	}
	if len(want) != 0 {
		t.Fatalf("missing %v", want)
	}
	for _, c := range []struct {
		name   string
		args   any
		code   string
		domain string
	}{
		{"fs.list_payload", map[string]any{"path": "nope"}, protocol.CodeNotFound, "not_found"},
		{"fs.list_payload", map[string]any{"path": "d/a.txt"}, protocol.CodeInvalidRequest, "not_directory"},
		{"fs.list_payload", map[string]any{"path": "d", "limit": 1}, protocol.CodeInvalidParams, ""},
		{"fs.stat_payload", map[string]any{"path": "nope"}, protocol.CodeNotFound, "not_found"},
		{"fs.stat_payload", map[string]any{"path": "d", "showHidden": true}, protocol.CodeInvalidParams, ""},
		{"fs.stat_payload", map[string]any{"path": "../x"}, protocol.CodeForbidden, "path_not_allowed"},
	} {
		call := newCall()
		_, perr := e.call(c.name, c.args, call)
		if perr == nil || perr.Code != c.code || perr.DomainCode() != c.domain || len(call.blobs) != 0 {
			t.Errorf("%s %v: %+v (blobs %d)", c.name, c.args, perr, len(call.blobs))
		}
		if perr != nil && strings.Contains(perr.Message, e.tmp) {
			t.Errorf("error echoes a path: %s", perr.Message)
		}
	}
	call := newCall()
	out, perr := e.call("fs.stat_payload", map[string]any{"path": "d/a.txt"}, call)
	if perr != nil {
		t.Fatal(perr)
	}
	wantStat := fmt.Sprintf(`{"path":%q,"type":"regular","size":1,"mtimeMs":%d,"mode":%d,"mime":"text/plain","readable":true,"writable":true}`,
		e.abs("root/d/a.txt"), e.mtime("root/d/a.txt"), 0o100644)
	if string(out) != `{"payloadBlob":1}` || string(call.blobs[1]) != wantStat {
		t.Fatalf("stat_payload = %s, blob %s\nwant %s", out, call.blobs[1], wantStat)
	}
}

func TestFixUTF8(t *testing.T) {
	for in, want := range map[string]string{
		"":                 "",
		"ok\u00e9":         "ok\u00e9",
		"\xff":             "\uFFFD",
		"a\xc3":            "a\uFFFD",
		"\xe2\x82\xe2\x82": "\uFFFD\uFFFD\uFFFD\uFFFD",
		"\xed\xa0\x80":     "\uFFFD\uFFFD\uFFFD", // a surrogate is invalid UTF-8
	} {
		if got := fixUTF8(in); got != want {
			t.Errorf("fixUTF8(%q) = %q, want %q", in, got, want)
		}
		// Same as encoding/json's own replacement.
		a, _ := json.Marshal(in)
		var dec string
		json.Unmarshal(a, &dec)
		if dec != want {
			t.Errorf("json round trip of %q = %q", in, dec)
		}
	}
}
