package spawn

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
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
//     a run reparent to the worker instead of init; a stop and the end of
//     a run kill the orphans that can only be that run's and everything
//     below them (see sweep), and the worker reaps them.
//   - containGroup: neither is available; only the process group is
//     stopped (see sweep).
type containMode int

const (
	containGroup containMode = iota
	containSubreaper
	containCgroup
)

// cleanupWait bounds how long the end of a run, or restart recovery as a
// whole, waits for the processes it killed to exit.
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
// child whose exec.Cmd has yet to Wait for it. (The worker starts no other
// children; one started elsewhere in the process while it is a subreaper
// could be taken for an orphan.)
var children = struct {
	// forks is held for reading across every fork of this package until
	// the child is registered, and for writing while a sweep decides what
	// to signal and reap: a sweep never meets an unregistered child.
	forks sync.RWMutex
	// mu guards direct (pids started and not yet reaped by their Wait)
	// and live (runs started and not yet released).
	mu     sync.Mutex
	direct map[int]bool
	live   map[*run]bool
}{direct: map[int]bool{}, live: map[*run]bool{}}

// started registers r's leader; the caller holds children.forks for
// reading.
func started(r *run, pid int) {
	st, err := readStat(pid)
	children.mu.Lock()
	defer children.mu.Unlock()
	children.direct[pid] = true
	children.live[r] = true
	if err == nil {
		r.leaderStart = st.start
	}
}

// forget removes r from the registry once its leader was reaped.
func forget(r *run) {
	children.mu.Lock()
	defer children.mu.Unlock()
	delete(children.direct, r.pgid)
	delete(children.live, r)
}

// release runs once the leader of r was reaped (Wait returned): it kills
// every process of r still alive, waits (bounded) for them to exit and
// removes r's cgroup. It does not change how r ended: a process that ended
// on its own stays completed although its leftovers were killed.
//
// signalled says the run was stopped (its one SIGKILL succeeded): a
// cgroup is then only waited for, never signalled again (cgroup.kill, or
// the freeze, reached every member and no fork got past it).
func (c *containment) release(r *run, signalled bool) {
	forget(r)
	if r.cg != "" {
		deadline := time.Now().Add(cleanupWait)
		if signalled {
			waitCgroup(r.cg, "populated 0", deadline)
			removeCgroupTree(r.cg)
			return
		}
		destroyCgroup(r.cg, c.cg.hasKill, deadline)
		return
	}
	c.sweep(r, true)
}

// leaderExists reports whether r's leader is still a task (alive or a
// zombie not yet reaped): then its pid, and so its group id, is in use and
// names r's group and no other.
func leaderExists(r *run) bool {
	st, err := readStat(r.pgid)
	return err == nil && r.leaderStart != 0 && st.start == r.leaderStart
}

// sweep kills what is left of r without a cgroup. Its roots:
//
//   - while the leader exists: the leader and the members of its group;
//   - as subreaper: the orphans reparented to the worker that belong to r.
//     An orphan belongs to r when it started no earlier than r's leader
//     and no other unreleased run started at or before it; an orphan two
//     runs may own waits for the later one. After the leader is reaped
//     every survivor of r is such an orphan or below one;
//   - with neither (containGroup, final): the members of r's group that
//     started before Wait returned. The reaped leader no longer holds the
//     group id, so a group founded since under a reused id is told apart
//     only by start time: a reuse between the reap and Wait's return (at
//     most WaitDelay) is not excluded (docs/PROCESS.md, "Containment").
//
// and every descendant of a root. Each target is pinned by pid and start
// time before it is signalled. final is the end of the run (r already
// forgotten): the targets are waited for (bounded) and the worker's own
// zombie children among them are reaped. It returns how many processes it
// signalled.
func (c *containment) sweep(r *run, final bool) int {
	if r.pgid <= 1 || r.leaderStart == 0 {
		return 0
	}
	group := leaderExists(r)
	lateGroup := final && !group && c.mode == containGroup && r.reapedTick != 0
	if !group && !lateGroup && c.mode != containSubreaper {
		return 0
	}
	if c.mode != containSubreaper && unix.Kill(-r.pgid, 0) == unix.ESRCH {
		return 0 // no group member left: nothing to scan
	}
	// The snapshot is taken before the fork lock: a child forked before it
	// was read is registered by the time the lock is held.
	procs, err := allProcs()
	if err != nil {
		return 0
	}
	self := os.Getpid()
	children.forks.Lock()
	children.mu.Lock()
	owned := func(p procStat) bool {
		if p.pid == r.pgid {
			return group && p.start == r.leaderStart
		}
		if p.start < r.leaderStart || p.pid == self || children.direct[p.pid] {
			// Too old to be r's, the worker, or another run's leader.
			return false
		}
		if p.pgrp == r.pgid && (group || (lateGroup && p.start < r.reapedTick)) {
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
	children.mu.Unlock()
	var ps []*pinned
	for _, v := range victims {
		if p, err := pin(v.pid, v.start, nil); err == nil {
			ps = append(ps, p)
		}
	}
	for _, p := range ps {
		p.kill()
	}
	children.forks.Unlock()
	if !final {
		for _, p := range ps {
			p.close()
		}
		return len(ps)
	}
	deadline := time.Now().Add(cleanupWait)
	for _, p := range ps {
		p.waitExit(deadline)
		p.close()
	}
	// Reap the ones that are (now) the worker's own zombies. None of them
	// is registered: r's leader is forgotten, other leaders are no victims.
	if c.mode == containSubreaper {
		children.forks.Lock()
		for _, v := range victims {
			st, err := readStat(v.pid)
			if err == nil && st.start == v.start && st.ppid == self && st.zombie() {
				var ws unix.WaitStatus
				unix.Wait4(v.pid, &ws, unix.WNOHANG, nil)
			}
		}
		children.forks.Unlock()
	}
	return len(ps)
}

// removeStale removes the parent cgroup left by the previous worker on
// this store (it died, or its Close could not remove it): every run cgroup
// beneath it is destroyed (their runs are over: the running ones were just
// recovered), then the parent. A path that is not a parent this package
// makes (see validRunCgroup), or this worker's own, is left alone.
func (c *containment) removeStale(parent string, deadline time.Time) {
	if parent == "" || (c.cg != nil && parent == c.cg.parent) {
		return
	}
	mount := ""
	if c.cg != nil {
		mount = c.cg.mount
	} else if m, _, err := cgroup2Mount(); err == nil {
		mount = m
	}
	if !validRunCgroup(mount, filepath.Join(parent, cgRunPrefix+"0000000000000000")) {
		return
	}
	runs, _ := filepath.Glob(filepath.Join(parent, cgRunPrefix+"*"))
	for _, dir := range runs {
		if validRunCgroup(mount, dir) {
			_, err := os.Stat(filepath.Join(dir, "cgroup.kill"))
			destroyCgroup(dir, err == nil, deadline)
		}
	}
	unix.Rmdir(parent)
}

// recover stops the survivors of a run that was still running when a
// previous worker died, before the next worker serves: its
// cgroup when it had one, else its leader (pinned: pid and start time must
// match, so a reused pid is never signalled), the leader's process group
// and their descendants. A record from another boot names no living
// process and nothing is done.
func (c *containment) recover(rec record, deadline time.Time) {
	if rec.Boot != "" && rec.Boot != c.boot {
		return
	}
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
	// While the leader exists (alive or a zombie) its pid, and so its
	// group id, is in use and cannot name another process or group.
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
	// The leader must still exist (alive or a zombie) now that the others
	// are pinned: then its pid was in use throughout, and the group seen
	// in the snapshot was the run's. Had it been reaped meanwhile, only
	// the leader's own pidfd is safe to use.
	if st, err := readStat(rec.Pid); err != nil || st.start != rec.PidStart {
		for _, p := range ps[1:] {
			p.close()
		}
		ps = ps[:1]
	}
	killPinned(ps, deadline)
}

// startNoNewPrivs runs start (which forks the run) on an OS thread of
// its own that has PR_SET_NO_NEW_PRIVS set, so the child inherits it: no
// setuid bit or file capability can raise its privileges (a sandboxed run,
// docs/PROCESS.md, "Sandbox"). The flag cannot be cleared, so the thread
// is never returned to the Go scheduler: the goroutine ends locked and the
// runtime discards the thread.
func startNoNewPrivs(start func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			errc <- err
			return
		}
		errc <- start()
	}()
	return <-errc
}
