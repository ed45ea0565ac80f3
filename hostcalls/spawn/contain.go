package spawn

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Containment keeps every descendant of a run inside the run, so that all
// of them die with it (docs/PROCESS.md, "Containment"; the choice is in
// docs/RATIONALE.md). One of three mechanisms, chosen once by New:
//
//   - containCgroup: a cgroup v2 per run, the process cloned straight into
//     it; the run ends by killing the cgroup (cgroup.kill) and removing it.
//   - containSubreaper: without cgroup v2 write access, the worker is a
//     child subreaper (PR_SET_CHILD_SUBREAPER), so descendants orphaned by
//     a run reparent to the worker instead of init; at the end of a run
//     the worker kills and reaps its process group, the descendants of
//     that group and the orphans that can only be that run's.
//   - containGroup: neither is available; only the process group is
//     stopped, as before.
type containMode int

const (
	containGroup containMode = iota
	containSubreaper
	containCgroup
)

func (m containMode) String() string {
	switch m {
	case containCgroup:
		return "cgroup"
	case containSubreaper:
		return "subreaper"
	default:
		return "group"
	}
}

// cleanupWait bounds how long the end of a run (or restart recovery) waits
// for the processes it killed to exit.
const cleanupWait = 5 * time.Second

// containment is the Spawner's mechanism.
type containment struct {
	mode containMode
	cg   *cgroups // containCgroup only
	boot string
}

// newContainment picks the mechanism: force ("cgroup", "subreaper",
// "group", tests only) or the best the host allows. A forced mechanism that
// is unavailable is an error.
func newContainment(force string) (*containment, error) {
	c := &containment{boot: bootID()}
	if force == "" || force == "cgroup" {
		cg, err := newCgroups()
		if err == nil {
			c.mode, c.cg = containCgroup, cg
			return c, nil
		}
		if force == "cgroup" {
			return nil, err
		}
	}
	if force == "" || force == "subreaper" {
		err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
		if err == nil {
			c.mode = containSubreaper
			return c, nil
		}
		if force == "subreaper" {
			return nil, err
		}
	}
	if force != "" && force != "group" && force != "cgroup" && force != "subreaper" {
		return nil, errors.New("spawn: unknown containment")
	}
	c.mode = containGroup
	return c, nil
}

// close removes this worker's (then empty) parent cgroup.
func (c *containment) close() {
	if c.cg != nil {
		unix.Rmdir(c.cg.parent)
	}
}

// children is the process-wide registry of this package's children. A
// subreaper is a property of the whole process and reaping is by pid, so
// every Spawner in the process shares it: a sweep must never reap a
// child whose exec.Cmd has yet to Wait for it.
var children = struct {
	// mu is held across every fork of this package and every sweep, so a
	// sweep never sees a just-forked child before it is registered.
	mu sync.Mutex
	// direct holds the pids of started processes not yet reaped by their
	// Wait; live holds the runs started and not yet released.
	direct map[int]bool
	live   map[*run]bool
}{direct: map[int]bool{}, live: map[*run]bool{}}

// started registers r's leader; the caller holds children.mu.
func started(r *run, pid int) {
	children.direct[pid] = true
	children.live[r] = true
	if st, err := readStat(pid); err == nil {
		r.leaderStart = st.start
	}
}

// release runs once the leader of r was reaped (Wait returned): it kills
// every process of r still alive, waits (bounded) for them to exit and
// removes r's cgroup. It does not change r's receipt: a process that ended
// on its own stays completed although its leftovers were killed.
func (c *containment) release(r *run) {
	switch {
	case r.cg != "":
		destroyCgroup(r.cg, c.cg.hasKill, time.Now().Add(cleanupWait))
		children.mu.Lock()
		delete(children.direct, r.pgid)
		delete(children.live, r)
		children.mu.Unlock()
	default:
		c.sweep(r, true)
	}
}

// sweep kills what is left of r without a cgroup: the members of its
// process group, every descendant of those, and (as subreaper) the
// orphans reparented to the worker that belong to r. An orphan belongs to
// r when it started no earlier than r's leader and no other unreleased run
// started at or before it; an orphan two runs may own waits for the later
// one. Every target is pinned by pid and start time before it is
// signalled. final is the end of the run: r leaves the registry, the
// targets are waited for (bounded) and the worker's own zombie children
// among them are reaped. It returns how many processes it signalled.
func (c *containment) sweep(r *run, final bool) int {
	children.mu.Lock()
	defer children.mu.Unlock()
	if final {
		delete(children.direct, r.pgid)
		delete(children.live, r)
	}
	if r.pgid <= 1 || r.leaderStart == 0 {
		return 0
	}
	procs, err := allProcs()
	if err != nil {
		return 0
	}
	self := os.Getpid()
	owned := func(p procStat) bool {
		if p.pid == r.pgid && p.start == r.leaderStart {
			// r's own leader, not yet reaped (so its pid is not reused):
			// the descendants that left its group hang below it.
			return true
		}
		if p.start < r.leaderStart || p.pid == self || children.direct[p.pid] {
			// Too old to be r's, the worker, or another run's leader.
			return false
		}
		if p.pgrp == r.pgid {
			// While the group has a member its id is not reused, even with
			// the leader reaped: these are r's.
			return true
		}
		if c.mode != containSubreaper || p.ppid != self {
			return false
		}
		for o := range children.live {
			if o != r && o.leaderStart != 0 && o.leaderStart <= p.start {
				return false
			}
		}
		return true
	}
	victims := descendants(procs, owned)
	var ps []*pinned
	for _, v := range victims {
		if p, err := pin(v.pid, v.start, nil); err == nil {
			ps = append(ps, p)
		}
	}
	if !final {
		for _, p := range ps {
			p.kill()
			p.close()
		}
		return len(ps)
	}
	killPinned(ps, time.Now().Add(cleanupWait))
	// Reap the ones that are (now) the worker's own zombies.
	for _, v := range victims {
		st, err := readStat(v.pid)
		if err == nil && st.start == v.start && st.ppid == self && st.zombie() && !children.direct[v.pid] {
			var ws unix.WaitStatus
			unix.Wait4(v.pid, &ws, unix.WNOHANG, nil)
		}
	}
	return len(ps)
}

// recover stops the survivors of a run that was still running when a
// previous worker died, before its receipt becomes outcome_unknown: its
// cgroup when it had one, else its leader (pinned: pid and start time must
// match, so a reused pid is never signalled), the leader's process group
// and their descendants. A record from another boot names no living
// process and nothing is done.
func (c *containment) recover(rec record) {
	if rec.Boot != "" && rec.Boot != c.boot {
		return
	}
	deadline := time.Now().Add(cleanupWait)
	if rec.Cgroup != "" {
		mount := ""
		if c.cg != nil {
			mount = c.cg.mount
		} else if m, _, err := cgroup2Mount(); err == nil {
			mount = m
		}
		if validRunCgroup(mount, rec.Cgroup) {
			_, err := os.Stat(filepath.Join(rec.Cgroup, "cgroup.kill"))
			destroyCgroup(rec.Cgroup, err == nil, deadline)
			// The dead worker's parent cgroup goes too once it is empty.
			if c.cg == nil || filepath.Dir(rec.Cgroup) != c.cg.parent {
				unix.Rmdir(filepath.Dir(rec.Cgroup))
			}
		}
	}
	if rec.Pid <= 1 || rec.PidStart == 0 {
		return
	}
	leader, err := pin(rec.Pid, rec.PidStart, nil)
	if err != nil {
		return // gone, or the pid now names another process
	}
	// While the leader is pinned its pid (and so its group id) cannot be
	// reused: the members of that group are the run's.
	procs, err := allProcs()
	if err != nil {
		leader.close()
		return
	}
	victims := descendants(procs, func(p procStat) bool {
		return p.pid == rec.Pid || (p.pgrp == rec.Pid && p.start >= rec.PidStart)
	})
	ps := []*pinned{leader}
	for _, v := range victims {
		if v.pid == rec.Pid {
			continue
		}
		if p, err := pin(v.pid, v.start, nil); err == nil {
			ps = append(ps, p)
		}
	}
	killPinned(ps, deadline)
}
