package fs

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"lemon/hostcalls"
	"lemon/protocol"
)

// moduleShapedPreview is the same for a plain fs.delete_preview result.
func moduleShapedPreview(t *testing.T, hostJSON []byte) []byte {
	t.Helper()
	var r protocol.FSDeletePreviewResult
	if err := json.Unmarshal(hostJSON, &r); err != nil {
		t.Fatal(err)
	}
	r.Stat.Mime = protocol.MIMEFromName(r.Stat.Path)
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

// TestPayloadMatchesModuleShaping: the host-built preview payload is byte
// for byte what the module produced from the plain result, odd names and
// canonical paths with invalid UTF-8 included. (node.fs.list and stat are
// shaped by the module: plugins/fs/read_test.go checks their bytes.)
func TestPayloadMatchesModuleShaping(t *testing.T) {
	e := newEnv(t, oddTree(), "root")
	for _, p := range []string{"d/UPPER.PNG", "alias/x.TXT", "d/sub", "d/ln", "d/<a>&b.html"} {
		r, err := e.f.Preview(p, true)
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := json.Marshal(r)
		want := moduleShapedPreview(t, plain)
		got, err := previewPayload(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("preview %s:\n got %s\nwant %s", p, got, want)
		}
	}
}

// TestPayloadCallsTable: capabilities, strict args, errors pass through
// without leaving a blob, and the preview variant registers its token.
func TestPayloadCallsTable(t *testing.T) {
	e := newEnv(t, []node{{path: "root/d/a.txt", file: "a"}}, "root")
	want := map[string]string{"fs.delete_preview_payload": hostcalls.CapWrite}
	audit := map[string]hostcalls.AuditClass{"fs.delete_preview_payload": hostcalls.AuditRead}
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
		{"fs.delete_preview_payload", map[string]any{"path": "nope"}, protocol.CodeNotFound, "not_found"},
		{"fs.delete_preview_payload", map[string]any{"path": "d", "recursive": false}, protocol.CodeConflict, "directory_not_empty"},
		{"fs.delete_preview_payload", map[string]any{"path": "d", "x": 1}, protocol.CodeInvalidParams, ""},
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
	out, perr := e.call("fs.delete_preview_payload", map[string]any{"path": "d", "recursive": true}, call)
	if perr != nil {
		t.Fatal(perr)
	}
	var pc struct {
		PayloadBlob uint32 `json:"payloadBlob"`
	}
	json.Unmarshal(out, &pc)
	var r protocol.FSDeletePreviewResult
	if err := json.Unmarshal(call.blobs[pc.PayloadBlob], &r); err != nil {
		t.Fatal(err)
	}
	if r.Path != e.abs("root/d") || r.Stat.Type != "directory" || r.Stat.Mime != "application/octet-stream" ||
		r.ChildCount != 1 || r.CandidateCount != 2 || r.ConfirmationToken == "" {
		t.Fatalf("preview %+v", r)
	}
	// The token is live: delete consumes it.
	if _, err := e.f.Delete("d", "d", r.ConfirmationToken); err != nil || e.exists("root/d") {
		t.Fatalf("delete with the payload's token: %v", err)
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
