package spawn

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// procStat is the part of /proc/PID/stat this package uses.
type procStat struct {
	pid   int
	state byte // R, S, D, Z, ...
	ppid  int
	pgrp  int
	// start is field 22, the start time in clock ticks after boot: with
	// the boot id it names one process, where a pid alone may be reused.
	start uint64
}

func (p procStat) zombie() bool { return p.state == 'Z' || p.state == 'X' }

var errBadStat = errors.New("spawn: unreadable /proc/PID/stat")

// readStat reads /proc/PID/stat. The command name (field 2) may hold any
// byte, including ')' and spaces, so the fields are parsed after its last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(pid, string(b))
}

func parseStat(pid int, s string) (procStat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, errBadStat
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); field k is f[k-3].
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, errBadStat
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procStat{}, errBadStat
	}
	return procStat{pid: pid, state: f[0][0], ppid: ppid, pgrp: pgrp, start: start}, nil
}

// allProcs reads the stat of every process in /proc (threads are not
// listed there). Processes that vanish while it reads are skipped.
func allProcs() ([]procStat, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	out := make([]procStat, 0, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 {
			continue
		}
		if st, err := readStat(pid); err == nil {
			out = append(out, st)
		}
	}
	return out, nil
}

// nowTicks is the current time in the unit of start times: clock ticks
// (USER_HZ, 100 on Linux) of CLOCK_BOOTTIME, which the kernel uses for
// /proc/PID/stat field 22. It returns 0 if the clock is unreadable.
func nowTicks() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano()) / (1e9 / 100)
}

// bootID identifies this boot of the machine: start times count from it,
// so a recorded (pid, start) from another boot names no living process.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// pinned is a process held by a pidfd: the descriptor refers to the
// process itself, not to its number, so a signal sent through it reaches
// this process or fails (ESRCH), even once the number names another.
type pinned struct {
	st procStat
	fd int // -1 when pidfd_open is unavailable (Linux < 5.3)
}

// pin opens a pidfd for pid and returns it only if the process behind it
// is the expected one: its start time is start, and ok (if not nil)
// accepts its stat re-read after the pid was pinned. A pid that was reused
// (another start time), or that is gone, returns an error and is never
// signalled. Without pidfd_open the stat check is still made, leaving the
// window between the check and the signal that pidfds close.
func pin(pid int, start uint64, ok func(procStat) bool) (*pinned, error) {
	if pid <= 1 {
		return nil, unix.EINVAL
	}
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case err == nil:
	case errors.Is(err, unix.ENOSYS):
		fd = -1
	default:
		return nil, err
	}
	st, err := readStat(pid)
	if err == nil && st.start != start {
		err = unix.ESRCH
	}
	if err == nil && ok != nil && !ok(st) {
		err = unix.ESRCH
	}
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, err
	}
	return &pinned{st: st, fd: fd}, nil
}

// kill sends SIGKILL to the pinned process.
func (p *pinned) kill() error {
	if p.fd < 0 {
		return unix.Kill(p.st.pid, unix.SIGKILL)
	}
	return unix.PidfdSendSignal(p.fd, unix.SIGKILL, nil, 0)
}

// waitExit waits until the pinned process has exited (it may stay a
// zombie) or until deadline; it reports whether it exited.
func (p *pinned) waitExit(deadline time.Time) bool {
	if p.fd < 0 {
		for time.Now().Before(deadline) {
			st, err := readStat(p.st.pid)
			if err != nil || st.start != p.st.start || st.zombie() {
				return true
			}
			time.Sleep(5 * time.Millisecond)
		}
		return false
	}
	for {
		ms := time.Until(deadline).Milliseconds()
		if ms <= 0 {
			ms = 0
		}
		fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(ms))
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}

func (p *pinned) close() {
	if p.fd >= 0 {
		unix.Close(p.fd)
		p.fd = -1
	}
}

// killPinned signals every pinned process, waits (until deadline) for each
// to exit, and releases the pidfds.
func killPinned(ps []*pinned, deadline time.Time) {
	for _, p := range ps {
		p.kill()
	}
	for _, p := range ps {
		p.waitExit(deadline)
		p.close()
	}
}

// descendants returns the processes of procs whose parent chain reaches a
// process accepted by root (the roots included), by the ppid links in this
// one snapshot.
func descendants(procs []procStat, root func(procStat) bool) []procStat {
	children := map[int][]procStat{}
	var out, queue []procStat
	seen := map[int]bool{}
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p)
		if root(p) {
			queue = append(queue, p)
			seen[p.pid] = true
		}
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, p)
		for _, c := range children[p.pid] {
			if !seen[c.pid] {
				seen[c.pid] = true
				queue = append(queue, c)
			}
		}
	}
	return out
}
