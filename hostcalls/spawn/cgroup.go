package spawn

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroups is the cgroup v2 containment of runs (docs/PROCESS.md,
// "Containment"): every run gets its own cgroup <worker cgroup>/
// lemon-spawn-<hex>/run-<hex>, the process is cloned straight into it
// (clone3 CLONE_INTO_CGROUP), and the run ends by killing the whole cgroup
// and removing it. Membership is kept by the kernel: setsid, double forks
// and reparenting do not leave it.
type cgroups struct {
	mount  string // the cgroup2 mount point
	parent string // this worker's parent of the run cgroups (absolute)
	// hasKill is true when cgroup.kill exists (Linux 5.14); otherwise a
	// run is killed by freezing it and signalling each member.
	hasKill bool
}

const (
	cgParentPrefix = "lemon-spawn-"
	cgRunPrefix    = "run-"
)

var cgName = regexp.MustCompile(`^[0-9a-f]{16}$`)

func randHex8() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// cgroup2Mount finds the cgroup v2 mount point and this process's cgroup
// directory under it, from /proc/self/mountinfo and /proc/self/cgroup
// ("0::/path"). It works on unified hosts (/sys/fs/cgroup) and hybrid ones
// (/sys/fs/cgroup/unified).
func cgroup2Mount() (mount, self string, err error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", "", err
	}
	own := ""
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own = p
		}
	}
	if !strings.HasPrefix(own, "/") {
		return "", "", errors.New("spawn: no cgroup v2 membership")
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", "", err
	}
	mount, self, err = findCgroup2(string(mi), own)
	return mount, self, err
}

// findCgroup2 picks, from mountinfo text, the first cgroup2 mount whose
// root holds own (the "0::" path) and returns it with own's directory.
// A mount may show a subtree of the hierarchy (its root field); a
// container's namespace root is already "/".
func findCgroup2(mountinfo, own string) (mount, self string, err error) {
	for _, line := range strings.Split(mountinfo, "\n") {
		// id parent maj:min root mountpoint opts [optional...] - fstype source superopts
		f := strings.Fields(line)
		sep := -1
		for i, x := range f {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+1 >= len(f) || f[sep+1] != "cgroup2" {
			continue
		}
		mnt, root := unescapeMount(f[4]), unescapeMount(f[3])
		rest := own
		if root != "/" {
			var ok bool
			rest, ok = strings.CutPrefix(own, root)
			if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
				continue
			}
		}
		return mnt, filepath.Join(mnt, rest), nil
	}
	return "", "", errors.New("spawn: no cgroup2 mount shows this process's cgroup")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// newCgroups creates this worker's parent cgroup beneath its own cgroup
// and proves that a process can be cloned into a child of it. Any failure
// (no cgroup2, no write access, clone3 or CLONE_INTO_CGROUP missing)
// returns an error and nothing is left behind; the caller falls back.
//
// The parent holds no process and enables no controller, so the cgroup v2
// rule "no processes in a cgroup that distributes resources to children"
// never refuses the run cgroups beneath it.
func newCgroups() (*cgroups, error) {
	mount, own, err := cgroup2Mount()
	if err != nil {
		return nil, err
	}
	c := &cgroups{mount: mount, parent: filepath.Join(own, cgParentPrefix+randHex8())}
	err = c.probe()
	// The parent exists only while runs need it (create makes it again),
	// so a worker that never runs a process leaves no cgroup behind.
	unix.Rmdir(c.parent)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// probe clones a process into a fresh child cgroup with the exact
// SysProcAttr runs use. It execs "/dev/null/x", which the kernel refuses
// with ENOTDIR in the child: that error proves the clone into the cgroup
// succeeded (clone3 itself never returns ENOTDIR), and nothing runs.
func (c *cgroups) probe() error {
	dir, fd, err := c.create(filepath.Join(c.parent, cgRunPrefix+randHex8()))
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	defer unix.Close(fd)
	// A non-root cgroup has cgroup.kill from Linux 5.14 on.
	_, err = os.Stat(filepath.Join(dir, "cgroup.kill"))
	c.hasKill = err == nil
	_, err = os.StartProcess("/dev/null/x", []string{"x"}, &os.ProcAttr{
		Sys: &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd, Setpgid: true}})
	if errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err == nil {
		err = errors.New("spawn: cgroup probe unexpectedly started")
	}
	return err
}

// runPath names a new run cgroup (not yet created).
func (c *cgroups) runPath() string { return filepath.Join(c.parent, cgRunPrefix+randHex8()) }

// create makes the run cgroup dir (and the parent, the first time) and
// opens it for CLONE_INTO_CGROUP.
func (c *cgroups) create(dir string) (string, int, error) {
	if err := os.Mkdir(c.parent, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", -1, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", -1, err
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(dir)
		return "", -1, err
	}
	return dir, fd, nil
}

// validRunCgroup reports whether dir (read back from a record) is a run
// cgroup this package made: an absolute clean path under the cgroup2
// mount ending in lemon-spawn-<16 hex>/run-<16 hex>. A record can never
// make the worker kill another cgroup.
func validRunCgroup(mount, dir string) bool {
	if mount == "" || !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || !strings.HasPrefix(dir, mount+"/") {
		return false
	}
	run, parent := filepath.Base(dir), filepath.Base(filepath.Dir(dir))
	r, ok1 := strings.CutPrefix(run, cgRunPrefix)
	p, ok2 := strings.CutPrefix(parent, cgParentPrefix)
	return ok1 && ok2 && cgName.MatchString(r) && cgName.MatchString(p)
}

// cgroupProcs lists the pids in dir and every cgroup beneath it (a run
// with the rights to do so may create sub-cgroups).
func cgroupProcs(dir string) ([]int, error) {
	var pids []int
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return err
		}
		for _, l := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(l); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids, err
}

// populated reads "populated" from dir's cgroup.events: whether any live
// process is in dir or beneath it.
func populated(dir string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return false, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "populated "); ok {
			return v == "1", nil
		}
	}
	return false, errors.New("spawn: no populated in cgroup.events")
}

// killCgroup sends SIGKILL to every process in dir and beneath it: one
// write to cgroup.kill (atomic against forks), or, without it, freeze,
// signal each member through a pidfd (a pid that left the cgroup in the
// meantime is not signalled), then thaw so the signals are delivered.
// It returns unix.ESRCH when dir held no process (nothing to stop).
func killCgroup(dir string, hasKill bool) error {
	pids, err := cgroupProcs(dir)
	if err != nil {
		return err
	}
	if len(pids) == 0 {
		return unix.ESRCH
	}
	if hasKill {
		return os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	}
	freeze := filepath.Join(dir, "cgroup.freeze")
	if err := os.WriteFile(freeze, []byte("1"), 0); err != nil {
		return err
	}
	defer os.WriteFile(freeze, []byte("0"), 0)
	// A frozen cgroup forks nothing more; the member list below is final
	// once the freeze completed.
	waitCgroup(dir, "frozen 1", time.Now().Add(5*time.Second))
	pids, err = cgroupProcs(dir)
	if err != nil {
		return err
	}
	var first error
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone
		}
		if in, _ := inCgroup(pid, dir); in {
			if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && first == nil && !errors.Is(err, unix.ESRCH) {
				first = err
			}
		}
		unix.Close(fd)
	}
	return first
}

// inCgroup reports whether pid's cgroup v2 path is dir or beneath it.
func inCgroup(pid int, dir string) (bool, error) {
	mount, _, err := cgroup2Mount()
	if err != nil {
		return false, err
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			full := filepath.Join(mount, p)
			return full == dir || strings.HasPrefix(full, dir+"/"), nil
		}
	}
	return false, nil
}

// waitCgroup polls dir's cgroup.events until it holds the line want, or
// deadline; it reports whether it did.
func waitCgroup(dir, want string, deadline time.Time) bool {
	d := time.Millisecond
	for {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		if err != nil {
			return false
		}
		for _, l := range strings.Split(string(b), "\n") {
			if l == want {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(d)
		if d < 50*time.Millisecond {
			d *= 2
		}
	}
}

// destroyCgroup kills whatever is left in dir, waits (until deadline) for
// it to empty and removes it with every cgroup beneath it. It reports
// whether dir is gone. A missing dir counts as gone.
func destroyCgroup(dir string, hasKill bool, deadline time.Time) bool {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return true
	}
	if err := killCgroup(dir, hasKill); err == nil {
		waitCgroup(dir, "populated 0", deadline)
	}
	return removeCgroupTree(dir)
}

// removeCgroupTree removes dir and the cgroups beneath it, deepest first
// (a cgroup directory holds only kernel files, removed with it).
func removeCgroupTree(dir string) bool {
	var dirs []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		unix.Rmdir(dirs[i])
	}
	_, err := os.Stat(dir)
	return errors.Is(err, os.ErrNotExist)
}
