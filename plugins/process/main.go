//go:build wasip1

// Command process is the module of the process family: node.process.run,
// node.process.get and node.process.cancel (spec "Native processes",
// "Receipt meaning and reconciliation", "Cancellation races"). It
// validates each request again on the node, drives the spawn host calls,
// and shapes the seven-field receipt. Every effect (the process, the
// durable receipts, the output bytes) stays host-side: stdin arrives as an
// input blob, output leaves as output blobs, and a run in progress is a
// suspension, so no instance is held while a process runs.
package main

import (
	"encoding/json"

	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
	"lemon/plugins/sdk/spawn"
	"lemon/protocol"
)

func init() {
	sdk.Serve(manifest, map[string]sdk.Handler{
		protocol.MethodProcessRun:    run,
		protocol.MethodProcessGet:    get,
		protocol.MethodProcessCancel: cancel,
	})
}

// waitState is carried through a suspension.
type waitState struct {
	ProcessID string `json:"processId"`
}

func run(req *sdk.Request) (*sdk.Result, error) {
	p, perr := protocol.ParseProcessRunNoStdin(req.Params)
	if perr != nil {
		return nil, perr
	}
	nodeID := receiptNode(req, p.NodeID)
	if req.Resume != nil {
		// The process ended: collect the final receipt this request owns.
		rep, err := spawn.Result(p.ProcessID)
		if err != nil {
			return nil, err
		}
		return receipt(p.ProcessID, nodeID, rep.Receipt)
	}
	stdin, ok := req.Blobs["stdinBase64"]
	if !ok {
		return nil, protocol.InvalidParams("stdinBase64", "stdinBase64 is required")
	}
	if err := protocol.ValidateProcessStdinSize(stdin.Size); err != nil {
		return nil, err
	}
	rep, err := spawn.Run(contract.SpawnRunArgs{ProcessID: p.ProcessID, Cwd: p.Cwd, Argv: p.Argv, StdinBlob: stdin.ID,
		TimeoutMs: p.TimeoutMs, MaxOutputBytes: p.MaxOutputBytes})
	if err != nil {
		return nil, err
	}
	switch rep.Status {
	case contract.SpawnExisting:
		return receipt(p.ProcessID, nodeID, rep.Receipt)
	case contract.SpawnStarted:
		return &sdk.Result{Suspend: &sdk.Suspend{Handle: rep.Handle, State: waitState{ProcessID: p.ProcessID}}}, nil
	}
	return nil, protocol.Errorf(protocol.CodeInternal, "spawn.run returned an unknown status")
}

func get(req *sdk.Request) (*sdk.Result, error) {
	p, perr := protocol.ParseProcessID(req.Params)
	if perr != nil {
		return nil, perr
	}
	rep, err := spawn.Get(p.ProcessID)
	if err != nil {
		return nil, err
	}
	return receipt(p.ProcessID, receiptNode(req, p.NodeID), rep.Receipt)
}

func cancel(req *sdk.Request) (*sdk.Result, error) {
	p, perr := protocol.ParseProcessID(req.Params)
	if perr != nil {
		return nil, perr
	}
	nodeID := receiptNode(req, p.NodeID)
	if req.Resume != nil {
		// The signalled run has been reaped: read its final receipt.
		rep, err := spawn.Get(p.ProcessID)
		if err != nil {
			return nil, err
		}
		return receipt(p.ProcessID, nodeID, rep.Receipt)
	}
	rep, err := spawn.Cancel(p.ProcessID)
	if err != nil {
		return nil, err
	}
	if rep.Receipt == nil {
		return &sdk.Result{Suspend: &sdk.Suspend{Handle: rep.Handle, State: waitState{ProcessID: p.ProcessID}}}, nil
	}
	return receipt(p.ProcessID, nodeID, rep.Receipt)
}

// receiptNode is the node the receipt names: the durable id the broker
// pinned for this invocation, or the request's nodeId without one.
func receiptNode(req *sdk.Request, paramsNodeID string) string {
	if req.Invocation.NodeID != "" {
		return req.Invocation.NodeID
	}
	return paramsNodeID
}

// receipt shapes the seven-field payload. Known output goes out as blobs
// (the host writes their base64 into stdoutBase64/stderrBase64); unknown
// output is null with outputTruncated:true.
func receipt(processID, nodeID string, w *contract.SpawnReceipt) (*sdk.Result, error) {
	if w == nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "host call returned no receipt")
	}
	r := protocol.ProcessReceipt{ProcessID: processID, NodeID: nodeID, State: w.State,
		ExitCode: w.ExitCode, OutputTruncated: w.OutputTruncated}
	var blobs map[string]uint32
	if w.StdoutBlob != nil && w.StderrBlob != nil {
		empty := ""
		r.StdoutBase64, r.StderrBase64 = &empty, &empty
		blobs = map[string]uint32{"stdoutBase64": *w.StdoutBlob, "stderrBase64": *w.StderrBlob}
	} else {
		r.OutputTruncated = true
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: json.RawMessage(mustJSON(r)), Blobs: blobs}, nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func main() {}
