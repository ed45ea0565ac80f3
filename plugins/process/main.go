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
	"strconv"

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

// waitState is carried through a suspension: the params were validated
// before it, so a resume needs only the ids.
type waitState struct {
	ProcessID string `json:"processId"`
	NodeID    string `json:"nodeId"`
}

// resumed decodes the state a suspension carried; ok is false when it is
// not one this module wrote (the params are then validated again).
func resumed(req *sdk.Request) (w waitState, ok bool) {
	if req.Resume == nil || json.Unmarshal(req.Resume.State, &w) != nil || protocol.ValidateProcessID(w.ProcessID) != nil {
		return w, false
	}
	return w, protocol.RequireNodeID(w.NodeID) == nil
}

func run(req *sdk.Request) (*sdk.Result, error) {
	if w, ok := resumed(req); ok {
		// The process ended: collect the final receipt this request owns.
		rep, err := spawn.Result(w.ProcessID)
		if err != nil {
			return nil, err
		}
		return receipt(w.ProcessID, w.NodeID, rep.Receipt)
	}
	p, perr := protocol.ParseProcessRunNoStdin(req.Params)
	if perr != nil {
		return nil, perr
	}
	nodeID := receiptNode(req, p.NodeID)
	if req.Resume != nil {
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
		return &sdk.Result{Suspend: &sdk.Suspend{Handle: rep.Handle, State: waitState{ProcessID: p.ProcessID, NodeID: nodeID}}}, nil
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
		return &sdk.Result{Suspend: &sdk.Suspend{Handle: rep.Handle, State: waitState{ProcessID: p.ProcessID, NodeID: nodeID}}}, nil
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
	return &sdk.Result{Payload: json.RawMessage(encodeReceipt(r)), Blobs: blobs}, nil
}

// encodeReceipt writes the seven fields without reflection. Only nodeId
// can need escaping (processId is [A-Za-z0-9_:-], the state a constant,
// the outputs "" or null: their bytes travel as blobs).
func encodeReceipt(r protocol.ProcessReceipt) []byte {
	b := make([]byte, 0, 160)
	b = append(b, `{"processId":"`...)
	b = append(b, r.ProcessID...)
	b = append(b, `","nodeId":`...)
	node, _ := json.Marshal(r.NodeID)
	b = append(b, node...)
	b = append(b, `,"state":"`...)
	b = append(b, r.State...)
	b = append(b, `","exitCode":`...)
	if r.ExitCode == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, int64(*r.ExitCode), 10)
	}
	out := func(p *string) {
		if p == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '"')
			b = append(b, *p...)
			b = append(b, '"')
		}
	}
	b = append(b, `,"stdoutBase64":`...)
	out(r.StdoutBase64)
	b = append(b, `,"stderrBase64":`...)
	out(r.StderrBase64)
	b = append(b, `,"outputTruncated":`...)
	b = strconv.AppendBool(b, r.OutputTruncated)
	return append(b, '}')
}

func main() {}
