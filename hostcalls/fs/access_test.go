package fs

import (
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"

	"lemon/protocol"
)

// TestStatImmutableFileIsNotWritable is issue 9's input: `chattr +i f`,
// then node.fs.stat f. The kernel refuses writes to an immutable file even
// to root (faccessat2 answers EPERM), so writable is false, matching the
// write that is refused; mode bits (0644, owner root) would say writable.
// The listing entry says the same. Needs root and a filesystem with the
// immutable flag (the temp dir's).
func TestStatImmutableFileIsNotWritable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chattr +i needs root (CAP_LINUX_IMMUTABLE); run as root to cover the immutable flag")
	}
	chattr, err := exec.LookPath("chattr")
	if err != nil {
		t.Skip("chattr is not installed")
	}
	e := newEnv(t, []node{{path: "root/f", file: "hello"}}, "root")
	if out, err := exec.Command(chattr, "+i", e.abs("root/f")).CombinedOutput(); err != nil {
		t.Skipf("the temp dir's filesystem does not support chattr +i: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command(chattr, "-i", e.abs("root/f")).Run() })

	// The kernel's own answer, for the record of what the test relies on.
	if err := unix.Faccessat2(unix.AT_FDCWD, e.abs("root/f"), unix.W_OK, unix.AT_EACCESS); err != unix.EPERM {
		t.Fatalf("faccessat2(W_OK) on an immutable file = %v, want EPERM", err)
	}
	st, err := e.f.Stat("f")
	if err != nil {
		t.Fatal(err)
	}
	if st.Writable || !st.Readable {
		t.Errorf("immutable f: readable %v writable %v, want true false", st.Readable, st.Writable)
	}
	l, err := e.f.List(".", false)
	if err != nil || len(l.Entries) != 1 || l.Entries[0].FSEntryStat == nil {
		t.Fatalf("list: %+v %v", l, err)
	}
	if en := l.Entries[0]; en.Writable || !en.Readable {
		t.Errorf("immutable f listed: readable %v writable %v, want true false", en.Readable, en.Writable)
	}
	_, err = e.f.Write(protocol.FSWriteCall{Path: "f", Truncate: true, ExpectedModifiedAtMs: ptr(st.MtimeMs)}, []byte("x"))
	if domain(err) != protocol.DomainPermissionDenied {
		t.Errorf("write to immutable f: %v, want permission_denied", err)
	}
	if e.content("root/f") != "hello" {
		t.Errorf("immutable f changed: %q", e.content("root/f"))
	}

	// Without the flag the same file is writable again.
	if out, err := exec.Command(chattr, "-i", e.abs("root/f")).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i: %v %s", err, out)
	}
	if st, err := e.f.Stat("f"); err != nil || !st.Writable {
		t.Errorf("after chattr -i: %+v %v", st, err)
	}
}

// TestStatRootAccessIsChecked: an allowed root is checked relative to its
// pinned O_PATH descriptor (name "."), which faccessat2 accepts; a failed
// check there would show the worker's own root as unreadable.
func TestStatRootAccessIsChecked(t *testing.T) {
	e := newEnv(t, nil, "root")
	if err := os.Chmod(e.abs("root"), 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := e.f.Stat(e.abs("root"))
	if err != nil || st.Type != "directory" || !st.Readable || !st.Writable {
		t.Fatalf("root stat %+v %v, want a readable, writable directory", st, err)
	}
}
