package fs

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
	"testing"

	"github.com/gorilla/websocket"

	"lemon/hostcalls/contract"
	"lemon/hostcalls/datadial"
	"lemon/protocol"
)

// caller serves one data connection as the caller's side: the node's
// fs.send / fs.receive dials it through the context's DataDialer, and
// script talks to it.
func withCaller(t *testing.T, script func(ws *websocket.Conn)) context.Context {
	ctx, _ := withCallerWait(t, script)
	return ctx
}

// withCallerWait is withCaller, and a wait for the script to end.
func withCallerWait(t *testing.T, script func(ws *websocket.Conn)) (context.Context, func()) {
	t.Helper()
	up := websocket.Upgrader{}
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		defer close(done)
		script(ws)
	}))
	t.Cleanup(func() { srv.Close() })
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	return datadial.WithDataDialer(context.Background(), func(ctx context.Context, _ string) (*websocket.Conn, error) {
		ws, _, err := websocket.DefaultDialer.DialContext(ctx, url, nil)
		return ws, err
	}), func() { <-done }
}

var ticket = strings.Repeat("c", 64)

func sumHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func putScript(data []byte, endSum string, extra []byte) func(ws *websocket.Conn) {
	return func(ws *websocket.Conn) {
		var hello protocol.TransferHello
		if readText(ws, &hello) != nil {
			return
		}
		b, _ := json.Marshal(protocol.TransferStart{Offset: 0})
		ws.WriteMessage(websocket.TextMessage, b)
		ws.WriteMessage(websocket.BinaryMessage, append(append([]byte{}, data...), extra...))
		b, _ = json.Marshal(protocol.TransferEnd{SHA256: endSum})
		ws.WriteMessage(websocket.TextMessage, b)
		ws.ReadMessage() // until the node closes
	}
}

// TestReceiveChecksPartAndName: a put lands only after its checksum
// matched; a wrong checksum or extra bytes leave nothing at the name and
// no part file; an existing name without replace is refused before any
// byte moves; a path outside the roots is refused.
func TestReceiveChecksPartAndName(t *testing.T) {
	e := newEnv(t, []node{{path: "root/exists", file: "old"}}, "root")
	root := filepath.Join(e.tmp, "root")
	data := []byte("hello, bulk world")
	args := func(name string) contract.FSReceiveArgs {
		return contract.FSReceiveArgs{Path: name, Size: int64(len(data)), Mode: 0o640, MtimeMs: 1_600_000_000_123, DataTicket: ticket}
	}
	r, err := e.f.Receive(withCaller(t, putScript(data, sumHex(data), nil)), args("ok.txt"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(root, "ok.txt"))
	fi, _ := os.Stat(filepath.Join(root, "ok.txt"))
	if string(got) != string(data) || r.SHA256 != sumHex(data) || fi.Mode().Perm() != 0o640 || fi.ModTime().UnixMilli() != 1_600_000_000_123 {
		t.Fatalf("put: %q, result %+v, mode %v, mtime %d", got, r, fi.Mode(), fi.ModTime().UnixMilli())
	}
	for name, tc := range map[string]struct {
		ctx  context.Context
		want string
	}{
		"bad-sum.txt": {withCaller(t, putScript(data, sumHex([]byte("other")), nil)), protocol.DomainChecksumMismatch},
		"extra.txt":   {withCaller(t, putScript(data, sumHex(data), []byte("!"))), ""},
	} {
		_, err := e.f.Receive(tc.ctx, args(name))
		pe := protocol.AsError(err)
		if err == nil || tc.want != "" && pe.DomainCode() != tc.want {
			t.Errorf("%s: %v, want an error %s", name, err, tc.want)
		}
		if _, err := os.Lstat(filepath.Join(root, name)); !os.IsNotExist(err) {
			t.Errorf("%s: something is at the final name", name)
		}
		if name == "bad-sum.txt" {
			if _, err := os.Lstat(filepath.Join(root, PartName(name))); !os.IsNotExist(err) {
				t.Errorf("%s: the part file was kept after a checksum mismatch", name)
			}
		}
	}
	dialled := false
	ctx := datadial.WithDataDialer(context.Background(), func(context.Context, string) (*websocket.Conn, error) {
		dialled = true
		return nil, os.ErrClosed
	})
	// The module turns this into already_exists (plugins/fs, TestPutExpectationsThroughModule).
	if _, err := e.f.Receive(ctx, args("exists")); protocol.AsError(err).DomainCode() != contract.FSPreconditionFailed ||
		protocol.AsError(err).Details.Field != contract.FSFieldAbsent || dialled {
		t.Errorf("existing name: %v (dialled %v), want precondition_failed (absent) before any data connection", err, dialled)
	}
	if _, err := e.f.Receive(ctx, args(filepath.Join(e.tmp, "outside.txt"))); protocol.AsError(err).DomainCode() != protocol.DomainPathNotAllowed || dialled {
		t.Errorf("outside the roots: %v, want path_not_allowed", err)
	}
	if _, err := e.f.receive(ctx, args("big.txt"), int64(len(data))-1); protocol.AsError(err).DomainCode() != protocol.DomainLimitExceeded || dialled {
		t.Errorf("one byte over max_file_bytes: %v, want limit_exceeded", err)
	}
}

// TestTransferTextMessageBound: a text message of TransferControlMaxBytes
// is read; one byte more is refused.
func TestTransferTextMessageBound(t *testing.T) {
	for _, n := range []int{protocol.TransferControlMaxBytes, protocol.TransferControlMaxBytes + 1} {
		msg := `{"sha256":"` + strings.Repeat(" ", n-13) + `"}`
		if len(msg) != n {
			t.Fatalf("message of %d bytes, want %d", len(msg), n)
		}
		got := make(chan error, 1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer ws.Close()
			var end protocol.TransferEnd
			got <- readText(ws, &end)
		}))
		ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
		if err != nil {
			t.Fatal(err)
		}
		ws.WriteMessage(websocket.TextMessage, []byte(msg))
		err = <-got
		ws.Close()
		srv.Close()
		if (err == nil) != (n == protocol.TransferControlMaxBytes) {
			t.Errorf("%d bytes: %v", n, err)
		}
	}
}

// TestSendResume: a get from an offset checks the prefix's sha256 and
// returns the whole file's.
func TestSendResume(t *testing.T) {
	content := strings.Repeat("0123456789", 1000)
	e := newEnv(t, []node{{path: "root/f", file: content}}, "root")
	var got []byte
	script := func(ws *websocket.Conn) {
		var hello protocol.TransferHello
		if readText(ws, &hello) != nil {
			return
		}
		for {
			mt, b, err := ws.ReadMessage()
			if err != nil || mt != websocket.BinaryMessage {
				return
			}
			got = append(got, b...)
		}
	}
	ctx, wait := withCallerWait(t, script)
	r, err := e.f.Send(ctx, contract.FSSendArgs{Path: "f", Offset: 4000, PrefixSHA256: sumHex([]byte(content[:4000])), DataTicket: ticket})
	if err != nil {
		t.Fatal(err)
	}
	wait()
	if string(got) != content[4000:] || r.SHA256 != sumHex([]byte(content)) || r.Offset != 4000 {
		t.Fatalf("resumed get: %d bytes, result %+v", len(got), r)
	}
	if _, err := e.f.Send(withCaller(t, script), contract.FSSendArgs{Path: "f", Offset: 4000, PrefixSHA256: sumHex([]byte("x")), DataTicket: ticket}); protocol.AsError(err).DomainCode() != protocol.DomainResumeMismatch {
		t.Fatalf("changed prefix: %v, want resume_mismatch", err)
	}
}
