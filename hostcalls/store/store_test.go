package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lemon/hostcalls"
	"lemon/protocol"
)

type fakeCall struct{ module string }

func (f fakeCall) Module() string                   { return f.module }
func (f fakeCall) Method() string                   { return "node.test" }
func (f fakeCall) Invocation() hostcalls.Invocation { return hostcalls.Invocation{} }
func (f fakeCall) Blob(uint32) ([]byte, bool)       { return nil, false }
func (f fakeCall) PutBlob([]byte) uint32            { return 0 }
func (f fakeCall) Await(<-chan struct{}) uint32     { return 0 }

func open(t *testing.T, path string, maxKeys int) *Store {
	t.Helper()
	s, err := New(Config{Path: path, MaxKeys: maxKeys, LockTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func call(t *testing.T, s *Store, module, name string, args any) (map[string]any, *protocol.Error) {
	t.Helper()
	var hc *hostcalls.HostCall
	tbl := s.Table()
	for i := range tbl {
		if tbl[i].Name == name {
			hc = &tbl[i]
		}
	}
	if hc == nil {
		t.Fatalf("no host call %s", name)
	}
	raw, _ := json.Marshal(args)
	out, err := hc.JSONFunc()(context.Background(), fakeCall{module}, raw)
	if err != nil {
		return nil, protocol.AsError(err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("result %s: %v", out, err)
	}
	return m, nil
}

func TestDurableAcrossReopenAndModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(dir, "node.db")
	s := open(t, path, 0)
	ns, err := s.Namespace("spawn")
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Update(func(tx *Tx) error { return tx.Put("r/a", []byte("one")) }); err != nil {
		t.Fatal(err)
	}
	if _, e := call(t, s, "fs", "store.put", map[string]any{"key": "k", "value": map[string]int{"n": 1}}); e != nil {
		t.Fatal(e)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(dir)
	if st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v", st.Mode().Perm())
	}
	st, _ = os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v", st.Mode().Perm())
	}
	s = open(t, path, 0)
	defer s.Close()
	ns, _ = s.Namespace("spawn")
	var got []byte
	ns.View(func(tx *Tx) error { got, _ = tx.Get("r/a"); return nil })
	if string(got) != "one" {
		t.Fatalf("after reopen %q", got)
	}
	m, e := call(t, s, "fs", "store.get", map[string]any{"key": "k"})
	if e != nil || m["found"] != true || m["value"].(map[string]any)["n"] != 1.0 {
		t.Fatalf("guest value after reopen %v %v", m, e)
	}
}

func TestSecondOpenFailsWhileLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.db")
	s := open(t, path, 0)
	defer s.Close()
	if _, err := New(Config{Path: path, LockTimeout: 50 * time.Millisecond}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("second open: %v", err)
	}
}

func TestNamespacesAreIsolated(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "node.db"), 0)
	defer s.Close()
	host, _ := s.Namespace("process")
	host.Update(func(tx *Tx) error { return tx.Put("k", []byte(`"host"`)) })
	call(t, s, "process", "store.put", map[string]any{"key": "k", "value": "guest-process"})
	call(t, s, "fs", "store.put", map[string]any{"key": "k", "value": "guest-fs"})
	m, _ := call(t, s, "process", "store.get", map[string]any{"key": "k"})
	if m["value"] != "guest-process" {
		t.Fatalf("process module sees %v", m["value"])
	}
	m, _ = call(t, s, "fs", "store.get", map[string]any{"key": "k"})
	if m["value"] != "guest-fs" {
		t.Fatalf("fs module sees %v", m["value"])
	}
	var hv []byte
	host.View(func(tx *Tx) error { hv, _ = tx.Get("k"); return nil })
	if string(hv) != `"host"` {
		t.Fatalf("host namespace holds %q", hv)
	}
	if _, err := s.Namespace("a/b"); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("bad name accepted: %v", err)
	}
	if _, err := s.Namespace(strings.Repeat("a", 65)); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("long name accepted: %v", err)
	}
}

func TestUpdateErrorRollsBack(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "node.db"), 0)
	defer s.Close()
	ns, _ := s.Namespace("x")
	boom := errors.New("boom")
	err := ns.Update(func(tx *Tx) error {
		tx.Put("a", []byte("1"))
		return boom
	})
	if err != boom {
		t.Fatalf("got %v", err)
	}
	var found bool
	ns.View(func(tx *Tx) error { _, found = tx.Get("a"); return nil })
	if found {
		t.Fatal("write of a failed transaction is visible")
	}
	if err := ns.View(func(tx *Tx) error { return tx.Put("b", nil) }); err == nil {
		t.Fatal("write in View succeeded")
	}
}

func TestGuestCalls(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "node.db"), 3)
	defer s.Close()
	if m, e := call(t, s, "m", "store.get", map[string]any{"key": "none"}); e != nil || m["found"] != false || m["value"] != nil {
		t.Fatalf("absent get %v %v", m, e)
	}
	if _, e := call(t, s, "m", "store.create", map[string]any{"key": "a", "value": 1}); e != nil {
		t.Fatal(e)
	}
	if _, e := call(t, s, "m", "store.create", map[string]any{"key": "a", "value": 2}); e == nil || e.Code != protocol.CodeConflict || e.DomainCode() != protocol.DomainAlreadyExists {
		t.Fatalf("create over existing: %v", e)
	}
	m, _ := call(t, s, "m", "store.get", map[string]any{"key": "a"})
	if m["value"] != 1.0 {
		t.Fatalf("create replaced the value: %v", m)
	}
	call(t, s, "m", "store.put", map[string]any{"key": "b", "value": true})
	call(t, s, "m", "store.put", map[string]any{"key": "c", "value": "x"})
	// MaxKeys 3: a fourth key is refused, replacing an existing key is not.
	if _, e := call(t, s, "m", "store.put", map[string]any{"key": "d", "value": 1}); e == nil || e.DomainCode() != DomainStoreFull {
		t.Fatalf("fourth key: %v", e)
	}
	if _, e := call(t, s, "m", "store.put", map[string]any{"key": "c", "value": "y"}); e != nil {
		t.Fatalf("replace at capacity: %v", e)
	}
	m, _ = call(t, s, "m", "store.list", map[string]any{"prefix": "", "limit": 2})
	if fmt.Sprint(m["keys"]) != "[a b]" || m["more"] != true {
		t.Fatalf("list page 1 %v", m)
	}
	m, _ = call(t, s, "m", "store.list", map[string]any{"prefix": "", "after": "b", "limit": 2})
	if fmt.Sprint(m["keys"]) != "[c]" || m["more"] != false {
		t.Fatalf("list page 2 %v", m)
	}
	if m, e := call(t, s, "m", "store.delete", map[string]any{"key": "a"}); e != nil || m["deleted"] != true {
		t.Fatalf("delete %v %v", m, e)
	}
	if m, _ := call(t, s, "m", "store.delete", map[string]any{"key": "a"}); m["deleted"] != false {
		t.Fatalf("second delete %v", m)
	}
}

func TestGuestLimits(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "node.db"), 0)
	defer s.Close()
	big := strings.Repeat("v", MaxValueBytes-2) // JSON string of exactly 65536 bytes
	cases := []struct {
		name  string
		call  string
		args  map[string]any
		field string // "" means accepted
	}{
		{"key 512", "store.put", map[string]any{"key": strings.Repeat("k", 512), "value": 1}, ""},
		{"key 513", "store.put", map[string]any{"key": strings.Repeat("k", 513), "value": 1}, "key"},
		{"key empty", "store.get", map[string]any{"key": ""}, "key"},
		{"key NUL", "store.get", map[string]any{"key": "a\x00"}, "key"},
		{"value 65536", "store.put", map[string]any{"key": "v", "value": big}, ""},
		{"value 65537", "store.put", map[string]any{"key": "v", "value": big + "v"}, "value"},
		{"value missing", "store.put", map[string]any{"key": "v"}, "value"},
		{"unknown field", "store.get", map[string]any{"key": "v", "ns": "other"}, "ns"},
		{"list limit 1000", "store.list", map[string]any{"prefix": "", "limit": 1000}, ""},
		{"list limit 1001", "store.list", map[string]any{"prefix": "", "limit": 1001}, "limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, e := call(t, s, "m", c.call, c.args)
			if c.field == "" {
				if e != nil {
					t.Fatalf("rejected: %v", e)
				}
				return
			}
			if e == nil || e.Code != protocol.CodeInvalidParams || e.Details.Field != c.field {
				t.Fatalf("got %v, want INVALID_PARAMS %s", e, c.field)
			}
		})
	}
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "node.db"), 0)
	ns, _ := s.Namespace("x")
	s.Close()
	if err := ns.Update(func(tx *Tx) error { return tx.Put("a", nil) }); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("update after close: %v", err)
	}
	if _, e := call(t, s, "m", "store.get", map[string]any{"key": "a"}); e == nil || e.DomainCode() != DomainStoreUnavailable || strings.Contains(e.Message, "/") {
		t.Fatalf("guest get after close: %v", e)
	}
}

func TestTableDeclared(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "node.db"), 0)
	defer s.Close()
	for _, hc := range s.Table() {
		if !strings.HasPrefix(hc.Name, "store.") || hc.Func == nil || hc.Capability == "" || hc.Audit == "" || len(hc.Params) == 0 {
			t.Errorf("incomplete declaration %+v", hc)
		}
	}
}

func TestSecondOpenSaysInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := New(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = New(Config{Path: path, LockTimeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrInUse) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("second open: %v", err)
	}
}
