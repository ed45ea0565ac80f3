package spawn

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lemon/hostcalls/store"
	"lemon/protocol"
)

// mechanisms lists the containments to test: cgroup v2 where this host
// allows it (skipped, with the reason, where not) and the forced subreaper
// fallback.
func mechanisms(t *testing.T, test func(t *testing.T, mode string)) {
	for _, mode := range []string{"cgroup", "subreaper"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "cgroup" {
				needCgroups(t)
			}
			test(t, mode)
		})
	}
}

// needCgroups skips t where this host does not allow cgroup v2
// containment, saying why.
func needCgroups(t *testing.T) {
	t.Helper()
	c, err := newCgroups()
	if err != nil {
		t.Skipf("cgroup v2 containment unavailable here: %v", err)
	}
	(&containment{cg: c}).close()
}

func withMode(mode string, waitDelay time.Duration) func(*Config) {
	return func(c *Config) {
		c.containment = mode
		if waitDelay > 0 {
			c.WaitDelay = waitDelay
		}
	}
}

// proc is one process named by pid and start time (a pid alone may be
// reused).
type proc struct {
	pid   int
	start uint64
}

func procOf(t *testing.T, pid int) proc {
	t.Helper()
	st, err := readStat(pid)
	if err != nil {
		t.Fatalf("pid %d: %v", pid, err)
	}
	return proc{pid, st.start}
}

// exists reports whether p is still a live (non-zombie) process.
func (p proc) exists() bool {
	st, err := readStat(p.pid)
	return err == nil && st.start == p.start && !st.zombie()
}

// ended waits (bounded) until p no longer exists.
func (p proc) ended() bool { return settled(func() bool { return !p.exists() }) }

// readPidFile waits (bounded) for a pid file written by a test command.
func readPidFile(t *testing.T, path string) proc {
	t.Helper()
	var pid int
	if !settled(func() bool {
		b, _ := os.ReadFile(path)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0
	}) {
		t.Fatalf("%s was never written", path)
	}
	return procOf(t, pid)
}

func cmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return string(b)
}

// runMember finds a live process of run r whose cmdline is want: in r's
// cgroup, or (subreaper) a child of this process.
func runMember(r *run, want string) (proc, bool) {
	procs, _ := allProcs()
	for _, p := range procs {
		if p.zombie() || cmdline(p.pid) != want {
			continue
		}
		in := false
		if r.cg != "" {
			in, _ = inCgroup(p.pid, r.cg)
		} else {
			in = p.ppid == os.Getpid() || p.pgrp == r.pgid
		}
		if in {
			return proc{p.pid, p.start}, true
		}
	}
	return proc{}, false
}

// TestSetsidEscapeDiesWithRun is issue 9's reported input: a run that
// leaves a setsid'd sleep behind must not leave it running. Before
// containment the run was completed and the sleep lived on.
func TestSetsidEscapeDiesWithRun(t *testing.T) {
	mechanisms(t, func(t *testing.T, mode string) {
		t.Run("reported", func(t *testing.T) {
			// WaitDelay longer than the timeout: the sleep holds stdout, so
			// the run lasts until the timeout and the sleep can be found.
			f := newFixture(t, withMode(mode, 5*time.Second))
			r := req("setsid", "sh", "-c", "setsid sleep 600 & echo hi")
			r.TimeoutMs = 2000
			h, _, err := f.start(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			var sleep proc
			if !settled(func() bool { var ok bool; sleep, ok = runMember(h.r, "sleep\x00600\x00"); return ok }) {
				t.Fatal("the setsid'd sleep was never seen")
			}
			rc, err := h.Result()
			if err != nil {
				t.Fatal(err)
			}
			if (rc.State != protocol.ProcessStateCompleted && rc.State != protocol.ProcessStateCancelled) ||
				exitOf(rc) != "0" || string(rc.Stdout) != "hi\n" {
				t.Fatalf("receipt %+v", rc)
			}
			if !sleep.ended() {
				t.Fatalf("the setsid'd sleep %d outlived its run", sleep.pid)
			}
		})
		t.Run("pidfile", func(t *testing.T) {
			f := newFixture(t, withMode(mode, 5*time.Second))
			pidfile := filepath.Join(f.root, "PIDFILE")
			r := req("setsid-pidfile", "sh", "-c", `setsid sh -c "echo \$\$ > `+pidfile+`; exec sleep 600" & echo hi`)
			r.TimeoutMs = 2000
			h, _, err := f.start(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			sleep := readPidFile(t, pidfile)
			rc, err := h.Result()
			if err != nil {
				t.Fatal(err)
			}
			if rc.State != protocol.ProcessStateCancelled || exitOf(rc) != "0" || string(rc.Stdout) != "hi\n" {
				t.Fatalf("receipt %+v", rc)
			}
			if !sleep.ended() {
				t.Fatalf("the setsid'd sleep %d outlived its run", sleep.pid)
			}
		})
		t.Run("completed", func(t *testing.T) {
			// The leader waits for the pid file and exits: the run is
			// completed (pipes closed after WaitDelay), its leftover killed.
			f := newFixture(t, withMode(mode, 0))
			r := req("setsid-completed", "sh", "-c",
				`setsid sh -c "echo \$\$ > pid; exec sleep 600" & while [ ! -s pid ]; do sleep 0.01; done; echo hi`)
			rc := f.mustRun(r)
			if rc.State != protocol.ProcessStateCompleted || exitOf(rc) != "0" || string(rc.Stdout) != "hi\n" || !rc.OutputTruncated {
				t.Fatalf("receipt %+v", rc)
			}
			b, _ := os.ReadFile(filepath.Join(f.root, "pid"))
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			if pid <= 0 {
				t.Fatalf("pid file %q", b)
			}
			if !gone(pid) {
				t.Fatalf("the setsid'd sleep %d outlived its completed run", pid)
			}
		})
		t.Run("leader-alive", func(t *testing.T) {
			// The timeout stops the leader and the setsid'd child below it
			// together: the pipes reach EOF (outputTruncated false), none
			// is left for WaitDelay (here 5 s) to close.
			f := newFixture(t, withMode(mode, 5*time.Second))
			r := req("leader-alive", "sh", "-c", `setsid sh -c "echo \$\$ > pid; exec sleep 600" & exec sleep 600`)
			h, _, err := f.start(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			escaped := readPidFile(t, filepath.Join(f.root, "pid"))
			h.r.stop(reasonTimeout)
			rc, err := h.Result()
			if err != nil || rc.State != protocol.ProcessStateCancelled || exitOf(rc) != "-9" || rc.OutputTruncated {
				t.Fatalf("receipt %+v %v", rc, err)
			}
			if !escaped.ended() {
				t.Fatalf("the setsid'd child %d outlived its run", escaped.pid)
			}
		})
		t.Run("argv-setsid", func(t *testing.T) {
			// setsid(1) as the command: it forks (the leader is a group
			// leader), the fork leaves the session and the leader exits.
			f := newFixture(t, withMode(mode, 0))
			r := req("argv-setsid", "setsid", "sh", "-c", "echo $$ > pid; exec sleep 600")
			r.TimeoutMs = 2000
			h, _, err := f.start(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			sleep := readPidFile(t, filepath.Join(f.root, "pid"))
			h.Result()
			if !sleep.ended() {
				t.Fatalf("sleep %d outlived its run", sleep.pid)
			}
		})
	})
}

// TestCgroupFreezeFallbackKills covers cgroups without cgroup.kill (Linux
// before 5.14): the run is frozen and each member signalled.
func TestCgroupFreezeFallbackKills(t *testing.T) {
	needCgroups(t)
	f := newFixture(t, withMode("cgroup", 0))
	f.s.contain.cg.hasKill = false
	r := req("freeze", "sh", "-c", `setsid sh -c "echo \$\$ > pid; exec sleep 600" & echo $$ > leader; exec sleep 600`)
	h, _, err := f.start(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	leader := readPidFile(t, filepath.Join(f.root, "leader"))
	escaped := readPidFile(t, filepath.Join(f.root, "pid"))
	if _, wait, err := f.cancel("freeze", 0); err != nil || wait == nil {
		t.Fatalf("cancel: %v", err)
	}
	rc, err := h.Result()
	if err != nil || rc.State != protocol.ProcessStateCancelled || exitOf(rc) != "-9" {
		t.Fatalf("receipt %+v %v", rc, err)
	}
	if !leader.ended() || !escaped.ended() {
		t.Fatalf("frozen members survived: leader %v, escaped %v", leader.exists(), escaped.exists())
	}
	if _, err := os.Stat(h.r.cg); !os.IsNotExist(err) {
		t.Fatalf("run cgroup %s not removed: %v", h.r.cg, err)
	}
}

// TestCgroupOfRunIsRemoved: a run's cgroup exists while it runs and is gone
// with it, and the worker's parent cgroup goes with Close.
func TestCgroupOfRunIsRemoved(t *testing.T) {
	needCgroups(t)
	f := newFixture(t, withMode("cgroup", 0))
	// A worker that has run nothing has made no cgroup (a SIGKILL then
	// leaves nothing behind).
	if _, err := os.Stat(f.s.contain.cg.parent); !os.IsNotExist(err) {
		t.Fatalf("parent cgroup before any run: %v", err)
	}
	h, _, err := f.start(context.Background(), req("cg", "sh", "-c", "echo $$ > pid; exec sleep 600"))
	if err != nil {
		t.Fatal(err)
	}
	leader := readPidFile(t, filepath.Join(f.root, "pid"))
	if in, err := inCgroup(leader.pid, h.r.cg); !in || err != nil {
		t.Fatalf("leader not in the run cgroup %s: %v", h.r.cg, err)
	}
	if _, err := os.Stat(filepath.Join(h.r.cg, "cgroup.kill")); (err == nil) != f.s.contain.cg.hasKill {
		t.Fatalf("hasKill %v, cgroup.kill: %v", f.s.contain.cg.hasKill, err)
	}
	var raw []byte
	f.s.ns.View(func(tx *store.Tx) error { raw, _ = tx.Get(primPrefix + h.run); return nil })
	if rec, _ := decodeRecord(raw); rec.Cgroup != h.r.cg || rec.Boot == "" {
		t.Fatalf("running record %s", raw)
	}
	f.cancel("cg", 0)
	<-h.Done()
	if _, err := os.Stat(h.r.cg); !os.IsNotExist(err) {
		t.Fatalf("run cgroup not removed: %v", err)
	}
	f.s.ns.View(func(tx *store.Tx) error { raw, _ = tx.Get(primPrefix + h.run); return nil })
	if raw != nil {
		t.Fatalf("containment record left after the run: %s", raw)
	}
	parent := f.s.contain.cg.parent
	f.s.Close()
	if _, err := os.Stat(parent); !os.IsNotExist(err) {
		t.Fatalf("parent cgroup not removed: %v", err)
	}
}

// The helper worker of TestWorkerSIGKILLStopsSurvivorsOnRestart: the test
// binary run again with LEMON_SPAWN_HELPER=<dir>. It opens the store in
// dir, starts one run whose leader and setsid'd grandchild write their
// pids, and waits to be killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv("LEMON_SPAWN_HELPER"); dir != "" {
		os.Exit(helperWorker(dir, os.Getenv("LEMON_SPAWN_CONTAINMENT")))
	}
	os.Exit(m.Run())
}

func helperWorker(dir, mode string) int {
	st, err := store.New(store.Config{Path: filepath.Join(dir, "node.db")})
	if err != nil {
		fmt.Println("store:", err)
		return 2
	}
	root := filepath.Join(dir, "root")
	s, err := New(Config{Store: st, Dirs: testDirs{root: root}, containment: mode,
		Env: []string{"PATH=/usr/bin:/bin", "HOME=" + root, "LANG=C.UTF-8"}})
	if err != nil {
		fmt.Println("spawner:", err)
		return 2
	}
	_, _, err = s.StartRun(context.Background(), helperRequest())
	if err != nil {
		fmt.Println("start:", err)
		return 2
	}
	fmt.Println("started")
	select {}
}

// helperRun is the run id the helper worker's run takes.
const helperRun = "r00000000000000aa"

func helperRequest() Request {
	r := req("survivor", "sh", "-c", `setsid sh -c "echo \$\$ > grandchild; exec sleep 600" & echo $$ > child; exec sleep 600`)
	r.runID = helperRun
	return r
}

// TestWorkerSIGKILLStopsSurvivorsOnRestart is issue 9's second case: a
// child still running when the worker is SIGKILLed used to live on after
// the restart. A real worker process (this binary re-executed) starts the
// run and is SIGKILLed; the restarted Spawner stops the child and its
// setsid'd grandchild before the receipt reads outcome_unknown.
func TestWorkerSIGKILLStopsSurvivorsOnRestart(t *testing.T) {
	mechanisms(t, func(t *testing.T, mode string) {
		dir := t.TempDir()
		dir, _ = filepath.EvalSymlinks(dir)
		root := filepath.Join(dir, "root")
		os.Mkdir(root, 0o700)
		worker := exec.Command(os.Args[0], "-test.run=^$")
		worker.Env = append(os.Environ(), "LEMON_SPAWN_HELPER="+dir, "LEMON_SPAWN_CONTAINMENT="+mode)
		out, _ := worker.StdoutPipe()
		worker.Stderr = os.Stderr
		if err := worker.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		if line != "started\n" {
			worker.Process.Kill()
			worker.Wait()
			t.Fatalf("helper worker: %q", line)
		}
		child := readPidFile(t, filepath.Join(root, "child"))
		grandchild := readPidFile(t, filepath.Join(root, "grandchild"))
		t.Cleanup(func() {
			for _, p := range []proc{child, grandchild} {
				if p.exists() {
					unix.Kill(p.pid, unix.SIGKILL)
				}
			}
		})
		worker.Process.Signal(syscall.SIGKILL)
		worker.Wait()
		if !child.exists() || !grandchild.exists() {
			t.Fatal("the run did not survive the worker's SIGKILL; the test proves nothing")
		}

		// Where the dead worker's run lived, from its record.
		st, err := store.New(store.Config{Path: filepath.Join(dir, "node.db")})
		if err != nil {
			t.Fatal(err)
		}
		var before record
		ns, _ := st.Namespace(Namespace)
		ns.View(func(tx *store.Tx) error {
			v, _ := tx.Get(primPrefix + helperRun)
			before, _ = decodeRecord(v)
			return nil
		})
		st.Close()
		if before.State != protocol.ProcessStateRunning || before.Boot != bootID() ||
			(mode == "cgroup") != (before.Cgroup != "") || (mode == "cgroup") == (before.Pid != 0) {
			t.Fatalf("the dead worker's record: %+v", before)
		}
		if mode != "cgroup" && (before.Pid != child.pid || before.PidStart != child.start) {
			t.Fatalf("recorded leader %d/%d, want %d/%d", before.Pid, before.PidStart, child.pid, child.start)
		}

		f := &fixture{t: t, dir: dir, root: root, path: filepath.Join(dir, "node.db"),
			clock: &fakeClock{t: time.Unix(1_800_000_000, 0)}}
		f.open(withMode(mode, 0))
		t.Cleanup(func() { f.s.Close(); f.st.Close() })
		// New returned: the survivors were killed (and waited for) first.
		if !child.ended() || !grandchild.ended() {
			t.Fatalf("survivors after restart: child alive %v, grandchild alive %v", child.exists(), grandchild.exists())
		}
		// The record is gone and the new worker does not know the run
		// (the process module reads that as outcome_unknown).
		var raw []byte
		f.s.ns.View(func(tx *store.Tx) error { raw, _ = tx.Get(primPrefix + helperRun); return nil })
		if raw != nil {
			t.Fatalf("containment record left after recovery: %s", raw)
		}
		if _, _, known, err := f.s.WaitRun(helperRun, ""); known || err != nil {
			t.Fatalf("the restarted worker knows the dead worker's run: %v", err)
		}
		if mode == "cgroup" {
			// The dead worker's run cgroup and its parent are gone.
			for _, d := range []string{before.Cgroup, filepath.Dir(before.Cgroup)} {
				if _, err := os.Stat(d); !os.IsNotExist(err) {
					t.Fatalf("%s left behind: %v", d, err)
				}
			}
		}
	})
}

// TestStaleParentCgroupRemoved: the parent cgroup of the previous worker
// on the same store goes at the next start, with what its run cgroups
// still hold.
func TestStaleParentCgroupRemoved(t *testing.T) {
	needCgroups(t)
	f := newFixture(t, withMode("cgroup", 0))
	old := f.s.contain.cg
	stale := filepath.Join(filepath.Dir(old.parent), cgParentPrefix+randHex8())
	run := filepath.Join(stale, cgRunPrefix+randHex8())
	if err := os.MkdirAll(run, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeCgroupTree(stale) })
	leftover := exec.Command("sleep", "600")
	if err := leftover.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	go func() { leftover.Wait(); close(reaped) }()
	t.Cleanup(func() { leftover.Process.Kill(); <-reaped })
	if err := os.WriteFile(filepath.Join(run, "cgroup.procs"), []byte(strconv.Itoa(leftover.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	f.s.ns.Update(func(tx *store.Tx) error { return tx.Put(keyCgroup, []byte(stale)) })
	f.s.Close()
	f.st.Close()
	f.open(withMode("cgroup", 0))
	select {
	case <-reaped:
	case <-time.After(time.Minute):
		t.Fatal("the process in the stale run cgroup survived")
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale parent left: %v", err)
	}
	var v []byte
	f.s.ns.View(func(tx *store.Tx) error { v, _ = tx.Get(keyCgroup); return nil })
	if string(v) != f.s.contain.cg.parent {
		t.Fatalf("k/cgroup %q, want %q", v, f.s.contain.cg.parent)
	}
}

// TestRecoveryNeverSignalsAnotherProcess: a running record whose pid now
// names another process (other start time), comes from another boot, or
// whose cgroup is not one this package made, makes the restart signal
// nothing; the same record naming the real process stops it (so the test
// can fail).
func TestRecoveryNeverSignalsAnotherProcess(t *testing.T) {
	f := newFixture(t, withMode("group", 0))
	bystander := exec.Command("sleep", "600")
	bystander.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	go func() { bystander.Wait(); close(reaped) }()
	t.Cleanup(func() { bystander.Process.Kill(); <-reaped })
	by := procOf(t, bystander.Process.Pid)
	boot := bootID()
	if boot == "" {
		t.Skip("no boot id")
	}

	// A cgroup that is not a run cgroup, holding the bystander, when this
	// host allows cgroups: a record naming it must not kill it.
	var foreign string
	if c, err := newCgroups(); err == nil {
		foreign = filepath.Join(filepath.Dir(c.parent), "not-lemon-"+randHex8())
		(&containment{cg: c}).close()
		if err := os.Mkdir(foreign, 0o700); err == nil {
			t.Cleanup(func() {
				bystander.Process.Kill()
				<-reaped
				unix.Rmdir(foreign)
			})
			if err := os.WriteFile(filepath.Join(foreign, "cgroup.procs"), []byte(strconv.Itoa(by.pid)), 0); err != nil {
				foreign = ""
			}
		} else {
			foreign = ""
		}
	}

	recs := map[string]record{
		"reused":     {Pid: by.pid, PidStart: by.start + 1, Boot: boot},
		"other-boot": {Pid: by.pid, PidStart: by.start, Boot: "00000000-0000-0000-0000-000000000000"},
		"pid-1":      {Pid: 1, PidStart: 1, Boot: boot},
	}
	if foreign != "" {
		recs["foreign-cgroup"] = record{Cgroup: foreign, Boot: boot}
		// Not clean: it would resolve to the foreign cgroup.
		recs["dotdot-cgroup"] = record{Cgroup: filepath.Dir(foreign) + "/" + cgParentPrefix + "0123456789abcdef/../" + filepath.Base(foreign), Boot: boot}
	}
	put := func(recs map[string]record) {
		f.s.ns.Update(func(tx *store.Tx) error {
			for id, r := range recs {
				r.V, r.State = 1, protocol.ProcessStateRunning
				if err := tx.Put(primPrefix+id, r.encode()); err != nil {
					return err
				}
			}
			return nil
		})
	}
	put(recs)
	f.s.Close()
	f.reopen()
	if !by.exists() {
		t.Fatal("the restart signalled a process that was not the run's")
	}
	f.s.ns.View(func(tx *store.Tx) error {
		if n := tx.Count(primPrefix); n != 0 {
			t.Fatalf("%d containment records left after the restart", n)
		}
		return nil
	})
	// Control: the exact pid and start time of this boot are stopped.
	put(map[string]record{"real": {Pid: by.pid, PidStart: by.start, Boot: boot}})
	f.s.Close()
	f.reopen()
	if !by.ended() {
		t.Fatal("the recorded process survived the restart")
	}
}

func TestPinChecksStartTime(t *testing.T) {
	c := exec.Command("sleep", "600")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Process.Kill(); c.Wait() }()
	p := procOf(t, c.Process.Pid)
	if _, err := pin(p.pid, p.start+1, nil); err == nil {
		t.Fatal("pinned a pid with another start time")
	}
	if _, err := pin(p.pid, p.start, func(procStat) bool { return false }); err == nil {
		t.Fatal("pinned a process its check refused")
	}
	if _, err := pin(1, 1, nil); err == nil {
		t.Fatal("pinned pid 1")
	}
	if !p.exists() {
		t.Fatal("a refused pin signalled the process")
	}
	pp, err := pin(p.pid, p.start, nil)
	if err != nil {
		t.Fatal(err)
	}
	killPinned([]*pinned{pp}, time.Now().Add(5*time.Second))
	if !p.ended() {
		t.Fatal("the pinned process survived SIGKILL")
	}
}

func TestParseStat(t *testing.T) {
	// The command name may contain spaces and parentheses.
	line := "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10 18446744073709551615"
	st, err := parseStat(4242, line)
	if err != nil || st.state != 'S' || st.ppid != 1 || st.pgrp != 4242 || st.start != 987654 {
		t.Fatalf("%+v %v", st, err)
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 1 2", "1 (x) S a 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5"} {
		if _, err := parseStat(1, bad); err == nil {
			t.Fatalf("parsed %q", bad)
		}
	}
}

func TestValidRunCgroup(t *testing.T) {
	m := "/sys/fs/cgroup"
	ok := m + "/system.slice/lemon.service/lemon-spawn-0123456789abcdef/run-fedcba9876543210"
	cases := map[string]bool{
		ok: true,
		m + "/lemon-spawn-0123456789abcdef/run-fedcba9876543210": true,
		m:                                   false,
		m + "/system.slice":                 false,
		m + "/lemon-spawn-0123456789abcdef": false,
		m + "/lemon-spawn-0123456789abcdef/run-fedcba987654321":       false, // 15 hex
		m + "/lemon-spawn-0123456789abcdef/run-FEDCBA9876543210":      false,
		m + "/lemon-spawn-0123456789abcdef/../x/run-fedcba9876543210": false,
		"/tmp/lemon-spawn-0123456789abcdef/run-fedcba9876543210":      false,
		"relative/lemon-spawn-0123456789abcdef/run-fedcba9876543210":  false,
		m + "/x/lemon-spawn-0123456789abcdef/run-fedcba9876543210/":   false,
		m + "/x/other-0123456789abcdef/run-fedcba9876543210":          false,
	}
	for dir, want := range cases {
		if got := validRunCgroup(m, dir); got != want {
			t.Errorf("validRunCgroup(%q) = %v, want %v", dir, got, want)
		}
	}
	if validRunCgroup("", ok) {
		t.Error("accepted with no mount")
	}
}

func TestFindCgroup2(t *testing.T) {
	hybrid := `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw`
	unified := `24 30 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate`
	// A container sees a subtree; a second mount shows another one.
	sub := `100 90 0:30 /other /mnt/x rw - cgroup2 cgroup2 rw
101 90 0:30 /system.slice/lemon.service /sys/fs/cgroup rw - cgroup2 cgroup2 rw`
	cases := []struct {
		mi, own, mount, self string
	}{
		{hybrid, "/", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/unified"},
		{unified, "/system.slice/lemon.service", "/sys/fs/cgroup", "/sys/fs/cgroup/system.slice/lemon.service"},
		{sub, "/system.slice/lemon.service/x", "/sys/fs/cgroup", "/sys/fs/cgroup/x"},
		{sub, "/system.slice/lemon.serviceX", "", ""},
		{"", "/", "", ""},
	}
	for _, c := range cases {
		m, self, err := findCgroup2(c.mi, c.own)
		if m != c.mount || self != c.self || (c.mount == "") != (err != nil) {
			t.Errorf("findCgroup2(%q) = %q %q %v, want %q %q", c.own, m, self, err, c.mount, c.self)
		}
	}
}

func TestUnescapeMount(t *testing.T) {
	if got := unescapeMount(`/sys/fs/cgroup\040x`); got != "/sys/fs/cgroup x" {
		t.Fatalf("%q", got)
	}
	if got := unescapeMount(`/a\04`); got != `/a\04` {
		t.Fatalf("%q", got)
	}
}
