package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"lemon/client"
	"lemon/client/transfer"
)

// TestAdv4GetTreeLocalSymlinkEscape: `lemon fs get -r` into an existing
// local directory holding a symlink that leads out of it (link -> an
// outside directory) must not write the node's file link/planted.txt
// through that symlink: the tree is written through an os.Root of the
// local directory, so the copy fails and the outside directory is
// untouched.
func TestAdv4GetTreeLocalSymlinkEscape(t *testing.T) {
	d := startDev(t, t.TempDir())
	if err := os.MkdirAll(filepath.Join(d.cwd, "proj", "link"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.cwd, "proj", "link", "planted.txt"), []byte("from the node"), 0o644); err != nil {
		t.Fatal(err)
	}
	local := t.TempDir()
	outside := t.TempDir()
	back := filepath.Join(local, "back")
	// back exists, so the copy lands in back/proj (as cp -r).
	if err := os.MkdirAll(filepath.Join(back, "proj"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(back, "proj", "link")); err != nil {
		t.Fatal(err)
	}
	environ := env(d.op.home, "LEMON_OPERATOR_TOKEN="+d.token)
	r := run(t, local, environ, nil, "fs", "--controller", d.url, "get", "-r", d.nodeName, "proj", back)
	ents, _ := os.ReadDir(outside)
	if len(ents) != 0 {
		t.Fatalf("get -r wrote %d entries outside the local tree (first %q)", len(ents), ents[0].Name())
	}
	if r.code == 0 {
		t.Fatalf("get -r through an escaping symlink: exit 0, want a failure; stderr %s", r.stderr)
	}
}

// TestAdv4GetPartFileSymlink: a symlink planted at the name of a get's
// part file (.NAME.lemon-get, in a shared directory, say) must not be
// written through: the victim file it points at keeps its content.
func TestAdv4GetPartFileSymlink(t *testing.T) {
	d := startDev(t, t.TempDir())
	if err := os.WriteFile(filepath.Join(d.cwd, "f.txt"), []byte("from the node"), 0o644); err != nil {
		t.Fatal(err)
	}
	local := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(local, "shared")
	os.MkdirAll(shared, 0o755)
	if err := os.Symlink(victim, filepath.Join(shared, ".f.txt.lemon-get")); err != nil {
		t.Fatal(err)
	}
	environ := env(d.op.home, "LEMON_OPERATOR_TOKEN="+d.token)
	for _, extra := range [][]string{nil, {"--resume"}} {
		args := append([]string{"fs", "--controller", d.url, "get"}, extra...)
		args = append(args, d.nodeName, "f.txt", filepath.Join(shared, "f.txt"))
		r := run(t, local, environ, nil, args...)
		if b, _ := os.ReadFile(victim); string(b) != "precious" {
			t.Fatalf("get %v wrote through the part symlink: victim now %q", extra, b)
		}
		if r.code == 0 {
			t.Fatalf("get %v with a symlinked part file: exit 0, want a failure", extra)
		}
	}
}

// TestAdv4PutRacingLocalWriter: a local writer that changes the file in
// the middle of a put (same size, new bytes) must not leave a torn copy
// on the node reported as a success: the put fails with ErrChanged and
// nothing is at the remote name.
func TestAdv4PutRacingLocalWriter(t *testing.T) {
	d := startDev(t, t.TempDir())
	src := filepath.Join(t.TempDir(), "src.bin")
	pseudoRandomFile(t, src, 4<<20)
	conn, err := client.Dial(context.Background(), d.url, client.Options{Token: d.token})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tc := &transfer.Client{Conn: conn, Node: d.nodeID}
	wrote := false
	_, err = tc.Put(context.Background(), src, "dst.bin", transfer.Options{Progress: func(int64) {
		if wrote {
			return
		}
		wrote = true
		f, err := os.OpenFile(src, os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		f.WriteAt([]byte("a local writer was here"), 0)
		f.Close()
	}})
	if !errors.Is(err, transfer.ErrChanged) {
		t.Fatalf("put of a file changed mid-transfer: %v, want ErrChanged", err)
	}
	mustNotExist(t, filepath.Join(d.cwd, "dst.bin"))
}

// TestAdv4PutPre1970: `lemon fs put` of a file whose mtime is before 1970
// lands with that mtime (the fs module's declared params and the node
// accept a negative mtimeMs); it was refused as invalid_params.
func TestAdv4PutPre1970(t *testing.T) {
	d := startDev(t, t.TempDir())
	local := t.TempDir()
	src := filepath.Join(local, "old.txt")
	if err := os.WriteFile(src, []byte("punched cards"), 0o644); err != nil {
		t.Fatal(err)
	}
	mt := time.Date(1969, 7, 20, 20, 17, 40, 0, time.UTC)
	if err := os.Chtimes(src, mt, mt); err != nil {
		t.Fatal(err)
	}
	environ := env(d.op.home, "LEMON_OPERATOR_TOKEN="+d.token)
	if r := run(t, local, environ, nil, "fs", "--controller", d.url, "put", d.nodeName, src, "old.txt"); r.code != 0 {
		t.Fatalf("put of a 1969 file: exit %d %s", r.code, r.stderr)
	}
	fi, err := os.Stat(filepath.Join(d.cwd, "old.txt"))
	if err != nil || !fi.ModTime().Equal(mt) {
		t.Fatalf("node file mtime %v (%v), want %v", fi.ModTime(), err, mt)
	}
}
