package fs

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"lemon/protocol"
)

// deepListing is issue 9's input: below base, 17 nested directories with
// 200-byte names (the last one shortened or lengthened so that the
// directory's canonical path is exactly 3,438 bytes), holding 500 files
// with 255-byte names made of fill and a 3-character counter. It returns
// the directory's canonical path.
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

// TestListDeepMaximalNamesFitsDefaultPayload: a listing of 500 entries
// with 255-byte names in a directory whose canonical path is 3,438 bytes
// fits the default maxPayload as a node.invoke.result frame (it did not
// while each entry repeated the directory's path), and its entries are
// exactly {name, type, size, mtimeMs, mode, mime, readable, writable}.
// It also fits when every name byte is one JSON writes as a 6-byte
// escape ("<" is \u003c), the longest encoding a valid name can have.
func TestListDeepMaximalNamesFitsDefaultPayload(t *testing.T) {
	for _, fill := range []string{"x", "<"} {
		t.Run(fill, func(t *testing.T) { testListDeep(t, fill) })
	}
}

func testListDeep(t *testing.T, fill string) {
	e := newEnv(t, nil, "root")
	dir := deepListing(t, e.abs("root"), fill)
	payload, err := e.f.ListPayload(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	frame, err := protocol.AppendInvokeResult(nil, "i", payload)
	if err != nil {
		t.Fatal(err)
	}
	// The worker sends the result inside a request frame of at most ~90
	// bytes more; leave it 1 KiB.
	if len(frame)+1024 > protocol.DefaultMaxPayload {
		t.Fatalf("a maximal listing is a %d-byte result frame; the default maxPayload is %d", len(frame), protocol.DefaultMaxPayload)
	}
	t.Logf("500 maximal entries under a 3,438-byte path: %d-byte payload", len(payload))
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
	want := []string{"mime", "mode", "mtimeMs", "name", "readable", "size", "type", "writable"}
	for _, en := range r.Entries {
		var keys []string
		for k := range en {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if strings.Join(keys, ",") != strings.Join(want, ",") {
			t.Fatalf("entry keys %v, want %v", keys, want)
		}
	}
}

// TestLegacyListKeepsEntryPaths: the fs.list host call, kept for fs
// modules before 1.1.0 that take each entry's MIME type from its path,
// still gives every stat entry the path listing path + "/" + name, and
// an {name, error} entry none.
func TestLegacyListKeepsEntryPaths(t *testing.T) {
	e := newEnv(t, []node{{path: "root/d/a.txt", file: "a"}, {path: "root/d/sub", dir: true}, {path: "root/d/bad\xff", file: ""}}, "root")
	out, perr := e.call("fs.list", map[string]any{"path": "d", "showHidden": false}, nil)
	if perr != nil {
		t.Fatal(perr)
	}
	var r struct {
		Path    string `json:"path"`
		Entries []struct {
			Name  string  `json:"name"`
			Path  *string `json:"path"`
			Error string  `json:"error"`
			Type  string  `json:"type"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	if r.Path != e.abs("root/d") || len(r.Entries) != 3 {
		t.Fatalf("legacy list %s", out)
	}
	for _, en := range r.Entries {
		switch {
		case en.Error != "":
			if en.Path != nil {
				t.Errorf("error entry %q has a path", en.Name)
			}
		case en.Path == nil || *en.Path != r.Path+"/"+en.Name || en.Type == "":
			t.Errorf("entry %q: path %v type %q", en.Name, en.Path, en.Type)
		}
	}
}
