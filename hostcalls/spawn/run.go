package spawn

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"lemon/hostcalls"
	"lemon/hostcalls/store"
	"lemon/protocol"
)

// Request is one node.process.run after validation. Stdin is the decoded
// stdinBase64; Timeout and MaxOutputBytes have passed the spec's limits
// (Start checks them again). Generation is the node session generation of
// the request (hostcalls.Invocation.SessionGeneration), Owner identifies
// the awaiting request (its invokeId).
type Request struct {
	ProcessID      string
	Cwd            string
	Argv           []string
	Stdin          []byte
	TimeoutMs      int64
	MaxOutputBytes int64
	Generation     uint64
	Owner          string
	// Auth is the request's execution context as the node enforces it
	// (hostcalls.Authority): its principal owns the run, its commands
	// narrow the worker policy's, its max_timeout_ms bounds TimeoutMs and
	// its sandbox asks for no_new_privs and a cgroup of the run's own. The
	// zero value is the worker policy alone.
	Auth hostcalls.Authority
	// Dirs admits cwd instead of Config.Dirs when set (a workspace view).
	Dirs DirResolver
	// OutputBudget caps the combined captured output, in bytes, at what
	// the requesting session can deliver (protocol.ProcessOutputBudget of
	// its MaxResultBytes); 0 leaves only the spawner's own budget. It is
	// not part of the intent: a retry over another connection is the same
	// request.
	OutputBudget int

	// timeout overrides TimeoutMs in this package's tests only.
	timeout time.Duration
	// runID is set for a primitive run (spawn.start, prim.go): no
	// receipt, its containment record is keyed p/<runID>, and ProcessID
	// is not used.
	runID string
}

// run is the supervisor of one process.
type run struct {
	s     *Spawner
	id    string
	gen   uint64
	owner string
	// principal is the execution context's principal the run belongs to.
	principal string
	cmd       *exec.Cmd
	pgid      int
	// cg is the run's cgroup (containCgroup), "" otherwise; leaderStart is
	// the leader's start time (/proc/PID/stat field 22), 0 if unknown.
	cg          string
	leaderStart uint64
	// reapedTick is when Wait returned (the leader was reaped at or
	// before it), in start-time ticks.
	reapedTick uint64
	out        *capture
	timer      *time.Timer
	// unwatch stops the request-context watch.
	unwatch func() bool
	done    chan struct{}

	mu       sync.Mutex
	finished bool
	reason   string // first stop reason, "" if never stopped
	sig      sigState
	pending  bool // a signal was asked for before pgid was known
	admitted int64

	// A primitive run (spawn.start): runID names it; exit is what
	// spawn.wait reports once done closed.
	runID string
	exit  primExit
}

type sigState int

const (
	sigNone   sigState = iota
	sigSent            // the group was signalled successfully (once)
	sigGone            // the group had no members left
	sigFailed          // the first attempt failed: the outcome is unknown
)

// killGroup sends SIGKILL to process group pgid; it refuses groups 0 and 1.
func killGroup(pgid int) error {
	if pgid <= 1 {
		return unix.EINVAL
	}
	return unix.Kill(-pgid, unix.SIGKILL)
}

// killMembers sends SIGKILL to the run's processes: its whole cgroup when
// it has one, else its process group and its leader (which may have left
// the group), and as subreaper also the run's descendants outside the
// group. unix.ESRCH means none was left.
func (r *run) killMembers() error {
	if r.cg != "" {
		return killCgroup(r.cg, r.s.contain.cg.hasKill)
	}
	// The group id names r's group only while the leader is unreaped; in
	// WaitDelay's phase it may already be free.
	err := error(unix.ESRCH)
	if leaderExists(r) {
		err = killGroup(r.pgid)
	}
	if errors.Is(err, unix.ESRCH) && r.cmd.Process.Kill() == nil {
		// The leader left its group and is not yet reaped: Go signals it
		// through its pidfd, never a reused pid.
		err = nil
	}
	if r.s.contain.mode == containSubreaper {
		// And the orphans and descendants outside the group that are r's.
		if n := r.s.contain.sweep(r, false); n > 0 && errors.Is(err, unix.ESRCH) {
			err = nil
		}
	}
	return err
}

// start admits and starts primitive run req.runID (s.mu not held): the
// 16-active budget (admissions in flight are waited for, not counted, so
// a refusal is exact), the command policy, the sandbox, cwd admission, the
// containment record (fsync'd before the exec), then the exec; an exec
// the OS refuses is an error and the record is deleted again.
func (s *Spawner) start(ctx context.Context, req Request) (*run, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, errClosed()
	}

	// Reserve an active slot. Admissions in flight may still fail (policy,
	// cwd, retained limit, exec), so they are waited for rather than
	// counted: only runs actually active refuse this one.
	s.mu.Lock()
	for !s.closed && len(s.active) < s.cfg.MaxActive && len(s.active)+s.admitting >= s.cfg.MaxActive {
		s.changed.Wait()
	}
	switch {
	case s.closed:
		s.mu.Unlock()
		return nil, errClosed()
	case len(s.active) >= s.cfg.MaxActive:
		s.mu.Unlock()
		return nil, errReceiptLimit(true)
	}
	s.admitting++
	s.mu.Unlock()
	joined := false
	defer func() {
		if !joined {
			s.mu.Lock()
			s.admitting--
			s.changed.Broadcast()
			s.mu.Unlock()
		}
	}()

	path, perr := s.resolveCommand(req.Argv[0])
	if perr != nil {
		return nil, perr
	}
	if !s.contextAllows(req.Auth, req.Argv[0], path) {
		return nil, errCommandNotAllowed()
	}
	if req.Auth.Sandbox && s.contain.cg == nil {
		return nil, errNoSandbox
	}
	dirs := req.Dirs
	if dirs == nil {
		dirs = s.cfg.Dirs
	}
	fd, _, derr := dirs.OpenDir(req.Cwd)
	if derr != nil {
		var pe *protocol.Error
		if errors.As(derr, &pe) {
			return nil, pe
		}
		return nil, protocol.DomainError(protocol.CodeForbidden, protocol.DomainPathNotAllowed,
			"cwd is outside the allowed roots").WithRetry(true, false)
	}
	defer unix.Close(fd)
	if ctxDone(ctx) {
		return nil, protocol.Errorf(protocol.CodeTimeout, "request ended before the process started").WithRetry(true, false)
	}

	now := s.cfg.Now().UnixMilli()
	rec := record{V: 1, State: protocol.ProcessStateRunning, Generation: req.Generation, AdmittedMs: now,
		Principal: req.Auth.Principal}
	cgDir := ""
	if s.contain.cg != nil {
		// Named (and recorded) before the commit, created after it: a
		// worker dying in between leaves a name with no cgroup.
		cgDir = s.contain.cg.runPath()
		rec.Cgroup, rec.Boot = cgDir, s.contain.boot
	}
	// The run keeps only where its processes live, so that a restarted
	// worker stops them (docs/PROCESS.md, "Spawn primitives").
	key := primPrefix + req.runID
	if err := s.ns.Batch(func(tx *store.Tx) error { return tx.Put(key, rec.encode()) }); err != nil {
		return nil, errStore()
	}
	unspend := func() error {
		return s.ns.Batch(func(tx *store.Tx) error { return tx.Delete(key) })
	}

	r := &run{s: s, gen: req.Generation, owner: req.Owner, principal: req.Auth.Principal,
		done: make(chan struct{}), admitted: now, cg: cgDir, runID: req.runID}
	limit := int(req.MaxOutputBytes)
	if limit > s.budget {
		limit = s.budget
	}
	if req.OutputBudget > 0 && limit > req.OutputBudget {
		limit = req.OutputBudget
	}
	r.out = &capture{limit: limit, onOverflow: func() { r.stop(reasonOverflow) }}
	cmd := exec.Command(path, req.Argv[1:]...)
	cmd.Args[0] = req.Argv[0] // literal argv: the program sees argv[0] as sent
	cmd.Env = s.cfg.Env
	// The admitted directory, by descriptor: the child chdirs through its
	// own copy of the descriptor table before exec, so a rename or symlink
	// swap of the path after admission cannot redirect it. The descriptor
	// is O_CLOEXEC and not inherited by the program.
	cmd.Dir = "/proc/self/fd/" + strconv.Itoa(fd)
	cmd.Stdin = bytes.NewReader(req.Stdin)
	cmd.Stdout = &stream{c: r.out, i: 0}
	cmd.Stderr = &stream{c: r.out, i: 1}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = s.cfg.WaitDelay
	r.cmd = cmd
	if cgDir != "" {
		// Cloned straight into its cgroup (clone3 CLONE_INTO_CGROUP): no
		// instant in which a fork of the child could escape it.
		_, cgFD, err := s.contain.cg.create(cgDir)
		if err != nil {
			unspend()
			return nil, protocol.Errorf(protocol.CodeInternal, "the process could not be contained").WithRetry(true, false)
		}
		defer unix.Close(cgFD)
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cgFD
	}
	if err := closeOnExecAbove2(); err != nil {
		unspend()
		if cgDir != "" {
			removeCgroupTree(cgDir)
		}
		return nil, protocol.Errorf(protocol.CodeInternal, "the process could not be started").WithRetry(true, false)
	}
	startCmd := func() error {
		children.forks.RLock()
		defer children.forks.RUnlock()
		err := cmd.Start()
		if err == nil {
			started(r, cmd.Process.Pid)
		}
		return err
	}
	var err error
	if req.Auth.Sandbox {
		err = startNoNewPrivs(startCmd)
	} else {
		err = startCmd()
	}
	if err != nil {
		if cgDir != "" {
			removeCgroupTree(cgDir)
		}
		unspend()
		return nil, startError(err)
	}
	if cgDir == "" && r.leaderStart != 0 {
		// Without a cgroup a restarted worker finds the run's processes by
		// its leader: pid, start time and boot, recorded once known. The
		// process already runs; a worker dying before this commit leaves
		// them unrecorded.
		rec.Pid, rec.PidStart, rec.Boot = cmd.Process.Pid, r.leaderStart, s.contain.boot
		s.ns.Batch(func(tx *store.Tx) error { return tx.Put(key, rec.encode()) })
	}
	r.mu.Lock()
	r.pgid = cmd.Process.Pid
	pending := r.pending
	r.mu.Unlock()
	if pending {
		r.signal() // a stop (output overflow) came before the pid was known
	}
	timeout := time.Duration(req.TimeoutMs) * time.Millisecond
	if req.timeout > 0 {
		timeout = req.timeout
	}
	r.timer = time.AfterFunc(timeout, func() { r.stop(reasonTimeout) })
	r.unwatch = context.AfterFunc(ctx, func() { r.stop(reasonAborted) })
	s.mu.Lock()
	s.active[activeKey(r)] = r
	s.runs[r.runID] = r
	s.admitting--
	joined = true
	s.changed.Broadcast()
	s.mu.Unlock()
	go r.wait()
	return r, nil
}

// closeOnExecAbove2 marks every descriptor above stderr close-on-exec, so a
// descriptor the worker inherited without O_CLOEXEC (Go opens its own with
// it) cannot leak into a child: the child gets stdin, stdout and stderr
// only. close_range(CLOSE_RANGE_CLOEXEC) does it in one call (Linux 5.11);
// older kernels get a /proc/self/fd sweep.
func closeOnExecAbove2() error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd < 3 {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && err != unix.EBADF {
			return err
		}
	}
	return nil
}

func validateRequest(req Request) *protocol.Error {
	if err := protocol.ValidateProcessID(req.ProcessID); err != nil {
		return err
	}
	if err := protocol.ValidateProcessCwd(req.Cwd); err != nil {
		return err
	}
	if err := protocol.ValidateProcessArgv(req.Argv); err != nil {
		return err
	}
	if err := protocol.ValidateProcessStdinSize(len(req.Stdin)); err != nil {
		return err
	}
	if req.TimeoutMs < protocol.ProcessTimeoutMinMs || req.TimeoutMs > protocol.ProcessTimeoutMaxMs {
		return protocol.InvalidParams("timeoutMs", "timeoutMs must be an integer from 1000 to 1800000")
	}
	if req.MaxOutputBytes < protocol.ProcessMaxOutputMin || req.MaxOutputBytes > protocol.ProcessMaxOutputMax {
		return protocol.InvalidParams("maxOutputBytes", "maxOutputBytes must be an integer from 1 to 1048576")
	}
	return nil
}

// startError classifies an exec failure without its text (which names the
// path). Nothing executed, so every one is retry-safe.
func startError(err error) *protocol.Error {
	var e *protocol.Error
	switch {
	case errors.Is(err, syscall.E2BIG):
		e = protocol.DomainError(protocol.CodeInvalidParams, protocol.DomainArgumentListTooLong, "the OS refused the argument list as too long (E2BIG)")
		e.Details.Field = "argv"
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTDIR):
		e = protocol.DomainError(protocol.CodeNotFound, protocol.DomainExecutableNotFound, "executable not found")
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		e = protocol.DomainError(protocol.CodeForbidden, protocol.DomainPermissionDenied, "the OS refused to execute the command")
	case errors.Is(err, syscall.ENOEXEC):
		e = protocol.DomainError(protocol.CodeInvalidParams, protocol.DomainExecFormat, "the file is not an executable format the OS can run")
	default:
		e = protocol.Errorf(protocol.CodeInternal, "the process could not be started")
	}
	return e.WithRetry(true, false)
}

// stop ends the run for reason: the first reason wins and the group is
// signalled (at most once successfully). A finished run ignores it.
func (r *run) stop(reason string) {
	r.mu.Lock()
	if r.finished {
		r.mu.Unlock()
		return
	}
	if r.reason == "" {
		r.reason = reason
	}
	r.mu.Unlock()
	r.signal()
}

// signal sends SIGKILL to the process group unless it was already tried.
// ESRCH means every member is gone (nothing to signal); any other first
// failure makes the outcome unknown and is never retried.
func (r *run) signal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.signalLocked()
}

// signalLocked is signal with r.mu held.
func (r *run) signalLocked() {
	if r.sig != sigNone {
		return
	}
	if r.pgid <= 1 {
		// The copy goroutines run from inside cmd.Start; never signal
		// group 0 (our own) or 1.
		r.pending = true
		return
	}
	switch err := r.s.killFn(r); {
	case err == nil:
		r.sig = sigSent
	case errors.Is(err, unix.ESRCH):
		r.sig = sigGone
	default:
		r.sig = sigFailed
	}
}

// wait reaps the process, records how it ended (spawn.wait) and releases
// the run.
func (r *run) wait() {
	werr := r.cmd.Wait()
	r.reapedTick = nowTicks()
	r.timer.Stop()
	r.unwatch()
	stdoutEOF, stderrEOF := r.out.eofs()
	pipesClosed := stdoutEOF && stderrEOF
	if !pipesClosed {
		// A descendant kept a pipe open past WaitDelay: clean up the
		// group (unless it was already signalled).
		r.signal()
	}
	r.mu.Lock()
	r.finished = true
	reason, sig := r.reason, r.sig
	r.mu.Unlock()
	// Whatever the run left (a setsid'd daemon, an orphan, a grandchild in
	// the group) dies now, before the run counts as ended.
	r.s.contain.release(r, sig == sigSent)

	var exit *int
	if ps := r.cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
			switch {
			case ws.Exited():
				c := ws.ExitStatus()
				exit = &c
			case ws.Signaled():
				c := -int(ws.Signal())
				exit = &c
			}
		}
	}
	_ = werr // the state below comes from the observed wait status

	stdout, stderr, overflow := r.out.result()
	r.finishPrim(exit, reason, sig, stdout, stderr, overflow || !pipesClosed, r.s.cfg.Now().UnixMilli())
}

// capture collects stdout and stderr under one combined byte limit. It
// implements io.ReaderFrom for each stream so it sees whether a pipe ended
// at EOF or was closed by WaitDelay.
type capture struct {
	mu         sync.Mutex
	limit      int
	total      int
	bufs       [2][]byte
	eof        [2]bool
	overflow   bool
	onOverflow func()
}

func (c *capture) add(i int, p []byte) {
	c.mu.Lock()
	room := c.limit - c.total
	n := len(p)
	if n > room {
		n = room
	}
	if n > 0 {
		c.bufs[i] = append(c.bufs[i], p[:n]...)
		c.total += n
	}
	first := false
	if n < len(p) && !c.overflow {
		c.overflow, first = true, true
	}
	c.mu.Unlock()
	if first {
		c.onOverflow()
	}
}

func (c *capture) eofs() (bool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.eof[0], c.eof[1]
}

// result returns copies-free final buffers: known zero bytes are empty,
// non-nil slices.
func (c *capture) result() (stdout, stderr []byte, overflow bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	stdout, stderr = c.bufs[0], c.bufs[1]
	if stdout == nil {
		stdout = []byte{}
	}
	if stderr == nil {
		stderr = []byte{}
	}
	return stdout, stderr, c.overflow
}

// stream is one of the two pipes of a capture.
type stream struct {
	c *capture
	i int
}

func (w *stream) Write(p []byte) (int, error) {
	w.c.add(w.i, p)
	return len(p), nil
}

// ReadFrom drains r until EOF (recorded) or an error (a pipe closed by
// WaitDelay), keeping what fits under the limit and discarding the rest.
func (w *stream) ReadFrom(r io.Reader) (int64, error) {
	buf := make([]byte, 32<<10)
	var total int64
	for {
		n, err := r.Read(buf)
		if n > 0 {
			total += int64(n)
			w.c.add(w.i, buf[:n])
		}
		if err == io.EOF {
			w.c.mu.Lock()
			w.c.eof[w.i] = true
			w.c.mu.Unlock()
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}
