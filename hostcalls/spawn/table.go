package spawn

import (
	"context"

	"lemon/hostcalls"
	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// The host-call shapes of the family, defined once in
// lemon/hostcalls/contract and shared with the guest SDK (plugins/sdk/spawn).
type (
	// WireReceipt is a receipt as the host calls return it to the guest.
	WireReceipt = contract.SpawnReceipt
	// RunArgs are the args of spawn.run.
	RunArgs = contract.SpawnRunArgs
	// RunReply is the result of spawn.run.
	RunReply = contract.SpawnRunResult
	// IDArgs are the args of spawn.result, spawn.get and spawn.cancel.
	IDArgs = contract.SpawnIDArgs
	// ReceiptReply is the result of spawn.result, spawn.get and spawn.cancel.
	ReceiptReply = contract.SpawnReceiptResult
)

// Table returns the spawn host calls (capability exec; docs/HOSTCALLS.md):
//
//	spawn.run    RunArgs -> RunReply        starts a run, or answers for an existing id
//	spawn.result IDArgs  -> ReceiptReply    the final receipt of the run this request started
//	spawn.get    IDArgs  -> ReceiptReply    read-only receipt lookup (not_found included)
//	spawn.cancel IDArgs  -> ReceiptReply    cancel, tombstone, or the actual terminal receipt
//
// and the primitives of prim.go (spawn.start, spawn.wait, spawn.signal).
func (s *Spawner) Table() hostcalls.Table {
	return append(hostcalls.Table{
		hostcalls.Define(contract.SpawnRun, hostcalls.CapExec, hostcalls.AuditMutation, s.hcRun, runErrors...),
		hostcalls.Define(contract.SpawnResult, hostcalls.CapExec, hostcalls.AuditRead, s.hcResult, resultErrors...),
		hostcalls.Define(contract.SpawnGet, hostcalls.CapExec, hostcalls.AuditRead, s.hcGet, getErrors...),
		hostcalls.Define(contract.SpawnCancel, hostcalls.CapExec, hostcalls.AuditMutation, s.hcCancel, cancelErrors...),
	}, s.primTable()...)
}

// The errors of the spawn host calls, as data for docs/HOSTCALLS.md.
var (
	idErrors = []hostcalls.ErrorSpec{
		hostcalls.Err(protocol.InvalidParams("processId", ""), "processId is not a valid process id"),
		hostcalls.Err(protocol.DomainError(protocol.CodeUnavailable, protocol.DomainProcessStoreUnavailable, ""), "the receipt store failed"),
	}
	runErrors = append(idErrors[:len(idErrors):len(idErrors)],
		hostcalls.Err(protocol.InvalidParams("stdinBase64", ""), "stdinBlob names no input blob"),
		hostcalls.ErrorSpec{Code: protocol.CodeInvalidParams, When: "cwd, argv, timeoutMs or maxOutputBytes break the node.process.run limits"},
		hostcalls.Err(protocol.DomainError(protocol.CodeForbidden, protocol.DomainCommandNotAllowed, ""), "the worker policy or the execution context does not allow argv"),
		hostcalls.Err(errTimeoutLimit, "timeoutMs exceeds the execution context's max_timeout_ms"),
		hostcalls.Err(errOutputLimit, "maxOutputBytes exceeds the execution context's max_output_bytes"),
		hostcalls.Err(errNoSandbox, "the execution context asks for a sandbox and the node has no cgroup for the run"),
		hostcalls.Err(protocol.DomainError(protocol.CodeForbidden, protocol.DomainPathNotAllowed, ""), "cwd is outside the allowed roots, or outside the execution context's workspace"),
		hostcalls.Err(protocol.DomainError(protocol.CodeConflict, protocol.DomainProcessIDConflict, ""), "processId was used with other params, or by another principal"),
		hostcalls.Err(protocol.DomainError(protocol.CodeUnavailable, protocol.DomainProcessReceiptLimit, ""), "the node holds its maximum of receipts"),
		hostcalls.Err(protocol.DomainError(protocol.CodeInvalidRequest, protocol.DomainNotDirectory, ""), "cwd is not a directory"),
		hostcalls.Err(protocol.DomainError(protocol.CodeNotFound, protocol.DomainExecutableNotFound, ""), "argv[0] is not found"),
		hostcalls.Err(protocol.DomainError(protocol.CodeForbidden, protocol.DomainPermissionDenied, ""), "argv[0] or cwd is not accessible"),
		hostcalls.Err(protocol.DomainError(protocol.CodeInvalidParams, protocol.DomainExecFormat, ""), "argv[0] is not an executable format"),
		hostcalls.Err(protocol.DomainError(protocol.CodeInvalidParams, protocol.DomainArgumentListTooLong, ""), "the OS refuses argv as too long"),
	)
	resultErrors = append(idErrors[:len(idErrors):len(idErrors)],
		hostcalls.Err(protocol.Errorf(protocol.CodeInvalidRequest, ""), "this request started no finished run under processId"))
	getErrors = append(idErrors[:len(idErrors):len(idErrors)],
		hostcalls.Err(protocol.DomainError(protocol.CodeNotFound, protocol.DomainNotFound, ""), "no receipt for processId (another principal's counts as none)"))
	cancelErrors = append(getErrors[:len(getErrors):len(getErrors)],
		hostcalls.Err(protocol.DomainError(protocol.CodeForbidden, protocol.DomainProcessNotOwner, ""), "the run belongs to an older session generation, or to another principal"),
		hostcalls.Err(protocol.DomainError(protocol.CodeUnavailable, protocol.DomainProcessSignalFailed, ""), "the process could not be signalled"))
)

// wire turns a receipt into its host-call shape for call's invocation.
// Output the invocation's connection cannot carry (it was captured for a
// larger maxPayload than this request's) is unavailable to this response:
// null with outputTruncated:true, so get and cancel always answer.
func wire(call hostcalls.Call, rc Receipt) *WireReceipt {
	w := &WireReceipt{State: rc.State, ExitCode: rc.ExitCode, OutputTruncated: rc.OutputTruncated}
	fits := len(rc.Stdout)+len(rc.Stderr) <= protocol.ProcessOutputBudget(call.Invocation().ResultRoom())
	if rc.Stdout != nil && rc.Stderr != nil && fits {
		o, e := call.PutBlob(rc.Stdout), call.PutBlob(rc.Stderr)
		w.StdoutBlob, w.StderrBlob = &o, &e
	} else {
		w.OutputTruncated = true
	}
	return w
}

func (s *Spawner) hcRun(ctx context.Context, call hostcalls.Call, a RunArgs) (RunReply, error) {
	stdin, ok := call.Blob(a.StdinBlob)
	if !ok {
		return RunReply{}, protocol.InvalidParams("stdinBase64", "stdin blob is missing")
	}
	inv := call.Invocation()
	var dirs DirResolver
	if ws := inv.Authority.Workspace; ws != "" {
		// The cwd is admitted through the workspace view alone
		// (docs/PROCESS.md, "Workspaces").
		if s.cfg.Workspace == nil {
			return RunReply{}, errCwdNotAllowed()
		}
		view, release, err := s.cfg.Workspace(ws)
		if err != nil {
			return RunReply{}, errCwdNotAllowed()
		}
		defer release()
		dirs = view
	}
	h, existing, err := s.Start(ctx, Request{
		ProcessID: a.ProcessID, Cwd: a.Cwd, Argv: a.Argv, Stdin: stdin,
		TimeoutMs: a.TimeoutMs, MaxOutputBytes: a.MaxOutputBytes,
		Generation: inv.SessionGeneration, Owner: inv.InvokeID,
		OutputBudget: protocol.ProcessOutputBudget(inv.ResultRoom()),
		Auth:         inv.Authority, Dirs: dirs,
	})
	if err != nil {
		return RunReply{}, err
	}
	if existing != nil {
		return RunReply{Status: contract.SpawnExisting, Receipt: wire(call, *existing)}, nil
	}
	return RunReply{Status: contract.SpawnStarted, Handle: call.Await(h.Done())}, nil
}

func decodeID(a IDArgs) (string, *protocol.Error) {
	if err := protocol.ValidateProcessID(a.ProcessID); err != nil {
		return "", err
	}
	return a.ProcessID, nil
}

func (s *Spawner) hcResult(ctx context.Context, call hostcalls.Call, a IDArgs) (ReceiptReply, error) {
	id, perr := decodeID(a)
	if perr != nil {
		return ReceiptReply{}, perr
	}
	r, ok := s.collect(call.Invocation().InvokeID, id)
	if !ok {
		return ReceiptReply{}, protocol.Errorf(protocol.CodeInvalidRequest, "this request started no finished run under that processId")
	}
	rc, err := Run{r: r}.Result()
	if err != nil {
		return ReceiptReply{}, err
	}
	return ReceiptReply{Receipt: wire(call, rc)}, nil
}

func (s *Spawner) hcGet(ctx context.Context, call hostcalls.Call, a IDArgs) (ReceiptReply, error) {
	id, perr := decodeID(a)
	if perr != nil {
		return ReceiptReply{}, perr
	}
	rc, err := s.GetFor(id, call.Invocation().Authority.Principal)
	if err != nil {
		return ReceiptReply{}, err
	}
	return ReceiptReply{Receipt: wire(call, rc)}, nil
}

func (s *Spawner) hcCancel(ctx context.Context, call hostcalls.Call, a IDArgs) (ReceiptReply, error) {
	id, perr := decodeID(a)
	if perr != nil {
		return ReceiptReply{}, perr
	}
	inv := call.Invocation()
	rc, wait, err := s.CancelFor(id, inv.SessionGeneration, inv.Authority.Principal)
	if err != nil {
		return ReceiptReply{}, err
	}
	if wait != nil {
		return ReceiptReply{Handle: call.Await(wait)}, nil
	}
	return ReceiptReply{Receipt: wire(call, rc)}, nil
}

func errCwdNotAllowed() *protocol.Error {
	return protocol.DomainError(protocol.CodeForbidden, protocol.DomainPathNotAllowed,
		"cwd is outside the allowed roots").WithRetry(false, false)
}
