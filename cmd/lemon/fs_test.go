package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"lemon/client"
	"lemon/client/fakecontrol"
	"lemon/host"
	"lemon/host/hosttest"
	"lemon/hostcalls"
	hfs "lemon/hostcalls/fs"
	"lemon/hostcalls/store"
	"lemon/protocol"
)

// fsNode answers node.fs.* requests: reads straight from hostcalls/fs
// (the module itself is covered by its conformance cases), and the
// mutations (write, mkdir, move, delete.preview, delete) through the real
// fs module on a host, since their decisions (revisions, tokens, move
// rules) live in the module. It lets the CLI's chunking, pipelining and
// CAS chaining be tested without a controller and a node.
func fsNode(t testing.TB, f *hfs.FS) fakecontrol.Handler {
	st, err := store.New(store.Config{Path: filepath.Join(t.TempDir(), "store.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := hosttest.NewHost(t, host.Config{Ceiling: hostcalls.AllCapabilities, Tables: []hostcalls.Table{f.Table(), st.Table()}}, "fs", "plugins/fs")
	return func(_ *fakecontrol.Conn, req protocol.Request) (any, *protocol.Error) {
		if req.Method == "node.list" {
			return protocol.NodeListResult{Nodes: []protocol.NodeSummary{{NodeID: "n-1", Name: "worker-1"}}}, nil
		}
		spec, ok := protocol.LookupMethod(req.Method)
		if !ok {
			return nil, protocol.Errorf(protocol.CodeMethodNotFound, "unknown")
		}
		if perr := spec.Validate(req.Params); perr != nil {
			return nil, perr
		}
		var v any
		var err error
		switch req.Method {
		case "node.fs.stat":
			var p protocol.FSStatParams
			protocol.DecodeParams(req.Params, &p)
			v, err = osStat(f, p.Path)
		case "node.fs.list":
			var p protocol.FSListParams
			protocol.DecodeParams(req.Params, &p)
			v, err = osList(f, p.Path, p.ShowHidden)
		case "node.fs.read":
			var p protocol.FSReadParams
			protocol.DecodeParams(req.Params, &p)
			var data []byte
			r, rerr := f.Read(p.Path, *p.Offset, *p.Length, func(b []byte) uint32 { data = b; return 1 })
			if rerr == nil {
				out := protocol.FSReadResult{Path: r.Path, Offset: r.Offset, Length: r.Length, Size: r.Size, EOF: r.EOF}
				out.DataBase64 = base64.StdEncoding.EncodeToString(data)
				v = out
			}
			err = rerr
		case "node.fs.write", "node.fs.mkdir", "node.fs.move", "node.fs.delete.preview", "node.fs.delete":
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			return h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "i1", NodeID: "n-1", SessionGeneration: 1,
				Method: req.Method, Args: req.Params})
		default:
			return nil, protocol.Errorf(protocol.CodeMethodNotFound, "unknown")
		}
		if err != nil {
			return nil, protocol.AsError(err)
		}
		b, _ := json.Marshal(v)
		return json.RawMessage(b), nil
	}
}

// osStat and osList answer node.fs.stat and list from the os package
// (the fs module shapes them from the read primitives, which its own
// tests cover); relative paths resolve from f's default cwd.
func osStat(f *hfs.FS, p string) (*protocol.FSStat, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(f.DefaultCwd(), p)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, protocol.FSError(protocol.DomainNotFound)
	}
	typ := "regular"
	if fi.IsDir() {
		typ = "directory"
	}
	return &protocol.FSStat{Path: p, Type: typ, Size: fi.Size(), MtimeMs: fi.ModTime().UnixMilli(), Mode: fi.Sys().(*syscall.Stat_t).Mode,
		Readable: true, Writable: true}, nil
}

func osList(f *hfs.FS, p string, showHidden bool) (*protocol.FSListResult, error) {
	st, err := osStat(f, p)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(st.Path)
	if err != nil {
		return nil, protocol.FSError(protocol.DomainNotDirectory)
	}
	out := &protocol.FSListResult{Path: st.Path, Entries: []protocol.FSListEntry{}, Limit: protocol.FSListLimit}
	for _, e := range ents {
		if !showHidden && strings.HasPrefix(e.Name(), ".") {
			continue
		}
		es, err := osStat(f, filepath.Join(st.Path, e.Name()))
		if err != nil {
			out.Entries = append(out.Entries, protocol.FSListEntry{Name: e.Name(), Error: protocol.DomainNotFound})
			continue
		}
		out.Entries = append(out.Entries, protocol.FSListEntry{Name: e.Name(), FSEntryStat: &protocol.FSEntryStat{Type: es.Type,
			Size: es.Size, MtimeMs: es.MtimeMs, Mode: es.Mode, Readable: true, Writable: true}})
	}
	return out, nil
}

func fsFixture(t *testing.T, maxPayload int) (*fsClient, string) {
	t.Helper()
	root, _ := filepath.EvalSymlinks(t.TempDir())
	f, err := hfs.New(hfs.Config{Roots: []string{root}, DefaultCwd: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	srv := fakecontrol.New(fakecontrol.Options{OperatorToken: "op", MaxPayload: maxPayload, Handle: fsNode(t, f)})
	t.Cleanup(srv.Close)
	conn, err := client.Dial(context.Background(), srv.URL, client.Options{Token: "op"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &fsClient{conn: conn}
	node, perr := conn.ResolveNode(context.Background(), "worker-1")
	if c.node = node; perr != nil || c.node != "n-1" {
		t.Fatalf("resolve by name: %q %v", c.node, perr)
	}
	return c, root
}

func TestFSLsMvRm(t *testing.T) {
	c, root := fsFixture(t, protocol.DefaultMaxPayload)
	os.MkdirAll(filepath.Join(root, "d/sub"), 0o755)
	os.WriteFile(filepath.Join(root, "d/a.txt"), []byte("abc"), 0o644)
	var out bytes.Buffer
	if err := c.ls(context.Background(), &out, []string{"d"}, false); err != nil {
		t.Fatal(err)
	}
	// ls -l columns: mode and name left-aligned, size right-aligned.
	mt := time.Date(2026, 1, 2, 3, 4, 0, 0, time.Local)
	os.WriteFile(filepath.Join(root, "d/big.bin"), make([]byte, 12345), 0o600)
	for _, n := range []string{"d/a.txt", "d/sub", "d/big.bin"} {
		os.Chtimes(filepath.Join(root, n), mt, mt)
	}
	os.Chmod(filepath.Join(root, "d/sub"), 0o755)
	os.Chmod(filepath.Join(root, "d/a.txt"), 0o644)
	out.Reset()
	if err := c.ls(context.Background(), &out, []string{"d"}, false); err != nil {
		t.Fatal(err)
	}
	subSize, _ := os.Stat(filepath.Join(root, "d/sub"))
	w := max(5, len(strconv.FormatInt(subSize.Size(), 10)))
	when := mt.Format("2006-01-02 15:04")
	want := map[string]string{
		"a.txt":   fmt.Sprintf("-rw-r--r-- %*d %s a.txt", w, 3, when),
		"big.bin": fmt.Sprintf("-rw------- %*d %s big.bin", w, 12345, when),
		"sub":     fmt.Sprintf("drwxr-xr-x %*d %s sub", w, subSize.Size(), when),
	}
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		name := line[strings.LastIndex(line, " ")+1:]
		if want[name] != line {
			t.Errorf("ls line %q, want %q", line, want[name])
		}
		delete(want, name)
	}
	if len(want) != 0 {
		t.Errorf("ls output lacks %v:\n%s", want, out.String())
	}
	os.Remove(filepath.Join(root, "d/big.bin"))
	if err := c.mv(context.Background(), "d/a.txt", "d/b.txt", false); err != nil {
		t.Fatal(err)
	}
	var prompt bytes.Buffer
	if err := c.rm(context.Background(), strings.NewReader("n\n"), &prompt, []string{"d"}, true, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "d/b.txt")); err != nil || !strings.Contains(prompt.String(), "3 entries") {
		t.Fatalf("declined rm deleted or prompt wrong: %q", prompt.String())
	}
	if err := c.rm(context.Background(), strings.NewReader("y\n"), &prompt, []string{"d"}, true, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "d")); !os.IsNotExist(err) {
		t.Error("rm did not delete")
	}
}
