package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"lemon/client"
	"lemon/client/fakecontrol"
	"lemon/client/transfer"
	hfs "lemon/hostcalls/fs"
	"lemon/protocol"
)

// The hints of a failed single-file transfer: --resume only when a part
// file exists (a get's local one, a put that had sent bytes), none for
// transfer_not_routed, --overwrite on a put's already_exists, and what an
// interrupt left instead of "context canceled" (docs/FS.md, "From the CLI").
func TestTransferErrorHints(t *testing.T) {
	offline := protocol.DomainError(protocol.CodeUnavailable, protocol.DomainNodeOffline, "node is offline")
	if got := transferError(offline, "put", "", 0); got != error(offline) {
		t.Fatalf("put, nothing sent: %v", got)
	}
	if got := transferError(offline, "put", "", 5).Error(); got != offline.Error()+" (rerun with --resume to continue)" {
		t.Fatalf("put, bytes sent: %q", got)
	}
	local := filepath.Join(t.TempDir(), "x.bin")
	if got := transferError(offline, "get", local, 0); got != error(offline) {
		t.Fatalf("get, no part file: %v", got)
	}
	if err := os.WriteFile(transfer.LocalPart(local), []byte("ab"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := transferError(offline, "get", local, 0).Error(); got != offline.Error()+" (rerun with --resume to continue)" {
		t.Fatalf("get, part file: %q", got)
	}
	nr := protocol.DomainError(protocol.CodeUnavailable, protocol.DomainTransferNotRouted, "held by controller b")
	if got := transferError(nr, "put", "", 5); got != error(nr) {
		t.Fatalf("not routed: %v", got)
	}
	ex := protocol.DomainError(protocol.CodeConflict, protocol.DomainAlreadyExists, "destination already exists")
	if got := transferError(ex, "put", "", 0).Error(); got != "CONFLICT (already_exists): destination already exists: pass --overwrite to replace it" {
		t.Fatalf("already exists: %q", got)
	}
	for _, c := range []struct {
		cmd   string
		moved int64
		want  string
	}{
		{"get", 10, "interrupted; the partial download was removed"},
		{"put", 10, "interrupted; the part file stays on the node: rerun with --resume"},
		{"put", 0, "interrupted; nothing was sent"},
	} {
		got := transferError(context.Canceled, c.cmd, local, c.moved)
		if got.Error() != c.want || !errors.Is(got, context.Canceled) {
			t.Fatalf("%s interrupted: %q", c.cmd, got)
		}
	}
}

// get into a missing local directory names that directory, not the part
// file; put onto an existing remote directory goes to DIR/NAME, as get
// and cp do.
func TestTransferLocalDirAndPutIntoDir(t *testing.T) {
	c, root := fsFixture(t, 0)
	if err := os.WriteFile(filepath.Join(root, "f.txt"), []byte("hi"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "rdir"), 0o700); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "nolocal", "dir")
	err := c.transfer(ctx, "get", "f.txt", filepath.Join(missing, "x.bin"), transferFlags{parallel: 4})
	if err == nil || err.Error() != "local directory "+missing+" does not exist" {
		t.Fatalf("get into a missing dir: %v", err)
	}

	// The fake node refuses the transfer itself; the path it was asked
	// for is what counts.
	f, err := hfs.New(hfs.Config{Roots: []string{root}, DefaultCwd: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var asked string
	inner := fsNode(t, f)
	srv := fakecontrol.New(fakecontrol.Options{OperatorToken: "op", Handle: func(fc *fakecontrol.Conn, req protocol.Request) (any, *protocol.Error) {
		if req.Method == protocol.MethodFSTransferPut {
			var p struct{ Path string }
			json.Unmarshal(req.Params, &p)
			asked = p.Path
			return nil, protocol.Errorf(protocol.CodeInternal, "refused")
		}
		return inner(fc, req)
	}})
	t.Cleanup(srv.Close)
	conn, err := client.Dial(ctx, srv.URL, client.Options{Token: "op"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c2 := &fsClient{conn: conn, node: "n-1"}
	src := filepath.Join(t.TempDir(), "up.bin")
	os.WriteFile(src, []byte("x"), 0o600)
	c2.transfer(ctx, "put", src, "rdir", transferFlags{parallel: 4})
	if asked != root+"/rdir/up.bin" {
		t.Fatalf("put into an existing remote dir asked for %q", asked)
	}
}
