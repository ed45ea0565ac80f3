package fs

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"lemon/protocol"
)

// sharedTree is the one tree every operation runs against (issue 3): a
// file, a directory, a link inside, a link into another root, an absolute
// link out, a link directory out (for a missing child), a dangling link
// out, a cycle, a FIFO, and a canary outside every root.
var sharedTree = []node{
	{path: "root/a.txt", file: "hello"},
	{path: "root/d/inner.txt", file: "inner"},
	{path: "root/link-in", symlink: "a.txt"},
	{path: "root/link-up-in", symlink: "d/../a.txt"},
	{path: "root/link-other", symlink: "${TMP}/other/o.txt"},
	{path: "root/link-rel-other", symlink: "../other/o.txt"},
	{path: "root/link-abs-out", symlink: "${TMP}/outside/secret.txt"},
	{path: "root/link-rel-out", symlink: "../outside/secret.txt"},
	{path: "root/link-dir-out", symlink: "${TMP}/outside"},
	{path: "root/dangling-out", symlink: "${TMP}/outside/missing.txt"},
	{path: "root/cycle1", symlink: "cycle2"},
	{path: "root/cycle2", symlink: "cycle1"},
	{path: "root/fifo", fifo: true},
	{path: "root/src.txt", file: "source"},
	{path: "other/o.txt", file: "other"},
	{path: "outside/secret.txt", file: "CANARY"},
}

// ops are the operations of the family, as the table names them.
var ops = []string{"stat", "list", "read", "write", "mkdir", "moveSrc", "moveDst", "preview"}

type confCase struct {
	name  string
	path  string
	canon string            // canonical target (relative to tmp) when an op succeeds
	all   string            // expected domain code for every op ("" = success) unless overridden
	per   map[string]string // per-op overrides
}

func confCases(tmp string) []confCase {
	fileLike := map[string]string{"list": "not_directory", "mkdir": "already_exists", "moveDst": "already_exists"}
	denied := "path_not_allowed"
	longName := strings.Repeat("n", 256)
	var longPath strings.Builder
	for longPath.Len() < 4097 {
		longPath.WriteString("x/")
	}
	return []confCase{
		{name: "file", path: "a.txt", canon: "root/a.txt", per: fileLike},
		{name: "absolute file", path: tmp + "/root/a.txt", canon: "root/a.txt", per: fileLike},
		{name: "dot components", path: "./d/./inner.txt", canon: "root/d/inner.txt", per: fileLike},
		{name: "dir", path: "d", canon: "root/d", per: map[string]string{"read": "not_regular_file", "write": "not_regular_file", "moveDst": "already_exists", "preview": "directory_not_empty"}},
		{name: "link inside", path: "link-in", canon: "root/a.txt", per: fileLike},
		{name: "link inside via dotdot target", path: "link-up-in", canon: "root/a.txt", per: fileLike},
		{name: "link to another root", path: "link-other", canon: "other/o.txt", per: fileLike},
		{name: "relative link to another root", path: "link-rel-other", canon: "other/o.txt", per: fileLike},
		{name: "absolute link out", path: "link-abs-out", all: denied},
		{name: "relative link out", path: "link-rel-out", all: denied},
		{name: "link parent of a missing file", path: "link-dir-out/new.txt", all: denied},
		{name: "link parent of an existing file", path: "link-dir-out/secret.txt", all: denied},
		{name: "dangling link out", path: "dangling-out", all: denied},
		{name: "cycle", path: "cycle1", all: denied},
		{name: "dotdot out", path: "../outside/secret.txt", all: denied},
		{name: "dotdot back inside", path: "d/../a.txt", all: denied},
		{name: "absolute outside", path: tmp + "/outside/secret.txt", all: denied},
		{name: "absolute root of fs", path: "/", all: denied},
		{name: "fifo", path: "fifo", canon: "root/fifo", per: map[string]string{"list": "not_directory", "read": "not_regular_file", "write": "not_regular_file", "mkdir": "already_exists", "moveDst": "already_exists"}},
		{name: "missing", path: "missing.txt", canon: "root/missing.txt", per: map[string]string{"stat": "not_found", "list": "not_found", "read": "not_found", "moveSrc": "not_found", "preview": "not_found"}},
		{name: "missing parent", path: "nodir/x.txt", all: "not_found", per: map[string]string{"mkdir": "", "moveDst": "not_found"}, canon: "root/nodir/x.txt"},
		{name: "file as parent", path: "a.txt/x", all: "not_directory"},
		{name: "over-long name", path: longName, all: "name_too_long"},
		{name: "over-long path", path: longPath.String()[:4097], all: "invalid_path"},
		{name: "NUL", path: "a.txt\x00", all: "invalid_path"},
		{name: "non-UTF-8", path: "a\xff.txt", all: "invalid_path"},
		{name: "empty", path: "", all: "invalid_path"},
	}
}

func (c confCase) expect(op string) string {
	if v, ok := c.per[op]; ok {
		return v
	}
	return c.all
}

// runOp runs op on path in a fresh env and returns the canonical path the
// op reported (relative to tmp) and its error.
func runOp(e *env, op, path string, canon string) (string, error) {
	rel := func(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, e.tmp), "/") }
	switch op {
	case "stat":
		r, err := e.f.Stat(path)
		if err != nil {
			return "", err
		}
		return rel(r.Path), nil
	case "list":
		r, err := e.f.List(path, true)
		if err != nil {
			return "", err
		}
		return rel(r.Path), nil
	case "read":
		r, err := e.f.Read(path, 0, protocol.FSMaxReadLength, newCall().PutBlob)
		if err != nil {
			return "", err
		}
		return rel(r.Path), nil
	case "write":
		a := protocol.FSWriteCall{Path: path, Truncate: true}
		if canon != "" && e.exists(canon) {
			a.ExpectedModifiedAtMs = ptr(e.mtime(canon))
		}
		r, err := e.f.Write(a, []byte("written"))
		if err != nil {
			return "", err
		}
		if got := e.content(canon); got != "written" {
			e.t.Errorf("write left %q", got)
		}
		return rel(r.Path), nil
	case "mkdir":
		r, err := e.f.Mkdir(path)
		if err != nil {
			return "", err
		}
		return rel(r.Path), nil
	case "moveSrc":
		var exp int64
		if canon != "" && e.exists(canon) {
			exp = e.mtime(canon)
		}
		r, err := e.f.Move(path, "moved", exp, false)
		if err != nil {
			return "", err
		}
		if !e.exists("root/moved") || e.exists(canon) {
			e.t.Errorf("move did not move")
		}
		return rel(r.Path), nil
	case "moveDst":
		r, err := e.f.Move("src.txt", path, e.mtime("root/src.txt"), false)
		if err != nil {
			return "", err
		}
		if e.content(canon) != "source" {
			e.t.Errorf("moved content wrong")
		}
		return rel(r.Destination), nil
	case "preview":
		r, err := e.f.Preview(path, false)
		if err != nil {
			return "", err
		}
		return rel(r.Path), nil
	}
	panic(op)
}

// TestConfinementTable runs every case of the shared tree against every
// operation, each on a fresh tree, and checks the classification, the
// canonical path reported, and that nothing outside the roots changed.
func TestConfinementTable(t *testing.T) {
	probe := canonTemp(t)
	readOnly := map[string]bool{"stat": true, "list": true, "read": true, "preview": true}
	for _, op := range ops {
		// Read-only operations share one tree per operation; mutations get
		// a fresh tree per case.
		var shared *env
		if readOnly[op] {
			shared = newEnv(t, sharedTree, "root", "other")
		}
		for _, c := range confCases(probe) {
			t.Run(op+"/"+c.name, func(t *testing.T) {
				e := shared
				if e == nil {
					e = newEnv(t, sharedTree, "root", "other")
				}
				path := strings.ReplaceAll(c.path, probe, e.tmp)
				got, err := runOp(e, op, path, c.canon)
				want := c.expect(op)
				if domain(err) != want {
					t.Fatalf("got error %v (domain %q), want %q", err, domain(err), want)
				}
				if err == nil && got != c.canon {
					t.Errorf("reported path %q, want %q", got, c.canon)
				}
				if err != nil {
					msg := err.Error()
					if strings.Contains(msg, e.tmp) || strings.Contains(msg, "secret") || strings.Contains(msg, "CANARY") {
						t.Errorf("error message leaks a path or content: %q", msg)
					}
				}
				if got := e.content("outside/secret.txt"); got != "CANARY" {
					t.Fatalf("canary changed: %q", got)
				}
				if names := e.dirNames("outside"); !reflect.DeepEqual(names, []string{"secret.txt"}) {
					t.Fatalf("outside dir changed: %v", names)
				}
				if _, err := os.Lstat(e.abs("root/.lemon-delete")); err == nil {
					t.Fatal("stray capture entry")
				}
			})
		}
	}
}

// TestSymlinkBudget: a chain of exactly 40 links resolves, 41 does not.
func TestSymlinkBudget(t *testing.T) {
	for _, tc := range []struct {
		links int
		want  string
	}{{40, ""}, {41, "path_not_allowed"}} {
		var tree []node
		tree = append(tree, node{path: "root/end.txt", file: "x"})
		for i := 0; i < tc.links; i++ {
			target := "l" + itoa(i+1)
			if i == tc.links-1 {
				target = "end.txt"
			}
			tree = append(tree, node{path: "root/l" + itoa(i), symlink: target})
		}
		e := newEnv(t, tree, "root")
		_, err := e.f.Stat("l0")
		if domain(err) != tc.want {
			t.Errorf("%d links: got %v, want %q", tc.links, err, tc.want)
		}
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// TestPathLengthBoundary: a path of exactly 4096 bytes is admitted (and
// walked: here its first component is missing), 4097 is invalid_path.
func TestPathLengthBoundary(t *testing.T) {
	e := newEnv(t, nil, "root")
	comp := strings.Repeat("c", 255)
	var b strings.Builder
	for b.Len()+256 <= 4096 {
		b.WriteString(comp + "/")
	}
	p := b.String()
	p += strings.Repeat("z", 4096-len(p))
	if len(p) != 4096 {
		t.Fatalf("built %d bytes", len(p))
	}
	if _, err := e.f.Stat(p); domain(err) != "not_found" {
		t.Errorf("4096 bytes: got %v, want not_found", err)
	}
	if _, err := e.f.Stat(p + "z"); domain(err) != "invalid_path" {
		t.Errorf("4097 bytes: got %v, want invalid_path", err)
	}
	// Name boundary: 255 passes validation, 256 does not.
	if _, err := e.f.Stat(comp); domain(err) != "not_found" {
		t.Errorf("255-byte name: got %v", err)
	}
	if _, err := e.f.Stat(comp + "c"); domain(err) != "name_too_long" {
		t.Errorf("256-byte name: got %v", err)
	}
}
