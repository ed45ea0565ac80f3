package fs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"lemon/protocol"
)

// enospcChildEnv marks the re-executed test binary that runs the tmpfs
// part of TestWriteENOSPCLeavesFileUnchanged in its own mount namespace.
const enospcChildEnv = "LEMON_FS_TEST_ENOSPC_CHILD"

// TestWriteENOSPCLeavesFileUnchanged is issue 9's input on a full
// filesystem: a 64 KiB tmpfs as the allowed root, a 4 KiB file f, then
// 4 KiB files until the root is full, then a compare-and-swap write of
// 8 KiB over f with f's revision. The write is UNAVAILABLE
// filesystem_error with no outcome flags, and it is true: f keeps its
// bytes, its size and its exact mtime, so the same revision still
// applies once space is freed. The tmpfs needs root and a private mount
// namespace, so the test re-executes itself with CLONE_NEWNS and mounts
// the tmpfs there (the mount vanishes with the child).
func TestWriteENOSPCLeavesFileUnchanged(t *testing.T) {
	if os.Getenv(enospcChildEnv) != "" {
		t.Skip("the child runs TestWriteENOSPCChild only")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a 64 KiB tmpfs in a private mount namespace (CI runs as root)")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWriteENOSPCChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), enospcChildEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil {
		if cmd.ProcessState == nil {
			t.Skipf("cannot start a child in a new mount namespace (unshare not permitted?): %v", err)
		}
		t.Fatalf("child failed: %v\n%s", err, out)
	}
	switch {
	case bytes.Contains(out, []byte("--- SKIP: TestWriteENOSPCChild")):
		t.Skipf("child skipped:\n%s", out)
	case !bytes.Contains(out, []byte("--- PASS: TestWriteENOSPCChild")):
		t.Fatalf("child did not run the test:\n%s", out)
	}
	t.Logf("child:\n%s", out)
}

// TestWriteENOSPCChild is the tmpfs part of
// TestWriteENOSPCLeavesFileUnchanged; it runs only in the child.
func TestWriteENOSPCChild(t *testing.T) {
	if os.Getenv(enospcChildEnv) == "" {
		t.Skip("runs only in the child of TestWriteENOSPCLeavesFileUnchanged")
	}
	mnt := filepath.Join(canonTemp(t), "root")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	f, err := New(Config{Roots: []string{mnt}, DefaultCwd: mnt, Home: mnt})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	old := bytes.Repeat([]byte("o"), 4096)
	if _, err := f.Write(protocol.FSWriteCall{Path: "f", Truncate: true}, old); err != nil {
		t.Fatalf("write f: %v", err)
	}
	// A sparse 16 KiB file (no blocks): writing into its holes needs space
	// although it does not grow the file.
	sp, err := f.Write(protocol.FSWriteCall{Path: "sparse", Offset: 16384, Truncate: true}, nil)
	if err != nil {
		t.Fatalf("write sparse: %v", err)
	}
	full := false
	for i := 0; i < 64 && !full; i++ {
		_, err := f.Write(protocol.FSWriteCall{Path: "g" + string(rune('a'+i/26)) + string(rune('a'+i%26)), Truncate: true}, make([]byte, 4096))
		if err != nil {
			if pe := protocol.AsError(err); pe.DomainCode() != protocol.DomainFilesystemError {
				t.Fatalf("filling the root: %v", err)
			}
			full = true
		}
	}
	if !full {
		t.Fatal("64 writes of 4 KiB did not fill a 64 KiB tmpfs")
	}
	st, err := f.Stat("f")
	if err != nil {
		t.Fatal(err)
	}
	var before unix.Stat_t
	if err := unix.Stat(filepath.Join(mnt, "f"), &before); err != nil {
		t.Fatal(err)
	}
	unchanged := func(what string) {
		t.Helper()
		var now unix.Stat_t
		if err := unix.Stat(filepath.Join(mnt, "f"), &now); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(filepath.Join(mnt, "f"))
		if !bytes.Equal(got, old) || now.Size != 4096 || now.Mtim != before.Mtim {
			t.Errorf("%s: f changed: %d bytes (old bytes: %v), mtime %v, was %v", what, len(got), bytes.Equal(got, old), now.Mtim, before.Mtim)
		}
	}
	noSpace := func(what string, err error) {
		t.Helper()
		pe := protocol.AsError(err)
		if err == nil || pe.Code != protocol.CodeUnavailable || pe.DomainCode() != protocol.DomainFilesystemError {
			t.Fatalf("%s: %v, want UNAVAILABLE filesystem_error", what, err)
		}
		if d := pe.Details; d.RetrySafe != nil || d.MutationMayHaveApplied != nil {
			t.Errorf("%s: outcome flags %+v on a write that changed nothing", what, d)
		}
	}

	// The reported case: 8 KiB over f at offset 0, truncate, f's revision.
	newBytes := bytes.Repeat([]byte("n"), 8192)
	_, err = f.Write(protocol.FSWriteCall{Path: "f", Truncate: true, ExpectedModifiedAtMs: ptr(st.MtimeMs)}, newBytes)
	noSpace("8 KiB over f", err)
	unchanged("8 KiB over f")
	// An append that grows f (the lemon fs put pattern), and a write that
	// keeps the suffix.
	_, err = f.Write(protocol.FSWriteCall{Path: "f", Offset: 4096, Truncate: true, ExpectedModifiedAtMs: ptr(st.MtimeMs)}, newBytes)
	noSpace("append 8 KiB to f", err)
	unchanged("append 8 KiB to f")
	_, err = f.Write(protocol.FSWriteCall{Path: "f", Offset: 2048, ExpectedModifiedAtMs: ptr(st.MtimeMs)}, newBytes)
	noSpace("8 KiB at offset 2048 of f", err)
	unchanged("8 KiB at offset 2048 of f")
	var spBefore unix.Stat_t
	unix.Stat(filepath.Join(mnt, "sparse"), &spBefore)
	_, err = f.Write(protocol.FSWriteCall{Path: "sparse", ExpectedModifiedAtMs: ptr(sp.MtimeMs)}, newBytes)
	noSpace("8 KiB into the holes of sparse", err)
	var spNow unix.Stat_t
	unix.Stat(filepath.Join(mnt, "sparse"), &spNow)
	if got, _ := os.ReadFile(filepath.Join(mnt, "sparse")); !bytes.Equal(got, make([]byte, 16384)) || spNow.Mtim != spBefore.Mtim {
		t.Errorf("sparse changed: mtime %v, was %v", spNow.Mtim, spBefore.Mtim)
	}
	// A new file that does not fit is not left behind.
	_, err = f.Write(protocol.FSWriteCall{Path: "new", Truncate: true}, newBytes)
	noSpace("new 8 KiB file", err)
	if _, err := os.Lstat(filepath.Join(mnt, "new")); !os.IsNotExist(err) {
		t.Errorf("the failed create left new behind: %v", err)
	}

	// The revision is still f's: once a 4 KiB file is removed, the same
	// write applies.
	if err := os.Remove(filepath.Join(mnt, "gaa")); err != nil {
		t.Fatal(err)
	}
	r, err := f.Write(protocol.FSWriteCall{Path: "f", Truncate: true, ExpectedModifiedAtMs: ptr(st.MtimeMs)}, newBytes)
	if err != nil {
		t.Fatalf("the same write after freeing 4 KiB: %v", err)
	}
	got, _ := os.ReadFile(filepath.Join(mnt, "f"))
	if r.Size != 8192 || r.MtimeMs <= st.MtimeMs || !bytes.Equal(got, newBytes) {
		t.Errorf("after freeing space: %+v, %d bytes, new bytes %v", r, len(got), bytes.Equal(got, newBytes))
	}

	// Where fallocate is missing (skipReserve stands in for such a
	// filesystem) the answer is still true. An append that fails before
	// its first byte leaves f as it was (the mtime the failed pwrite
	// advanced is set back), so it carries no flags; an overwrite that
	// fails after some bytes says it may have applied.
	skipReserve.Store(true)
	defer skipReserve.Store(false)
	var cur unix.Stat_t
	if err := unix.Stat(filepath.Join(mnt, "f"), &cur); err != nil {
		t.Fatal(err)
	}
	_, err = f.Write(protocol.FSWriteCall{Path: "f", Offset: 8192, Truncate: true, ExpectedModifiedAtMs: ptr(r.MtimeMs)}, newBytes)
	noSpace("unreserved append", err)
	var now unix.Stat_t
	if err := unix.Stat(filepath.Join(mnt, "f"), &now); err != nil || now.Size != 8192 || now.Mtim != cur.Mtim {
		t.Errorf("unreserved append changed f: size %d mtime %v, was %v (%v)", now.Size, now.Mtim, cur.Mtim, err)
	}
	_, err = f.Write(protocol.FSWriteCall{Path: "f", Truncate: true, ExpectedModifiedAtMs: ptr(r.MtimeMs)}, bytes.Repeat([]byte("m"), 12288))
	pe := protocol.AsError(err)
	if err == nil || pe.DomainCode() != protocol.DomainFilesystemError || pe.Details.RetrySafe == nil || *pe.Details.RetrySafe ||
		pe.Details.MutationMayHaveApplied == nil || !*pe.Details.MutationMayHaveApplied {
		t.Errorf("unreserved overwrite that failed mid-way: %+v, want filesystem_error retrySafe:false mutationMayHaveApplied:true", pe)
	}
}
