package spawn

import (
	"context"
	"encoding/json"

	"lemon/hostcalls"
	"lemon/protocol"
)

// WireReceipt is a receipt as the host calls return it to the guest: the
// output bytes are invocation blobs (hostcalls.Call.PutBlob), never JSON.
// StdoutBlob/StderrBlob are null when the output is unknown. The guest
// names the blobs in its result so the host base64-encodes them into
// stdoutBase64/stderrBase64.
type WireReceipt struct {
	State           string  `json:"state"`
	ExitCode        *int    `json:"exitCode"`
	StdoutBlob      *uint32 `json:"stdoutBlob"`
	StderrBlob      *uint32 `json:"stderrBlob"`
	OutputTruncated bool    `json:"outputTruncated"`
}

// RunArgs are the args of spawn.run: the validated request, with stdin as
// the id of the input blob the host decoded from stdinBase64.
type RunArgs struct {
	ProcessID      string   `json:"processId"`
	Cwd            string   `json:"cwd"`
	Argv           []string `json:"argv"`
	StdinBlob      uint32   `json:"stdinBlob"`
	TimeoutMs      int64    `json:"timeoutMs"`
	MaxOutputBytes int64    `json:"maxOutputBytes"`
}

// RunReply is the result of spawn.run: Status "started" with the Handle
// to suspend on, or "existing" with the Receipt of the id's earlier run.
type RunReply struct {
	Status  string       `json:"status"`
	Handle  uint32       `json:"handle,omitempty"`
	Receipt *WireReceipt `json:"receipt,omitempty"`
}

// IDArgs are the args of spawn.result, spawn.get and spawn.cancel.
type IDArgs struct {
	ProcessID string `json:"processId"`
}

// ReceiptReply is the result of spawn.result and spawn.get, and of
// spawn.cancel when the receipt is final; spawn.cancel instead returns a
// Handle to suspend on while a signalled run is being reaped.
type ReceiptReply struct {
	Receipt *WireReceipt `json:"receipt,omitempty"`
	Handle  uint32       `json:"handle,omitempty"`
}

// Table returns the spawn host calls (capability exec):
//
//	spawn.run    RunArgs -> RunReply        starts a run, or answers for an existing id
//	spawn.result IDArgs  -> ReceiptReply    the final receipt of the run this request started
//	spawn.get    IDArgs  -> ReceiptReply    read-only receipt lookup (not_found included)
//	spawn.cancel IDArgs  -> ReceiptReply    cancel, tombstone, or the actual terminal receipt
func (s *Spawner) Table() hostcalls.Table {
	return hostcalls.Table{
		{Name: "spawn.run", Params: []string{"processId", "cwd", "argv", "stdinBlob", "timeoutMs", "maxOutputBytes"},
			Capability: hostcalls.CapExec, Audit: hostcalls.AuditMutation, Func: s.hcRun},
		{Name: "spawn.result", Params: []string{"processId"}, Capability: hostcalls.CapExec, Audit: hostcalls.AuditRead, Func: s.hcResult},
		{Name: "spawn.get", Params: []string{"processId"}, Capability: hostcalls.CapExec, Audit: hostcalls.AuditRead, Func: s.hcGet},
		{Name: "spawn.cancel", Params: []string{"processId"}, Capability: hostcalls.CapExec, Audit: hostcalls.AuditMutation, Func: s.hcCancel},
	}
}

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

func (s *Spawner) hcRun(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	var a RunArgs
	if err := protocol.DecodeParams(args, &a); err != nil {
		return nil, err
	}
	stdin, ok := call.Blob(a.StdinBlob)
	if !ok {
		return nil, protocol.InvalidParams("stdinBase64", "stdin blob is missing")
	}
	inv := call.Invocation()
	h, existing, err := s.Start(ctx, Request{
		ProcessID: a.ProcessID, Cwd: a.Cwd, Argv: a.Argv, Stdin: stdin,
		TimeoutMs: a.TimeoutMs, MaxOutputBytes: a.MaxOutputBytes,
		Generation: inv.SessionGeneration, Owner: inv.InvokeID,
		OutputBudget: protocol.ProcessOutputBudget(inv.ResultRoom()),
	})
	if err != nil {
		return nil, err
	}
	if existing != nil {
		return json.Marshal(RunReply{Status: "existing", Receipt: wire(call, *existing)})
	}
	return json.Marshal(RunReply{Status: "started", Handle: call.Await(h.Done())})
}

func decodeID(args []byte) (string, *protocol.Error) {
	var a IDArgs
	if err := protocol.DecodeParams(args, &a); err != nil {
		return "", err
	}
	if err := protocol.ValidateProcessID(a.ProcessID); err != nil {
		return "", err
	}
	return a.ProcessID, nil
}

func (s *Spawner) hcResult(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	id, perr := decodeID(args)
	if perr != nil {
		return nil, perr
	}
	r, ok := s.collect(call.Invocation().InvokeID, id)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "this request started no finished run under that processId")
	}
	rc, err := Run{r: r}.Result()
	if err != nil {
		return nil, err
	}
	return json.Marshal(ReceiptReply{Receipt: wire(call, rc)})
}

func (s *Spawner) hcGet(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	id, perr := decodeID(args)
	if perr != nil {
		return nil, perr
	}
	rc, err := s.Get(id)
	if err != nil {
		return nil, err
	}
	return json.Marshal(ReceiptReply{Receipt: wire(call, rc)})
}

func (s *Spawner) hcCancel(ctx context.Context, call hostcalls.Call, args []byte) ([]byte, error) {
	id, perr := decodeID(args)
	if perr != nil {
		return nil, perr
	}
	rc, wait, err := s.Cancel(id, call.Invocation().SessionGeneration)
	if err != nil {
		return nil, err
	}
	if wait != nil {
		return json.Marshal(ReceiptReply{Handle: call.Await(wait)})
	}
	return json.Marshal(ReceiptReply{Receipt: wire(call, rc)})
}
