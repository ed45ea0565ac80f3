//go:build !wasip1

package fs_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"lemon/hostcalls/datadial"
	"lemon/protocol"
)

// Tests of the fs module's transfer decisions through the real host
// (docs/FS.md, "Transfers"): the module maps a put's overwrite and
// expectedModifiedAtMs to fs.receive's raw expectation and turns a
// refused one into already_exists or revision_conflict, before any byte
// moves or at the final rename.

var xferKey = strings.Repeat("a", 64)

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// caller plays the caller's side of a put's data connection: it sends
// data, runs mid (if any) before the end record, and counts its dials.
type caller struct {
	dials atomic.Int32
	ctx   context.Context
}

func newCaller(t *testing.T, data []byte, mid func()) *caller {
	t.Helper()
	c := &caller{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		if _, _, err := ws.ReadMessage(); err != nil { // hello
			return
		}
		b, _ := json.Marshal(protocol.TransferStart{Offset: 0})
		ws.WriteMessage(websocket.TextMessage, b)
		ws.WriteMessage(websocket.BinaryMessage, data)
		if mid != nil {
			mid()
		}
		b, _ = json.Marshal(protocol.TransferEnd{SHA256: sum(data)})
		ws.WriteMessage(websocket.TextMessage, b)
		ws.ReadMessage() // until the node closes
	}))
	t.Cleanup(srv.Close)
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	c.ctx = datadial.WithDataDialer(context.Background(), func(ctx context.Context, _ string) (*websocket.Conn, error) {
		c.dials.Add(1)
		ws, _, err := websocket.DefaultDialer.DialContext(ctx, url, nil)
		return ws, err
	})
	return c
}

func (f *fixture) put(t *testing.T, c *caller, args map[string]any) (json.RawMessage, *protocol.Error) {
	t.Helper()
	args["nodeId"], args["transferKey"], args["dataTicket"] = "n1", xferKey, strings.Repeat("c", 64)
	b, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(c.ctx, 20*time.Second)
	defer cancel()
	return f.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "i1", NodeID: "n1", SessionGeneration: 1,
		Method: protocol.MethodFSTransferPut, Args: b})
}

func mayHaveApplied(e *protocol.Error) bool {
	return e.Details != nil && e.Details.MutationMayHaveApplied != nil && *e.Details.MutationMayHaveApplied
}

// TestPutExpectationsThroughModule: without overwrite an existing name is
// already_exists and expectedModifiedAtMs on a missing file is
// revision_conflict, both before any data connection and saying nothing
// applied; overwrite replaces; expectedModifiedAtMs equal to the file's
// mtimeMs replaces, one ms off either way is revision_conflict after the
// transfer (mutationMayHaveApplied: the part file) and leaves the file;
// a file created during a put without overwrite is already_exists at the
// rename.
func TestPutExpectationsThroughModule(t *testing.T) {
	f := newFixture(t)
	data := []byte("new bytes")
	path := filepath.Join(f.root, "f.txt")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.UnixMilli(1_600_000_000_123)
	os.Chtimes(path, old, old)
	n := int64(len(data))

	c := newCaller(t, data, nil)
	if _, e := f.put(t, c, map[string]any{"path": "f.txt", "size": n}); e == nil || e.Code != protocol.CodeConflict ||
		e.DomainCode() != protocol.DomainAlreadyExists || mayHaveApplied(e) || c.dials.Load() != 0 {
		t.Fatalf("existing name without overwrite: %+v (dials %d)", e, c.dials.Load())
	}
	if _, e := f.put(t, c, map[string]any{"path": "missing.txt", "size": n, "expectedModifiedAtMs": 1}); e == nil ||
		e.DomainCode() != protocol.DomainRevisionConflict || mayHaveApplied(e) || c.dials.Load() != 0 {
		t.Fatalf("expectedModifiedAtMs on a missing file: %+v (dials %d)", e, c.dials.Load())
	}
	for _, exp := range []int64{old.UnixMilli() - 1, old.UnixMilli() + 1} {
		c := newCaller(t, data, nil)
		_, e := f.put(t, c, map[string]any{"path": "f.txt", "size": n, "expectedModifiedAtMs": exp})
		if e == nil || e.DomainCode() != protocol.DomainRevisionConflict || !mayHaveApplied(e) || c.dials.Load() != 1 {
			t.Fatalf("expectedModifiedAtMs %d: %+v", exp, e)
		}
		if b, _ := os.ReadFile(path); string(b) != "old" {
			t.Fatalf("a refused put changed the file: %q", b)
		}
	}
	out, e := f.put(t, newCaller(t, data, nil), map[string]any{"path": "f.txt", "size": n, "expectedModifiedAtMs": old.UnixMilli(),
		"mode": 0o600, "mtimeMs": 1_700_000_000_456})
	var r protocol.FSTransferResult
	if e != nil || json.Unmarshal(out, &r) != nil || r.Path != path || r.Size != n || r.SHA256 != sum(data) || r.Mode != 0o600 ||
		r.MtimeMs != 1_700_000_000_456 || r.Offset != 0 || strings.Contains(string(out), "files") {
		t.Fatalf("put at the expected revision: %s %+v", out, e)
	}
	if b, _ := os.ReadFile(path); string(b) != string(data) {
		t.Fatalf("after the put: %q", b)
	}
	if _, e := f.put(t, newCaller(t, []byte("third"), nil), map[string]any{"path": "f.txt", "size": 5, "overwrite": true}); e != nil {
		t.Fatalf("overwrite: %+v", e)
	}
	if b, _ := os.ReadFile(path); string(b) != "third" {
		t.Fatalf("after the overwrite: %q", b)
	}
	racer := filepath.Join(f.root, "race.txt")
	c = newCaller(t, data, func() { os.WriteFile(racer, []byte("racer"), 0o644) })
	if _, e := f.put(t, c, map[string]any{"path": "race.txt", "size": n}); e == nil || e.DomainCode() != protocol.DomainAlreadyExists ||
		!mayHaveApplied(e) || c.dials.Load() != 1 {
		t.Fatalf("a name taken during the put: %+v", e)
	}
	if b, _ := os.ReadFile(racer); string(b) != "racer" {
		t.Fatalf("the racer's file was replaced: %q", b)
	}
}

// newTreeCaller plays a put -r's caller: one file name with data.
func newTreeCaller(t *testing.T, name string, data []byte) *caller {
	t.Helper()
	c := &caller{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		if _, _, err := ws.ReadMessage(); err != nil { // hello
			return
		}
		for _, e := range []protocol.TransferEntry{{Name: name, Size: int64(len(data)), Mode: 0o644}, {SHA256: sum(data)}, {Done: true}} {
			b, _ := json.Marshal(e)
			ws.WriteMessage(websocket.TextMessage, b)
			if e.Name != "" {
				ws.WriteMessage(websocket.BinaryMessage, data)
			}
		}
		ws.ReadMessage()
	}))
	t.Cleanup(srv.Close)
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	c.ctx = datadial.WithDataDialer(context.Background(), func(ctx context.Context, _ string) (*websocket.Conn, error) {
		c.dials.Add(1)
		ws, _, err := websocket.DefaultDialer.DialContext(ctx, url, nil)
		return ws, err
	})
	return c
}

// TestPutTreeAndParamsThroughModule: a tree put onto an existing file is
// already_exists without overwrite (after the stream began and the root
// was created: retrySafe false, mutationMayHaveApplied) and replaces it
// with; the module refuses
// params the host never sees (a tree put's expectedModifiedAtMs, a get's
// offset without prefixSha256 or on a tree) before any data connection.
func TestPutTreeAndParamsThroughModule(t *testing.T) {
	f := newFixture(t)
	if err := os.MkdirAll(filepath.Join(f.root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.root, "d", "a.txt"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := []byte("tree bytes")
	_, e := f.put(t, newTreeCaller(t, "a.txt", data), map[string]any{"path": "d", "tree": true})
	if e == nil || e.DomainCode() != protocol.DomainAlreadyExists || !mayHaveApplied(e) || e.Details.RetrySafe == nil || *e.Details.RetrySafe {
		t.Fatalf("tree put onto an existing file: %+v", e)
	}
	out, e := f.put(t, newTreeCaller(t, "a.txt", data), map[string]any{"path": "d", "tree": true, "overwrite": true})
	var r protocol.FSTransferResult
	var dg protocol.TreeDigest
	dg.Add("a.txt", sum(data))
	if e != nil || json.Unmarshal(out, &r) != nil || r.Files != 1 || r.Size != int64(len(data)) || r.SHA256 != dg.Sum() ||
		r.Path != filepath.Join(f.root, "d") {
		t.Fatalf("tree put with overwrite: %s %+v", out, e)
	}
	if b, _ := os.ReadFile(filepath.Join(f.root, "d", "a.txt")); string(b) != string(data) {
		t.Fatalf("after the tree put: %q", b)
	}
	c := newCaller(t, data, nil)
	for _, tc := range []struct {
		method, field string
		args          map[string]any
	}{
		{protocol.MethodFSTransferPut, "tree", map[string]any{"path": "d", "tree": true, "expectedModifiedAtMs": 1}},
		{protocol.MethodFSTransferGet, "prefixSha256", map[string]any{"path": "d/a.txt", "offset": 1}},
		{protocol.MethodFSTransferGet, "offset", map[string]any{"path": "d", "tree": true, "offset": 1, "prefixSha256": xferKey}},
	} {
		tc.args["nodeId"], tc.args["transferKey"], tc.args["dataTicket"] = "n1", xferKey, strings.Repeat("c", 64)
		b, _ := json.Marshal(tc.args)
		_, e := f.h.Invoke(c.ctx, protocol.InvokeRequest{InvokeID: "i1", NodeID: "n1", SessionGeneration: 1, Method: tc.method, Args: b})
		if e == nil || e.Code != protocol.CodeInvalidParams || e.Details == nil || e.Details.Field != tc.field || c.dials.Load() != 0 {
			t.Errorf("%s %s: %+v, want invalid_params %s before any data connection", tc.method, b, e, tc.field)
		}
	}
}
