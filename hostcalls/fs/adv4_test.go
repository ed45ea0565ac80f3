package fs

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gorilla/websocket"

	"lemon/hostcalls/contract"
	"lemon/hostcalls/datadial"
	"lemon/protocol"
)

// TestAdv4TransferModeNoSetuid: a put (raw protocol, not the CLI, which
// sends only permission bits) may not create a setuid or setgid file on
// the node, single or in a tree; 0o1777 (sticky, the highest allowed
// mode) passes, 0o2000 and 0o4000 are refused before any data moves.
func TestAdv4TransferModeNoSetuid(t *testing.T) {
	for m, ok := range map[uint32]bool{0o1777: true, 0o2000: false, 0o4755: false, 0o6777: false, 0o10000: false} {
		params, _ := json.Marshal(protocol.FSTransferPutParams{NodeID: "node-1", Path: "f", Size: 1, Mode: m,
			TransferKey: ticket})
		if e := protocol.ValidateFSTransferPut(params); (e == nil) != ok {
			t.Errorf("controller validation of mode %#o: %v, want ok=%v", m, e, ok)
		}
	}
	e := newEnv(t, nil, "root")
	root := filepath.Join(e.tmp, "root")
	data := []byte("x")
	r, err := e.f.Receive(withCaller(t, putScript(data, sumHex(data), nil)),
		contract.FSReceiveArgs{Path: "sticky", Size: 1, Mode: 0o1777, DataTicket: ticket})
	if err != nil || r == nil {
		t.Fatalf("mode 0o1777: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(root, "sticky")); fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 || fi.Mode().Perm() != 0o777 {
		t.Fatalf("mode 0o1777 gave %v", fi.Mode())
	}
	dialled := false
	noDial := datadial.WithDataDialer(context.Background(), func(context.Context, string) (*websocket.Conn, error) {
		dialled = true
		return nil, os.ErrClosed
	})
	for _, m := range []uint32{0o4755, 0o2755} {
		_, err := e.f.Receive(noDial, contract.FSReceiveArgs{Path: "suid", Size: 1, Mode: m, DataTicket: ticket})
		if protocol.AsError(err).Code != protocol.CodeInvalidParams || dialled {
			t.Errorf("mode %#o: %v (dialled %v), want invalid_params before any data connection", m, err, dialled)
		}
	}
	// A tree entry asking for setuid is refused, and nothing lands.
	treeScript := func(ws *websocket.Conn) {
		var hello protocol.TransferHello
		if readText(ws, &hello) != nil {
			return
		}
		b, _ := json.Marshal(protocol.TransferEntry{Name: "bin/suid", Size: 1, Mode: 0o4755})
		ws.WriteMessage(websocket.TextMessage, b)
		ws.WriteMessage(websocket.BinaryMessage, data)
		b, _ = json.Marshal(protocol.TransferEntry{SHA256: sumHex(data)})
		ws.WriteMessage(websocket.TextMessage, b)
		b, _ = json.Marshal(protocol.TransferEntry{Done: true})
		ws.WriteMessage(websocket.TextMessage, b)
		ws.ReadMessage()
	}
	if _, err := e.f.Receive(withCaller(t, treeScript), contract.FSReceiveArgs{Path: "tree", Tree: true, DataTicket: ticket}); err == nil {
		t.Fatal("a tree entry with mode 0o4755 was accepted")
	}
	if _, err := os.Lstat(filepath.Join(root, "tree", "bin", "suid")); !os.IsNotExist(err) {
		t.Fatalf("a setuid tree entry landed: %v", err)
	}
}

// TestAdv4TransferMtimeExtremes: a put of a file from before 1970
// (negative mtimeMs) lands with that mtime instead of being refused, at
// the bound -FSMaxOffset the params pass and one past they are refused,
// and the largest mtime does not overflow into a wrong one.
func TestAdv4TransferMtimeExtremes(t *testing.T) {
	for m, ok := range map[int64]bool{-protocol.FSMaxOffset: true, -protocol.FSMaxOffset - 1: false,
		protocol.FSMaxOffset: true, protocol.FSMaxOffset + 1: false, -1: true} {
		params, _ := json.Marshal(protocol.FSTransferPutParams{NodeID: "node-1", Path: "f", Size: 1, MtimeMs: m,
			TransferKey: ticket})
		if e := protocol.ValidateFSTransferPut(params); (e == nil) != ok {
			t.Errorf("mtimeMs %d: %v, want ok=%v", m, e, ok)
		}
	}
	if ts := msTimespec(-1); ts.Sec != -1 || ts.Nsec != 999_000_000 {
		t.Errorf("msTimespec(-1) = %+v", ts)
	}
	if ts := msTimespec(protocol.FSMaxOffset); ts.Sec != protocol.FSMaxOffset/1000 || ts.Nsec != 991_000_000 {
		t.Errorf("msTimespec(max) = %+v", ts)
	}
	e := newEnv(t, nil, "root")
	root := filepath.Join(e.tmp, "root")
	data := []byte("x")
	const old = -86_400_123 // 1969-12-30T23:59:59.877Z
	if _, err := e.f.Receive(withCaller(t, putScript(data, sumHex(data), nil)),
		contract.FSReceiveArgs{Path: "old", Size: 1, MtimeMs: old, DataTicket: ticket}); err != nil {
		t.Fatalf("put with mtimeMs %d: %v", old, err)
	}
	if fi, err := os.Stat(filepath.Join(root, "old")); err != nil || fi.ModTime().UnixMilli() != old {
		t.Fatalf("mtime after put: %v %v, want %d", fi.ModTime().UnixMilli(), err, old)
	}
}
