package spawn

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lemon/hostcalls/contract"
	"lemon/hostcalls/store"
	"lemon/protocol"
)

// testDirs admits directories under one root: a test stand-in for
// hostcalls/fs (which walks components from pinned root descriptors).
type testDirs struct{ root string }

func (d testDirs) OpenDir(p string) (int, string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(d.root, p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return -1, "", protocol.DomainError(protocol.CodeNotFound, protocol.DomainNotFound, "no such directory")
	}
	if real != d.root && !strings.HasPrefix(real, d.root+"/") {
		return -1, "", protocol.DomainError(protocol.CodeForbidden, protocol.DomainPathNotAllowed, "outside roots")
	}
	fd, err := unix.Open(real, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", protocol.DomainError(protocol.CodeInvalidRequest, protocol.DomainNotDirectory, "not a directory")
	}
	return fd, real, nil
}

type fixture struct {
	t     testing.TB
	dir   string // state dir (the store file lives here)
	root  string // the allowed root and default cwd
	path  string
	st    *store.Store
	s     *Spawner
	clock *fakeClock
	all   []*Spawner // every Spawner opened, abandoned ones included
	mu    sync.Mutex
	runs  map[string]*testRun // by the test's processId label
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newBenchFixture(b *testing.B) *fixture { return newFixture(b, nil) }

func newFixture(t testing.TB, mut func(*Config)) *fixture {
	t.Helper()
	base := t.TempDir()
	base, _ = filepath.EvalSymlinks(base)
	f := &fixture{t: t, dir: filepath.Join(base, "state"), root: filepath.Join(base, "root"), runs: map[string]*testRun{},
		clock: &fakeClock{t: time.Unix(1_800_000_000, 0)}}
	if err := os.MkdirAll(f.root, 0o700); err != nil {
		t.Fatal(err)
	}
	f.path = filepath.Join(f.dir, "node.db")
	f.open(mut)
	t.Cleanup(func() {
		if f.s != nil {
			f.s.Close()
		}
		if f.st != nil {
			f.st.Close()
		}
		// An abandoned Spawner (reopen) leaves its parent cgroup behind.
		for _, s := range f.all {
			s.contain.close()
		}
	})
	return f
}

func (f *fixture) open(mut func(*Config)) {
	f.t.Helper()
	st, err := store.New(store.Config{Path: f.path})
	if err != nil {
		f.t.Fatal(err)
	}
	cfg := Config{Store: st, Dirs: testDirs{root: f.root}, WaitDelay: 200 * time.Millisecond, Now: f.clock.now,
		Env: []string{"PATH=/usr/bin:/bin", "HOME=" + f.root, "LANG=C.UTF-8"},
		// LEMON_SPAWN_TEST_CONTAINMENT=subreaper (or group) runs the
		// suite under a fallback mechanism.
		containment: os.Getenv("LEMON_SPAWN_TEST_CONTAINMENT")}
	if mut != nil {
		mut(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		st.Close()
		f.t.Fatal(err)
	}
	f.st, f.s = st, s
	f.all = append(f.all, s)
}

// reopen simulates a worker restart: a new store handle and Spawner on the
// same file. The old Spawner is abandoned without Close (as after SIGKILL).
func (f *fixture) reopen() {
	f.t.Helper()
	f.st.Close()
	f.s, f.st = nil, nil
	f.open(nil)
}

func req(id string, argv ...string) Request {
	return Request{ProcessID: id, Cwd: ".", Argv: argv, TimeoutMs: 30000, MaxOutputBytes: protocol.ProcessMaxOutputMax}
}

// Receipt is what these tests read of a run: how it ended, in the receipt
// vocabulary (the process module maps spawn.wait's facts the same way;
// docs/PROCESS.md, "The receipt machine in the module").
type Receipt struct {
	ProcessID       string
	State           string
	ExitCode        *int
	Stdout, Stderr  []byte
	OutputTruncated bool
}

// testRun is a started primitive run under a test's processId label.
type testRun struct {
	f                  *fixture
	id, run, principal string
	done               <-chan struct{}
	r                  *run
}

func (h *testRun) Done() <-chan struct{} { return h.done }

// Result waits for the run's end and reads it (spawn.wait); a failed first
// signal is the process_signal_failed error.
func (h *testRun) Result() (Receipt, error) {
	<-h.done
	end, _, known, err := h.f.s.WaitRun(h.run, h.principal)
	if err != nil {
		return Receipt{}, err
	}
	if !known {
		return Receipt{}, errors.New("the run is unknown")
	}
	return receiptOfEnd(h.id, end)
}

func receiptOfEnd(id string, e RunEnd) (Receipt, error) {
	rc := Receipt{ProcessID: id, Stdout: e.Stdout, Stderr: e.Stderr, OutputTruncated: e.OutputTruncated}
	switch {
	case e.SignalFailed:
		return Receipt{}, errSignalFailed()
	case e.ExitCode != nil:
		c := *e.ExitCode
		rc.ExitCode = &c
	case e.Signal > 0:
		c := -e.Signal
		rc.ExitCode = &c
	default:
		return Receipt{ProcessID: id, State: protocol.ProcessStateOutcomeUnknown, OutputTruncated: true}, nil
	}
	rc.State = protocol.ProcessStateCompleted
	if e.Stopped != "" {
		rc.State = protocol.ProcessStateCancelled
	}
	return rc, nil
}

// start starts r as a primitive run (spawn.start) labelled r.ProcessID;
// existing is always nil (receipts are the module's).
func (f *fixture) start(ctx context.Context, r Request) (h *testRun, existing *Receipt, err error) {
	run, done, err := f.s.StartRun(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	h = &testRun{f: f, id: r.ProcessID, run: run, principal: r.Auth.Principal, done: done}
	f.s.mu.Lock()
	h.r = f.s.runs[run]
	f.s.mu.Unlock()
	f.mu.Lock()
	f.runs[r.ProcessID] = h
	f.mu.Unlock()
	return h, nil, nil
}

// cancel signals the run labelled id once (spawn.signal): wait closes when
// it has ended; a run that had ended answers its receipt instead.
func (f *fixture) cancel(id string, _ uint64) (rc Receipt, wait <-chan struct{}, err error) {
	f.mu.Lock()
	h := f.runs[id]
	f.mu.Unlock()
	if h == nil {
		return Receipt{}, nil, errors.New("no run " + id)
	}
	out, err := f.s.SignalRun(h.run, h.principal)
	if err != nil {
		return Receipt{}, nil, err
	}
	if out == contract.SpawnExited {
		rc, err := h.Result()
		return rc, nil, err
	}
	return Receipt{}, h.done, nil
}

// nothingStarted checks that no run is active and no containment record
// is left: a refused start ran nothing.
func (f *fixture) nothingStarted() {
	f.t.Helper()
	if n := f.s.Active(); n != 0 {
		f.t.Fatalf("%d runs active after a refused start", n)
	}
	f.s.ns.View(func(tx *store.Tx) error {
		if n := tx.Count(primPrefix); n != 0 {
			f.t.Fatalf("%d containment records after a refused start", n)
		}
		return nil
	})
}

// run starts r and waits for its end.
func (f *fixture) run(r Request) (Receipt, error) {
	f.t.Helper()
	h, _, err := f.start(context.Background(), r)
	if err != nil {
		return Receipt{}, err
	}
	return h.Result()
}

func (f *fixture) mustRun(r Request) Receipt {
	f.t.Helper()
	rc, err := f.run(r)
	if err != nil {
		f.t.Fatalf("run %s: %v", r.ProcessID, err)
	}
	return rc
}

func domain(err error) string {
	if pe, ok := err.(*protocol.Error); ok {
		return pe.Code + "/" + pe.DomainCode()
	}
	if err == nil {
		return "<nil>"
	}
	return "non-protocol: " + err.Error()
}

func intp(v int) *int { return &v }

func exitOf(rc Receipt) string {
	if rc.ExitCode == nil {
		return "null"
	}
	return strconv.Itoa(*rc.ExitCode)
}

// liveInGroup lists processes of group pgid that are not zombies (a zombie
// reparented to a non-reaping init still shows in /proc).
func liveInGroup(t *testing.T, pgid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var live []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 3 {
			continue
		}
		state, pgrp := fields[0], fields[2]
		if pgrp == strconv.Itoa(pgid) && state != "Z" && state != "X" {
			live = append(live, pid)
		}
	}
	return live
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// settled polls cond for up to 5 s. SIGKILL is asynchronous: once it is
// queued the process runs no more user code, but it leaves /proc (or turns
// zombie) only when the kernel next schedules it, which on a loaded
// machine can be some milliseconds after the receipt is settled.
func settled(cond func() bool) bool {
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
	return true
}

// gone waits (bounded) until pid is no longer alive.
func gone(pid int) bool { return settled(func() bool { return !alive(pid) }) }

// groupGone waits (bounded) until process group pgid has no live member
// and returns the members still alive at the end.
func groupGone(t *testing.T, pgid int) []int {
	var live []int
	settled(func() bool { live = liveInGroup(t, pgid); return len(live) == 0 })
	return live
}
