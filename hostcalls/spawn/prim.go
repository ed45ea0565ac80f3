package spawn

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"lemon/hostcalls"
	"lemon/hostcalls/contract"
	"lemon/hostcalls/store"
	"lemon/protocol"
)

// The spawn primitives (docs/PROCESS.md, "Spawn primitives"): spawn.start,
// spawn.wait and spawn.signal run a process as an effect and nothing more.
// They keep what must hold whatever a module does: the argv/cwd/stdin
// limits, the command policy and the execution context's commands,
// max_timeout_ms and max_output_bytes, the sandbox, the active-run budget
// (shared with spawn.run), cwd confinement by descriptor, containment, one
// group signal per run, ownership by principal, and a durable record of
// where a run's processes live so that a restarted worker stops them. They
// keep no receipt: idempotence, tombstones, retention and the output cache
// belong to the module that calls them.

// primPrefix keys the containment records of primitive runs in the spawn
// namespace; New stops their survivors and deletes them.
const primPrefix = "p/"

// Ended runs (with their output, at most 1 MiB each: maxOutputBytes)
// stay known to spawn.wait until their module releases them
// (spawn.release), within three bounds (docs/PROCESS.md, "Spawn
// primitives"):
//
//   - primMaxEnded per principal: past it that principal's own oldest
//     ended run is forgotten first, so another principal finishing runs
//     never makes yours "unknown";
//   - primMaxEndedNode runs and primMaxEndedBytes bytes of output on the
//     node, a backstop against many principals: past either, the oldest
//     run of the principal holding the most ended runs (or output bytes)
//     is forgotten first, so a principal loses a run to another only
//     while it holds at least as many (or as many bytes) as any other.
//
// A module that keeps outputs for later requests (an output cache) holds
// fewer and releases the rest; the bounds are the host's memory budget
// whatever a module does.
const (
	primMaxEnded      = 64
	primMaxEndedNode  = 1024
	primMaxEndedBytes = 64 << 20
)

// endedLoad is what one principal's ended runs hold.
type endedLoad struct {
	runs  int
	bytes int64
}

// primExit is how a primitive run ended (contract.SpawnExit without blobs).
type primExit struct {
	exitCode       *int
	signal         int
	stopped        string
	signalFailed   bool
	startedMs      int64
	endedMs        int64
	stdout, stderr []byte
	truncated      bool
}

// activeKey is the key of r in Spawner.active: its processId, or for a
// primitive run a key no processId can take.
func activeKey(r *run) string {
	if r.runID != "" {
		return "\x00" + r.runID
	}
	return r.id
}

// finishPrim settles a primitive run: its containment record is deleted,
// it leaves the active set, done closes, and spawn.wait can read it until
// it is released or forgotten past the bounds (recordEnded). Called from run.wait with the wait status decoded (exit is the
// exit status, or minus the signal number).
func (r *run) finishPrim(exit *int, reason string, sig sigState, stdout, stderr []byte, truncated bool, nowMs int64) {
	e := primExit{startedMs: r.admitted, endedMs: nowMs, stdout: stdout, stderr: stderr, truncated: truncated,
		signalFailed: sig == sigFailed}
	if exit != nil {
		if *exit < 0 {
			e.signal = -*exit
		} else {
			c := *exit
			e.exitCode = &c
		}
	}
	if sig == sigSent {
		e.stopped = reason
	}
	r.exit = e
	s := r.s
	// Best effort: a record left behind only makes the next worker look
	// for processes that are gone (its pid pin and boot id refuse a reused
	// pid; docs/PROCESS.md, "Containment").
	s.ns.Batch(func(tx *store.Tx) error { return tx.Delete(primPrefix + r.runID) })
	s.mu.Lock()
	delete(s.active, activeKey(r))
	s.changed.Broadcast()
	s.recordEnded(r)
	s.mu.Unlock()
	close(r.done)
}

// outputBytes is the output ended run r holds.
func (r *run) outputBytes() int64 { return int64(len(r.exit.stdout) + len(r.exit.stderr)) }

// recordEnded adds ended run r to the runs spawn.wait knows, then forgets
// runs past the bounds (primMaxEnded; s.mu held).
func (s *Spawner) recordEnded(r *run) {
	s.ended = append(s.ended, r)
	l := s.endedBy[r.principal]
	l.runs++
	l.bytes += r.outputBytes()
	s.endedBy[r.principal] = l
	s.endedBytes += r.outputBytes()
	for s.endedBy[r.principal].runs > primMaxEnded {
		s.dropEnded(s.oldestEndedOf(r.principal))
	}
	for len(s.ended) > primMaxEndedNode {
		s.dropEnded(s.oldestEndedOf(s.heaviest(func(l endedLoad) int64 { return int64(l.runs) })))
	}
	for s.endedBytes > primMaxEndedBytes {
		s.dropEnded(s.oldestEndedOf(s.heaviest(func(l endedLoad) int64 { return l.bytes })))
	}
}

// heaviest is the principal with the most ended runs by weight (ties: the
// one with the oldest ended run; s.mu held).
func (s *Spawner) heaviest(weight func(endedLoad) int64) string {
	best, bestW := "", int64(-1)
	for _, r := range s.ended {
		if w := weight(s.endedBy[r.principal]); w > bestW {
			best, bestW = r.principal, w
		}
	}
	return best
}

// oldestEndedOf is the index in s.ended of principal's oldest ended run
// (s.mu held; principal holds one).
func (s *Spawner) oldestEndedOf(principal string) int {
	for i, r := range s.ended {
		if r.principal == principal {
			return i
		}
	}
	panic("spawn: no ended run of the principal")
}

// dropEnded forgets s.ended[i] and its output (s.mu held).
func (s *Spawner) dropEnded(i int) {
	r := s.ended[i]
	s.forgetRun(r)
	s.ended = append(s.ended[:i:i], s.ended[i+1:]...)
	l := s.endedBy[r.principal]
	l.runs--
	l.bytes -= r.outputBytes()
	if l.runs == 0 {
		delete(s.endedBy, r.principal)
	} else {
		s.endedBy[r.principal] = l
	}
	s.endedBytes -= r.outputBytes()
}

// forgetRun drops ended run r from the runs spawn.wait knows (s.mu held).
func (s *Spawner) forgetRun(r *run) {
	if s.runs[r.runID] == r {
		delete(s.runs, r.runID)
	}
}

// ReleaseRun is the spawn.release primitive in Go: it forgets ended run id
// and its output. It answers true when it released the run, false when
// this worker has no such ended run (unknown, already released, or still
// running: a run in progress is never released). Another principal's run
// is FORBIDDEN process_not_owner.
func (s *Spawner) ReleaseRun(id, principal string) (bool, error) {
	r, err := s.lookupRun(id, principal)
	if err != nil || r == nil {
		return false, err
	}
	select {
	case <-r.done:
	default:
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs[id] != r {
		return false, nil
	}
	for i, e := range s.ended {
		if e == r {
			s.dropEnded(i)
			return true, nil
		}
	}
	s.forgetRun(r)
	return true, nil
}

// StartRun is the spawn.start primitive in Go: it checks req (ProcessID is
// ignored), admits its cwd, and starts it under containment. The returned
// id names the run for WaitRun and SignalRun (req.runID when the caller
// chose it: a run id this worker knows or is starting is CONFLICT
// already_exists); done closes when it has ended. Errors are *protocol.Error: the node.process.run limits
// (INVALID_PARAMS), the policy (FORBIDDEN command_not_allowed,
// limit_exceeded, sandbox_unavailable), cwd admission, an exec the OS
// refuses (executable_not_found, permission_denied, exec_format_error,
// argument_list_too_long; nothing ran), 16 runs active
// (UNAVAILABLE process_receipt_limit) or a store failure.
func (s *Spawner) StartRun(ctx context.Context, req Request) (id string, done <-chan struct{}, err error) {
	req.ProcessID = ""
	if perr := validatePrim(req); perr != nil {
		return "", nil, perr
	}
	if limit := req.Auth.MaxTimeoutMs; limit > 0 && req.TimeoutMs > limit {
		return "", nil, errTimeoutLimit
	}
	if limit := req.Auth.MaxOutputBytes; limit > 0 && req.MaxOutputBytes > limit {
		return "", nil, errOutputLimit
	}
	if req.runID == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", nil, protocol.Errorf(protocol.CodeInternal, "no run id could be drawn")
		}
		req.runID = "r" + hex.EncodeToString(b[:])
	} else {
		// The caller chose the id (to record it durably before the
		// start): it must name no run this worker knows or is starting.
		if err := validRunID(req.runID); err != nil {
			return "", nil, err
		}
		s.mu.Lock()
		if s.runs[req.runID] != nil || s.claimed[req.runID] {
			s.mu.Unlock()
			return "", nil, errRunIDInUse
		}
		s.claimed[req.runID] = true
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.claimed, req.runID)
			s.mu.Unlock()
		}()
	}
	r, err := s.start(ctx, req)
	if err != nil {
		return "", nil, err
	}
	return req.runID, r.done, nil
}

// errRunIDInUse refuses a spawn.start whose chosen run id names a run this
// worker knows (or is starting).
var errRunIDInUse = protocol.DomainError(protocol.CodeConflict, protocol.DomainAlreadyExists,
	"the run id is in use on this worker; nothing was started").WithRetry(true, false)

func validatePrim(req Request) *protocol.Error {
	req.ProcessID = "x" // not part of a primitive run
	return validateRequest(req)
}

// lookupRun finds run id for principal: nil when this worker has none;
// FORBIDDEN process_not_owner when another principal started it.
func (s *Spawner) lookupRun(id, principal string) (*run, error) {
	s.mu.Lock()
	r := s.runs[id]
	s.mu.Unlock()
	if r == nil {
		return nil, nil
	}
	if r.principal != principal {
		return nil, errNotOwner()
	}
	return r, nil
}

// SignalRun is the spawn.signal primitive in Go: run id's group gets its
// one SIGKILL (stop reason "cancel"). It answers contract.SpawnSignalSent,
// SpawnSignalGone (nothing was left), SpawnSignalAlready (signalled
// before, never again), SpawnExited or SpawnUnknown; a failed first signal
// is INTERNAL_ERROR process_signal_failed (the run's outcome is unknown).
func (s *Spawner) SignalRun(id, principal string) (string, error) {
	r, err := s.lookupRun(id, principal)
	if err != nil {
		return "", err
	}
	if r == nil {
		return contract.SpawnUnknown, nil
	}
	// The check and the signal are one step under r.mu, so the outcome
	// names this call's own signal, never one a timeout sent meanwhile.
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.finished:
		return contract.SpawnExited, nil
	case r.sig != sigNone || r.pending:
		return contract.SpawnSignalAlready, nil
	}
	if r.reason == "" {
		r.reason = reasonCancel
	}
	r.signalLocked()
	switch r.sig {
	case sigSent:
		return contract.SpawnSignalSent, nil
	case sigGone:
		return contract.SpawnSignalGone, nil
	}
	return "", errSignalFailed()
}

func errSignalFailed() *protocol.Error {
	return protocol.DomainError(protocol.CodeInternal, protocol.DomainProcessSignalFailed,
		"the process group could not be stopped; its outcome is unknown").WithRetry(false, true)
}

// The errors of the primitives, as data for docs/HOSTCALLS.md.
var (
	startErrors = []hostcalls.ErrorSpec{
		hostcalls.Err(protocol.InvalidParams("stdinBlob", ""), "stdinBlob names no input blob"),
		{Code: protocol.CodeInvalidParams, When: "cwd, argv, stdin, timeoutMs or maxOutputBytes break the node.process.run limits"},
		hostcalls.Err(protocol.DomainError(protocol.CodeForbidden, protocol.DomainCommandNotAllowed, ""), "the worker policy or the execution context does not allow argv"),
		hostcalls.Err(errTimeoutLimit, "timeoutMs exceeds the execution context's max_timeout_ms"),
		hostcalls.Err(errOutputLimit, "maxOutputBytes exceeds the execution context's max_output_bytes"),
		hostcalls.Err(errNoSandbox, "the execution context asks for a sandbox and the node has no cgroup for the run"),
		hostcalls.Err(protocol.DomainError(protocol.CodeForbidden, protocol.DomainPathNotAllowed, ""), "cwd is outside the allowed roots, or outside the execution context's workspace"),
		hostcalls.Err(protocol.DomainError(protocol.CodeInvalidRequest, protocol.DomainNotDirectory, ""), "cwd is not a directory"),
		hostcalls.Err(protocol.DomainError(protocol.CodeNotFound, protocol.DomainExecutableNotFound, ""), "argv[0] is not found"),
		hostcalls.Err(protocol.DomainError(protocol.CodeForbidden, protocol.DomainPermissionDenied, ""), "argv[0] or cwd is not accessible"),
		hostcalls.Err(protocol.DomainError(protocol.CodeInvalidParams, protocol.DomainExecFormat, ""), "argv[0] is not an executable format"),
		hostcalls.Err(protocol.DomainError(protocol.CodeInvalidParams, protocol.DomainArgumentListTooLong, ""), "the OS refuses argv as too long"),
		hostcalls.Err(protocol.DomainError(protocol.CodeUnavailable, protocol.DomainProcessReceiptLimit, ""), "the node already runs its maximum of processes"),
		hostcalls.Err(protocol.DomainError(protocol.CodeUnavailable, protocol.DomainProcessStoreUnavailable, ""), "the containment record could not be written"),
		hostcalls.Err(protocol.InvalidParams("run", ""), "run is given and is not a run id"),
		hostcalls.Err(errRunIDInUse, "run names a run this worker knows or is starting"),
	}
	refErrors = []hostcalls.ErrorSpec{
		hostcalls.Err(protocol.InvalidParams("run", ""), "run is not a run id"),
		hostcalls.Err(protocol.DomainError(protocol.CodeForbidden, protocol.DomainProcessNotOwner, ""), "the run belongs to another principal"),
	}
	signalErrors = append(refErrors[:len(refErrors):len(refErrors)],
		hostcalls.Err(protocol.DomainError(protocol.CodeInternal, protocol.DomainProcessSignalFailed, ""), "the group could not be signalled; the outcome is unknown"))
)

// primTable returns the primitives (capability exec).
func (s *Spawner) primTable() hostcalls.Table {
	return hostcalls.Table{
		hostcalls.Define(contract.SpawnStart, hostcalls.CapExec, hostcalls.AuditMutation, s.hcStart, startErrors...),
		hostcalls.Define(contract.SpawnWait, hostcalls.CapExec, hostcalls.AuditRead, s.hcWait, refErrors...),
		hostcalls.Define(contract.SpawnSignal, hostcalls.CapExec, hostcalls.AuditMutation, s.hcSignal, signalErrors...),
		hostcalls.Define(contract.SpawnRelease, hostcalls.CapExec, hostcalls.AuditRead, s.hcRelease, refErrors...),
	}
}

func (s *Spawner) hcStart(ctx context.Context, call hostcalls.Call, a contract.SpawnStartArgs) (contract.SpawnStartResult, error) {
	stdin, ok := call.Blob(a.StdinBlob)
	if !ok {
		return contract.SpawnStartResult{}, protocol.InvalidParams("stdinBlob", "stdin blob is missing")
	}
	inv := call.Invocation()
	dirs, release, err := s.workspaceDirs(inv.Authority)
	if err != nil {
		return contract.SpawnStartResult{}, err
	}
	defer release()
	id, done, err := s.StartRun(ctx, Request{runID: a.Run, Cwd: a.Cwd, Argv: a.Argv, Stdin: stdin,
		TimeoutMs: a.TimeoutMs, MaxOutputBytes: a.MaxOutputBytes,
		Generation: inv.SessionGeneration, Owner: inv.InvokeID,
		OutputBudget: protocol.ProcessOutputBudget(inv.ResultRoom()),
		Auth:         inv.Authority, Dirs: dirs})
	if err != nil {
		return contract.SpawnStartResult{}, err
	}
	return contract.SpawnStartResult{Run: id, Handle: call.Await(done)}, nil
}

// workspaceDirs is the resolver of an execution context's workspace (nil:
// the node's roots) and its release (docs/PROCESS.md, "Workspaces").
func (s *Spawner) workspaceDirs(auth hostcalls.Authority) (DirResolver, func(), error) {
	ws := auth.Workspace
	if ws == "" {
		return nil, func() {}, nil
	}
	if s.cfg.Workspace == nil {
		return nil, nil, errCwdNotAllowed()
	}
	view, release, err := s.cfg.Workspace(ws)
	if err != nil {
		return nil, nil, errCwdNotAllowed()
	}
	return view, release, nil
}

func validRunID(id string) error {
	if len(id) != 17 || id[0] != 'r' {
		return protocol.InvalidParams("run", "run is not a run id")
	}
	if _, err := hex.DecodeString(id[1:]); err != nil {
		return protocol.InvalidParams("run", "run is not a run id")
	}
	return nil
}

// RunEnd is how an ended primitive run ended: spawn.wait's exit in Go,
// with the output bytes themselves.
type RunEnd struct {
	ExitCode        *int
	Signal          int
	Stopped         string
	SignalFailed    bool
	StartedMs       int64
	EndedMs         int64
	Stdout, Stderr  []byte
	OutputTruncated bool
}

// WaitRun is spawn.wait in Go for principal's run id: known is false when
// this worker has no such run; done is non-nil (wait on it, then ask
// again) while the run is in progress. Another principal's run is
// FORBIDDEN process_not_owner.
func (s *Spawner) WaitRun(id, principal string) (end RunEnd, done <-chan struct{}, known bool, err error) {
	r, err := s.lookupRun(id, principal)
	if err != nil || r == nil {
		return RunEnd{}, nil, false, err
	}
	select {
	case <-r.done:
	default:
		return RunEnd{}, r.done, true, nil
	}
	e := r.exit
	return RunEnd{ExitCode: e.exitCode, Signal: e.signal, Stopped: e.stopped, SignalFailed: e.signalFailed,
		StartedMs: e.startedMs, EndedMs: e.endedMs, Stdout: e.stdout, Stderr: e.stderr, OutputTruncated: e.truncated}, nil, true, nil
}

func (s *Spawner) hcWait(ctx context.Context, call hostcalls.Call, a contract.SpawnRunRef) (contract.SpawnWaitResult, error) {
	if err := validRunID(a.Run); err != nil {
		return contract.SpawnWaitResult{}, err
	}
	r, err := s.lookupRun(a.Run, call.Invocation().Authority.Principal)
	if err == nil && r == nil {
		s.mu.Lock()
		starting := s.claimed[a.Run]
		s.mu.Unlock()
		if starting {
			return contract.SpawnWaitResult{State: contract.SpawnStarting}, nil
		}
	}
	if err != nil || r == nil {
		return contract.SpawnWaitResult{State: contract.SpawnUnknown}, err
	}
	select {
	case <-r.done:
	default:
		return contract.SpawnWaitResult{State: contract.SpawnRunning, Handle: call.Await(r.done)}, nil
	}
	e := r.exit
	x := &contract.SpawnExit{ExitCode: e.exitCode, Signal: e.signal, Stopped: e.stopped, SignalFailed: e.signalFailed,
		StartedMs: e.startedMs, EndedMs: e.endedMs, OutputTruncated: e.truncated}
	// Output this invocation's connection cannot carry is null here.
	if len(e.stdout)+len(e.stderr) <= protocol.ProcessOutputBudget(call.Invocation().ResultRoom()) {
		o, er := call.PutBlob(e.stdout), call.PutBlob(e.stderr)
		x.StdoutBlob, x.StderrBlob = &o, &er
	} else {
		x.OutputTruncated = true
	}
	return contract.SpawnWaitResult{State: contract.SpawnExited, Exit: x}, nil
}

func (s *Spawner) hcSignal(ctx context.Context, call hostcalls.Call, a contract.SpawnRunRef) (contract.SpawnSignalResult, error) {
	if err := validRunID(a.Run); err != nil {
		return contract.SpawnSignalResult{}, err
	}
	out, err := s.SignalRun(a.Run, call.Invocation().Authority.Principal)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return contract.SpawnSignalResult{}, pe
		}
		return contract.SpawnSignalResult{}, err
	}
	return contract.SpawnSignalResult{Outcome: out}, nil
}

func (s *Spawner) hcRelease(ctx context.Context, call hostcalls.Call, a contract.SpawnRunRef) (contract.SpawnReleaseResult, error) {
	if err := validRunID(a.Run); err != nil {
		return contract.SpawnReleaseResult{}, err
	}
	ok, err := s.ReleaseRun(a.Run, call.Invocation().Authority.Principal)
	if err != nil {
		return contract.SpawnReleaseResult{}, err
	}
	return contract.SpawnReleaseResult{Released: ok}, nil
}

// recoverPrims stops the survivors of primitive runs a previous worker
// left (by their containment records) and deletes the records.
func (s *Spawner) recoverPrims(deadline time.Time) error {
	var keys []string
	var recs []record
	err := s.ns.View(func(tx *store.Tx) error {
		return tx.ForEach(primPrefix, "", func(k string, v []byte) error {
			keys = append(keys, k)
			if rec, err := decodeRecord(v); err == nil {
				recs = append(recs, rec)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	for _, rec := range recs {
		s.contain.recover(rec, deadline)
	}
	if len(keys) == 0 {
		return nil
	}
	return s.ns.Update(func(tx *store.Tx) error {
		for _, k := range keys {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}
