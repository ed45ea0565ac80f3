package fs

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"

	"lemon/hostcalls"
	"lemon/protocol"
)

// node is one entry of a test tree, relative to the temp dir.
type node struct {
	path    string
	file    string
	dir     bool
	symlink string // literal target; "${TMP}" expands to the temp dir
	fifo    bool
}

// env is a temp dir (canonical) holding a tree and an FS over some roots.
type env struct {
	t   testing.TB
	tmp string
	f   *FS
}

func canonTemp(t testing.TB) string {
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func build(t testing.TB, tmp string, tree []node) {
	t.Helper()
	for _, n := range tree {
		p := filepath.Join(tmp, n.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case n.dir:
			err = os.MkdirAll(p, 0o755)
		case n.symlink != "":
			err = os.Symlink(expand(n.symlink, tmp), p)
		case n.fifo:
			err = syscall.Mkfifo(p, 0o644)
		default:
			err = os.WriteFile(p, []byte(n.file), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func expand(s, tmp string) string {
	out := []byte{}
	for i := 0; i < len(s); i++ {
		if len(s)-i >= 6 && s[i:i+6] == "${TMP}" {
			out = append(out, tmp...)
			i += 5
			continue
		}
		out = append(out, s[i])
	}
	return string(out)
}

// newEnv builds tree under a fresh temp dir; roots are relative to it and
// the first is the default cwd.
func newEnv(t testing.TB, tree []node, roots ...string) *env {
	t.Helper()
	tmp := canonTemp(t)
	build(t, tmp, tree)
	var abs []string
	for _, r := range roots {
		p := filepath.Join(tmp, r)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		abs = append(abs, p)
	}
	f, err := New(Config{Roots: abs, DefaultCwd: abs[0], Home: tmp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &env{t: t, tmp: tmp, f: f}
}

func (e *env) abs(rel string) string { return filepath.Join(e.tmp, rel) }

func (e *env) mtime(rel string) int64 {
	e.t.Helper()
	fi, err := os.Lstat(e.abs(rel))
	if err != nil {
		e.t.Fatal(err)
	}
	return fi.ModTime().UnixMilli()
}

func (e *env) content(rel string) string {
	e.t.Helper()
	b, err := os.ReadFile(e.abs(rel))
	if err != nil {
		e.t.Fatalf("read %s: %v", rel, err)
	}
	return string(b)
}

func (e *env) exists(rel string) bool {
	_, err := os.Lstat(e.abs(rel))
	return err == nil
}

// dirNames lists a directory's names, sorted.
func (e *env) dirNames(rel string) []string {
	e.t.Helper()
	ents, err := os.ReadDir(e.abs(rel))
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, d := range ents {
		out = append(out, d.Name())
	}
	sort.Strings(out)
	return out
}

// fakeCall is a hostcalls.Call with an in-memory blob store.
type fakeCall struct {
	mu        sync.Mutex
	blobs     map[uint32][]byte
	next      uint32
	maxResult int // Invocation.MaxResultBytes
	auth      hostcalls.Authority
	scoped    map[any]io.Closer
}

// Scoped keeps per-invocation values (hostcalls.Scoper); end closes them
// as the host does when the invocation ends.
func (c *fakeCall) Scoped(key any, mk func() io.Closer) io.Closer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.scoped == nil {
		c.scoped = map[any]io.Closer{}
	}
	if v, ok := c.scoped[key]; ok {
		return v
	}
	v := mk()
	c.scoped[key] = v
	return v
}

func (c *fakeCall) end() {
	c.mu.Lock()
	vs := c.scoped
	c.scoped = nil
	c.mu.Unlock()
	for _, v := range vs {
		v.Close()
	}
}

func newCall() *fakeCall { return &fakeCall{blobs: map[uint32][]byte{}} }

func (c *fakeCall) Module() string { return "fs" }
func (c *fakeCall) Method() string { return "node.fs.test" }
func (c *fakeCall) Invocation() hostcalls.Invocation {
	return hostcalls.Invocation{InvokeID: "i1", NodeID: "n1", MaxResultBytes: c.maxResult, Authority: c.auth}
}
func (c *fakeCall) Await(done <-chan struct{}) uint32 { return 0 }
func (c *fakeCall) Blob(id uint32) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.blobs[id]
	return b, ok
}
func (c *fakeCall) PutBlob(b []byte) uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	c.blobs[c.next] = b
	return c.next
}

var _ hostcalls.Call = (*fakeCall)(nil)

// call runs a host call by name through the table with JSON args.
func (e *env) call(name string, args any, call *fakeCall) (json.RawMessage, *protocol.Error) {
	e.t.Helper()
	if call == nil {
		call = newCall()
		defer call.end()
	}
	b, err := json.Marshal(args)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, hc := range e.f.Table() {
		if hc.Name == name {
			out, err := hc.JSONFunc()(context.Background(), call, b)
			if err != nil {
				pe, ok := err.(*protocol.Error)
				if !ok {
					e.t.Fatalf("%s returned a non-protocol error %T", name, err)
				}
				return nil, pe
			}
			return out, nil
		}
	}
	e.t.Fatalf("no host call %s", name)
	return nil, nil
}

// domain returns the error's details.code ("" for nil).
func domain(err error) string {
	if err == nil {
		return ""
	}
	pe, ok := err.(*protocol.Error)
	if !ok {
		return "non-protocol error"
	}
	return pe.DomainCode()
}

func ptr[T any](v T) *T { return &v }
