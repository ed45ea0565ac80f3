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

// Run is a started process. Done closes when its receipt is final and
// durable; Result then returns the receipt with the full captured output,
// or the error that ended it (process_signal_failed).
type Run struct{ r *run }

// Done closes when the run's receipt is final.
func (h Run) Done() <-chan struct{} { return h.r.done }

// Result returns the final receipt; call it after Done closed.
func (h Run) Result() (Receipt, error) {
	<-h.r.done
	if h.r.finalErr != nil {
		return Receipt{}, h.r.finalErr
	}
	return h.r.final, nil
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

	// Set before done closes.
	terminal record
	final    Receipt
	finalErr *protocol.Error

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

// Start admits and starts a run (spec "Native processes"). While it holds
// processId's gate (so no other run, get or cancel of that id interleaves)
// it decides:
//
//   - processId already has a record: nothing runs; existing is the
//     receipt (existingReceipt) or err is CONFLICT process_id_conflict;
//   - 16 runs active: process_receipt_limit. Admissions of other ids still
//     in flight are waited for, not counted, so the refusal is exact;
//   - argv[0] refused by policy: FORBIDDEN command_not_allowed; not an
//     executable: NOT_FOUND executable_not_found / FORBIDDEN
//     permission_denied; cwd not admitted: the resolver's error;
//   - 1,000 ids retained: process_receipt_limit, decided in the same
//     transaction that writes the running record, which is committed
//     (fsync) before the process starts. If the OS then refuses it (ENOENT,
//     EACCES, E2BIG, ENOEXEC) the record is removed again and the error
//     returned: nothing executed, so the id is not spent.
//
// ctx is the awaiting request's context: when it ends first, the run is
// stopped like a cancel.
func (s *Spawner) Start(ctx context.Context, req Request) (handle *Run, existing *Receipt, err error) {
	if perr := validateRequest(req); perr != nil {
		return nil, nil, perr
	}
	if limit := req.Auth.MaxTimeoutMs; limit > 0 && req.TimeoutMs > limit {
		return nil, nil, errTimeoutLimit
	}
	if limit := req.Auth.MaxOutputBytes; limit > 0 && req.MaxOutputBytes > limit {
		return nil, nil, errOutputLimit
	}
	intent := s.bind(req)
	s.lockID(req.ProcessID)
	defer s.unlockID(req.ProcessID)
	return s.start(ctx, req, intent)
}

// start is Start with processId's gate held (and s.mu not held).
func (s *Spawner) start(ctx context.Context, req Request, intent []byte) (*Run, *Receipt, error) {
	id := req.ProcessID
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, nil, errClosed()
	}
	var rec record
	found := false
	if req.runID == "" {
		var lerr error
		rec, found, lerr = s.load(id)
		if lerr != nil {
			return nil, nil, errStore()
		}
	}
	if found {
		s.mu.Lock()
		rc, err := s.existingReceipt(id, rec, intent, req.Auth.Principal)
		s.mu.Unlock()
		if err != nil {
			return nil, nil, err
		}
		return nil, &rc, nil
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
		return nil, nil, errClosed()
	case len(s.active) >= s.cfg.MaxActive:
		s.mu.Unlock()
		return nil, nil, errReceiptLimit(true)
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
		return nil, nil, perr
	}
	if !s.contextAllows(req.Auth, req.Argv[0], path) {
		return nil, nil, errCommandNotAllowed()
	}
	if req.Auth.Sandbox && s.contain.cg == nil {
		return nil, nil, errNoSandbox
	}
	dirs := req.Dirs
	if dirs == nil {
		dirs = s.cfg.Dirs
	}
	fd, _, derr := dirs.OpenDir(req.Cwd)
	if derr != nil {
		var pe *protocol.Error
		if errors.As(derr, &pe) {
			return nil, nil, pe
		}
		return nil, nil, protocol.DomainError(protocol.CodeForbidden, protocol.DomainPathNotAllowed,
			"cwd is outside the allowed roots").WithRetry(true, false)
	}
	defer unix.Close(fd)
	if ctxDone(ctx) {
		return nil, nil, protocol.Errorf(protocol.CodeTimeout, "request ended before the process started").WithRetry(true, false)
	}

	now := s.cfg.Now().UnixMilli()
	rec = record{V: 1, State: protocol.ProcessStateRunning, Intent: intent, Generation: req.Generation, AdmittedMs: now,
		Principal: req.Auth.Principal}
	cgDir := ""
	if s.contain.cg != nil {
		// Named (and recorded) before the commit, created after it: a
		// worker dying in between leaves a name with no cgroup.
		cgDir = s.contain.cg.runPath()
		rec.Cgroup, rec.Boot = cgDir, s.contain.boot
	}
	full := false
	key := recordPrefix + id
	if req.runID != "" {
		// A primitive run keeps only where its processes live, so that a
		// restarted worker stops them; retention is the caller's.
		key, rec.Intent = primPrefix+req.runID, nil
	}
	// The retained count and the write are one check-and-write inside the
	// group transaction: the functions batched before this one are counted.
	// A full store is a decision (nil, no write), not an error, so it does
	// not roll back the other admissions sharing the commit.
	err := s.ns.Batch(func(tx *store.Tx) error {
		if req.runID != "" {
			return tx.Put(key, rec.encode())
		}
		full = false
		if _, ok := tx.Get(recordPrefix + id); ok {
			return errBadRecord // impossible under the gate; refuse rather than overwrite
		}
		if tx.Count(recordPrefix) >= s.cfg.MaxRetained {
			full = true
			return nil
		}
		return tx.Put(recordPrefix+id, rec.encode())
	})
	if err != nil {
		return nil, nil, errStore()
	}
	if full {
		return nil, nil, errReceiptLimit(false)
	}
	unspend := func() error {
		return s.ns.Batch(func(tx *store.Tx) error { return tx.Delete(key) })
	}

	r := &run{s: s, id: id, gen: req.Generation, owner: req.Owner, principal: req.Auth.Principal,
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
			return nil, nil, protocol.Errorf(protocol.CodeInternal, "the process could not be contained").WithRetry(true, false)
		}
		defer unix.Close(cgFD)
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cgFD
	}
	if err := closeOnExecAbove2(); err != nil {
		unspend()
		if cgDir != "" {
			removeCgroupTree(cgDir)
		}
		return nil, nil, protocol.Errorf(protocol.CodeInternal, "the process could not be started").WithRetry(true, false)
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
	if req.Auth.Sandbox {
		err = startNoNewPrivs(startCmd)
	} else {
		err = startCmd()
	}
	if err != nil {
		if cgDir != "" {
			removeCgroupTree(cgDir)
		}
		derr := unspend()
		serr := startError(err)
		if derr != nil && req.runID == "" {
			// The id stays spent: its durable record says running and
			// becomes outcome_unknown at the next start; until then this
			// worker answers outcome_unknown from memory. The caller
			// learns that nothing ran.
			gone := &run{id: id, done: make(chan struct{}),
				terminal: record{V: 1, State: protocol.ProcessStateOutcomeUnknown, Intent: intent, Principal: req.Auth.Principal}}
			close(gone.done)
			s.mu.Lock()
			s.unsaved[id] = gone
			s.mu.Unlock()
			serr.WithRetry(false, false)
		}
		return nil, nil, serr
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
	if r.runID != "" {
		s.runs[r.runID] = r
	}
	s.admitting--
	joined = true
	s.changed.Broadcast()
	s.mu.Unlock()
	go r.wait()
	return &Run{r: r}, nil, nil
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

// wait reaps the process, settles the receipt, persists it and releases
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
	// the group) dies now, before the receipt is final.
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
	truncated := overflow || !pipesClosed
	now := r.s.cfg.Now().UnixMilli()
	term := record{V: 1, Generation: r.gen, AdmittedMs: r.admitted, EndedMs: now, Principal: r.principal}
	switch {
	case sig == sigFailed:
		term.State, term.Reason = protocol.ProcessStateOutcomeUnknown, reasonSignal
		r.finalErr = protocol.DomainError(protocol.CodeInternal, protocol.DomainProcessSignalFailed,
			"the process group could not be stopped; its outcome is unknown").WithRetry(false, true)
	case exit == nil:
		term.State = protocol.ProcessStateOutcomeUnknown
	case sig == sigSent && reason != "":
		term.State, term.Reason, term.ExitCode = protocol.ProcessStateCancelled, reason, exit
	default:
		// It ended on its own (a late stop found the group gone, or the
		// only signal was the cleanup of descendants after it exited).
		term.State, term.ExitCode = protocol.ProcessStateCompleted, exit
		if overflow {
			term.Reason = reasonOverflow
		}
	}
	if r.runID != "" {
		r.finishPrim(exit, reason, sig, stdout, stderr, truncated, now)
		return
	}
	rc := Receipt{ProcessID: r.id, State: term.State, ExitCode: term.ExitCode,
		Stdout: stdout, Stderr: stderr, OutputTruncated: truncated}
	if term.State == protocol.ProcessStateOutcomeUnknown {
		rc = unknownOutputs(r.id, term.State, nil)
	}
	r.terminal, r.final = term, rc

	// The terminal record is durable (or kept in unsaved) before the run
	// leaves active and done closes, i.e. before any reply carries it.
	s := r.s
	s.lockID(r.id)
	err := s.ns.Batch(func(tx *store.Tx) error {
		term.Intent = nil
		if v, ok := tx.Get(recordPrefix + r.id); ok {
			if old, err := decodeRecord(v); err == nil {
				term.Intent = old.Intent
			}
		}
		return tx.Put(recordPrefix+r.id, term.encode())
	})
	s.mu.Lock()
	if err != nil {
		s.unsaved[r.id] = r
	}
	if rc.Stdout != nil {
		s.cache.put(r.id, rc.Stdout, rc.Stderr, rc.OutputTruncated)
	}
	delete(s.active, r.id)
	s.changed.Broadcast()
	key := ownerKey(r.owner, r.id)
	s.owners[key] = r
	s.mu.Unlock()
	s.unlockID(r.id)
	close(r.done)
	// The owning request collects its result at once when it resumes;
	// forget it if it never does.
	time.AfterFunc(time.Minute, func() {
		s.mu.Lock()
		if s.owners[key] == r {
			delete(s.owners, key)
		}
		s.mu.Unlock()
	})
}

func ownerKey(owner, id string) string { return owner + "\x00" + id }

// collect returns the final result of the run that owner started under
// processId, once; ok is false if there is none (never started by owner,
// or already collected).
func (s *Spawner) collect(owner, id string) (r *run, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := ownerKey(owner, id)
	r, ok = s.owners[key]
	delete(s.owners, key)
	return r, ok
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
