//go:build wasip1

// Command process is the module of the process family: node.process.run,
// node.process.get and node.process.cancel (spec "Native processes",
// "Receipt meaning and reconciliation", "Cancellation races"). It
// validates each request again on the node, keeps the receipt state
// machine (at-most-once, tombstones, retention, the output cache,
// ownership; receipts.go) in its own store, and runs processes with the
// spawn primitives. Output bytes never enter the module: stdin arrives as
// an input blob, output stays in the host and leaves as output blobs, and
// a run in progress is a suspension, so no instance is held while a
// process runs.
package main

import (
	"encoding/json"
	"strconv"

	"lemon/host/abi/wire"
	"lemon/plugins/sdk"
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
// before it, so a resume needs only the ids and the run.
type waitState struct {
	ProcessID string `json:"processId"`
	NodeID    string `json:"nodeId"`
	Run       string `json:"run"`
	// Rec and Rev are the started record the run made and its revision
	// (a resumed run settles it without reading it again).
	Rec *record `json:"rec,omitempty"`
	Rev uint64  `json:"rev,omitempty"`
}

// resumed decodes the state a suspension carried; ok is false when it is
// not one this module wrote.
func resumed(req *sdk.Request) (w waitState, ok bool) {
	if req.Resume == nil || wire.Unmarshal(req.Resume.State, &w) != nil || protocol.ValidateProcessID(w.ProcessID) != nil || w.Run == "" {
		return w, false
	}
	return w, protocol.RequireNodeID(w.NodeID) == nil
}

func errResume() *protocol.Error {
	return protocol.Errorf(protocol.CodeInternal, "the resumed invocation carries no state of this module")
}

func run(req *sdk.Request) (*sdk.Result, error) {
	if w, ok := resumed(req); ok {
		// The process ended: settle and answer with its own output.
		return finish(w)
	} else if req.Resume != nil {
		return nil, errResume()
	}
	p, perr := protocol.ParseProcessRunNoStdin(req.Params)
	if perr != nil {
		return nil, perr
	}
	stdin, ok := req.Blobs["stdinBase64"]
	if !ok {
		return nil, protocol.InvalidParams("stdinBase64", "stdinBase64 is required")
	}
	if err := protocol.ValidateProcessStdinSize(stdin.Size); err != nil {
		return nil, err
	}
	return admit(req, p, stdin.ID, int64(stdin.Size), receiptNode(req, p.NodeID))
}

func get(req *sdk.Request) (*sdk.Result, error) {
	p, perr := protocol.ParseProcessID(req.Params)
	if perr != nil {
		return nil, perr
	}
	return getReceipt(req, p.ProcessID, receiptNode(req, p.NodeID))
}

func cancel(req *sdk.Request) (*sdk.Result, error) {
	if w, ok := resumed(req); ok {
		// The signalled run has been reaped.
		return finish(w)
	} else if req.Resume != nil {
		return nil, errResume()
	}
	p, perr := protocol.ParseProcessID(req.Params)
	if perr != nil {
		return nil, perr
	}
	return cancelRun(req, p.ProcessID, receiptNode(req, p.NodeID))
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
func receipt(processID, nodeID string, v view) (*sdk.Result, error) {
	r := protocol.ProcessReceipt{ProcessID: processID, NodeID: nodeID, State: v.state,
		ExitCode: v.exit, OutputTruncated: v.truncated}
	var blobs map[string]uint32
	if v.stdout != nil && v.stderr != nil {
		empty := ""
		r.StdoutBase64, r.StderrBase64 = &empty, &empty
		blobs = map[string]uint32{"stdoutBase64": *v.stdout, "stderrBase64": *v.stderr}
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
