package fs

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestMountsLocal(t *testing.T) {
	const base = "22 27 0:21 / /proc rw,relatime - proc proc rw\n" +
		"30 27 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
	cases := []struct {
		name  string
		extra string
		roots []string
		want  bool
	}{
		{"no mount under the root", "", []string{"/data"}, true},
		{"local mount under the root", "40 30 0:50 / /data/tmp rw - tmpfs tmpfs rw\n", []string{"/data"}, true},
		{"nfs under the root", "40 30 0:50 / /data/x/y rw - nfs4 srv:/e rw\n", []string{"/data"}, false},
		{"nfs on the root itself", "40 30 0:50 / /data rw - nfs srv:/e rw\n", []string{"/srv", "/data"}, false},
		{"fuse beside the root, sharing a prefix", "40 30 0:50 / /database rw - fuse.sshfs h: rw\n", []string{"/data"}, true},
		{"escaped space in the mount point", `40 30 0:50 / /data\040x rw - nfs srv:/e rw` + "\n", []string{"/data x"}, false},
		{"the root /: proc lies under it", "", []string{"/"}, false},
		{"optional fields before the separator", "40 30 0:50 / /data/n rw shared:1 master:2 - cifs //h/s rw\n", []string{"/data"}, false},
		{"malformed line", "40 30 0:50\n", []string{"/data"}, false},
		{"bad escape", `40 30 0:50 / /data\04 rw - tmpfs t rw` + "\n", []string{"/data"}, false},
	}
	for _, c := range cases {
		if got := mountsLocal(base+c.extra, c.roots); got != c.want {
			t.Errorf("%s: mountsLocal = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestInlineLocal: on a local root, fs.open runs on the caller's
// goroutine; mutations, handle requests and requests under a test hook
// (standing for a slow filesystem) never do.
func TestInlineLocal(t *testing.T) {
	e := newEnv(t, []node{{path: "root/a", file: "1"}}, "root")
	var sfs unix.Statfs_t
	if err := unix.Statfs(e.f.roots[0].canon, &sfs); err != nil || !localMagics[int64(sfs.Type)] {
		t.Skipf("temp dir is not on a local filesystem (type %#x)", sfs.Type)
	}
	if _, perr := e.call("fs.open", map[string]any{"path": "a"}, nil); perr != nil {
		t.Fatal(perr)
	}
	if n := e.f.inlined.Load(); n != 1 {
		t.Fatalf("inlined after one open = %d, want 1", n)
	}
	if _, perr := e.call("fs.mkdirs", map[string]any{"path": "d"}, nil); perr != nil {
		t.Fatal(perr)
	}
	e.f.testHook = func(string) {}
	if _, perr := e.call("fs.open", map[string]any{"path": "a"}, nil); perr != nil {
		t.Fatal(perr)
	}
	if n := e.f.inlined.Load(); n != 1 {
		t.Fatalf("inlined after a mkdir and a hooked open = %d, want 1", n)
	}
}

// TestInlineNotOnProc: a root on a filesystem outside the local set
// (procfs here) keeps every request on its goroutine.
func TestInlineNotOnProc(t *testing.T) {
	f, err := New(Config{Roots: []string{"/proc/self"}, Home: "/proc/self"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.local.inline() {
		t.Fatal("a procfs root runs inline")
	}
}

// TestInlineMountWatch mounts a procfs under a root in a private mount
// namespace (a child process; needs CAP_SYS_ADMIN, skipped without): the
// family stops running requests inline while the mount is there, and
// starts again once it is gone.
func TestInlineMountWatch(t *testing.T) {
	if dir := os.Getenv("LEMON_FS_MOUNTWATCH"); dir != "" {
		mountWatchChild(t, dir)
		return
	}
	dir := canonTemp(t)
	if err := os.Mkdir(filepath.Join(dir, "m"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestInlineMountWatch$", "-test.v")
	cmd.Env = append(os.Environ(), "LEMON_FS_MOUNTWATCH="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil {
		if os.Geteuid() != 0 {
			t.Skipf("no private mount namespace: %v", err)
		}
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

func mountWatchChild(t *testing.T, dir string) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		t.Skipf("mount private: %v", err)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil || !localMagics[int64(sfs.Type)] {
		t.Skipf("temp dir is not on a local filesystem (type %#x)", sfs.Type)
	}
	f, err := New(Config{Roots: []string{dir}, Home: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.local.inline() {
		t.Fatal("before the mount: not inline")
	}
	m := filepath.Join(dir, "m")
	if err := unix.Mount("proc", m, "proc", 0, ""); err != nil {
		t.Skipf("mount proc: %v", err)
	}
	if f.local.inline() {
		unix.Unmount(m, 0)
		t.Fatal("with a procfs under the root: inline")
	}
	if err := unix.Unmount(m, 0); err != nil {
		t.Fatal(err)
	}
	if !f.local.inline() {
		t.Fatal("after the unmount: not inline")
	}
}

// TestReadBoundedLimit: a mount table of maxMountinfo bytes is read, one
// byte more is refused (the family then never runs inline).
func TestReadBoundedLimit(t *testing.T) {
	for _, c := range []struct {
		size int
		ok   bool
	}{{maxMountinfo, true}, {maxMountinfo + 1, false}} {
		p := filepath.Join(t.TempDir(), "mi")
		if err := os.WriteFile(p, make([]byte, c.size), 0o600); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		buf, ok := readBounded(fd, maxMountinfo)
		unix.Close(fd)
		if ok != c.ok || (ok && len(buf) != c.size) {
			t.Errorf("size %d: ok %v len %d, want ok %v", c.size, ok, len(buf), c.ok)
		}
	}
}

// TestInlinePollFailures: an interrupted mount-table poll (EINTR, which
// the runtime's preemption signal causes now and then) is retried and
// does not turn inline requests off; any other poll failure answers false
// once, and the next check re-reads the table and decides afresh.
func TestInlinePollFailures(t *testing.T) {
	e := newEnv(t, []node{{path: "root/a", file: "1"}}, "root")
	if !e.f.local.inline() {
		t.Skip("temp dir is not on a local filesystem")
	}
	real := poll
	defer func() { poll = real }()
	fail := []error{unix.EINTR, unix.EINTR}
	poll = func(fds []unix.PollFd, timeout int) (int, error) {
		if len(fail) > 0 {
			err := fail[0]
			fail = fail[1:]
			return -1, err
		}
		return real(fds, timeout)
	}
	if !e.f.local.inline() {
		t.Fatal("an interrupted poll turned inline requests off")
	}
	fail = []error{unix.EIO}
	if e.f.local.inline() {
		t.Fatal("a failed poll answered inline")
	}
	for i := 0; i < 3; i++ {
		if !e.f.local.inline() {
			t.Fatalf("check %d after a failed poll: still off", i)
		}
	}
}
