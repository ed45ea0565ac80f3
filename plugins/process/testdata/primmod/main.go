//go:build wasip1

// Command primmod is a test module of the spawn primitives (docs/PROCESS.md,
// "Spawn primitives"), for plugins/process's tests through the real host:
// node.primtest.run starts argv with stdin, suspends until the run ends and
// answers how it ended; node.primtest.stop starts argv, signals it twice
// and answers both outcomes with the end. It keeps no receipt.
package main

import (
	"encoding/json"

	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
	"lemon/plugins/sdk/spawn"
	"lemon/protocol"
)

func init() {
	sdk.Serve(sdk.Manifest{
		Family: "primtest", Version: "0.0.1",
		Capabilities: []string{"exec"},
		HostCalls:    []string{"spawn.start", "spawn.wait", "spawn.signal"},
		Methods: []sdk.MethodSpec{
			{Name: "node.primtest.run", Version: 1, Capability: "exec", Retry: protocol.RetryMutation,
				InputBlobs: map[string]sdk.BlobSpec{"stdinBase64": {Encoding: "base64", MaxBytes: protocol.ProcessStdinMaxBytes}}},
			{Name: "node.primtest.stop", Version: 1, Capability: "exec", Retry: protocol.RetryMutation,
				InputBlobs: map[string]sdk.BlobSpec{"stdinBase64": {Encoding: "base64", MaxBytes: protocol.ProcessStdinMaxBytes}}},
		},
	}, map[string]sdk.Handler{"node.primtest.run": run, "node.primtest.stop": stop})
}

type params struct {
	Argv      []string `json:"argv"`
	TimeoutMs int64    `json:"timeoutMs"`
}

// state is carried through the suspension.
type state struct {
	Run     string   `json:"run"`
	Signals []string `json:"signals,omitempty"`
}

// answer is the payload: the signal outcomes (stop only) and the exit,
// whose output blobs the host writes as stdoutBase64/stderrBase64.
type answer struct {
	Signals      []string            `json:"signals,omitempty"`
	Exit         *contract.SpawnExit `json:"exit"`
	StdoutBase64 string              `json:"stdoutBase64"`
	StderrBase64 string              `json:"stderrBase64"`
}

func start(req *sdk.Request) (string, uint32, error) {
	var p params
	if err := json.Unmarshal(req.Params, &p); err != nil {
		return "", 0, protocol.InvalidParams("", "bad params")
	}
	st, err := spawn.Start(contract.SpawnStartArgs{Argv: p.Argv, Cwd: ".", StdinBlob: req.Blobs["stdinBase64"].ID,
		TimeoutMs: p.TimeoutMs, MaxOutputBytes: 1 << 20})
	return st.Run, st.Handle, err
}

func finish(req *sdk.Request) (*sdk.Result, error) {
	var s state
	if err := json.Unmarshal(req.Resume.State, &s); err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "bad state")
	}
	w, err := spawn.Wait(s.Run)
	if err != nil {
		return nil, err
	}
	if w.State == contract.SpawnRunning {
		return &sdk.Result{Suspend: &sdk.Suspend{Handle: w.Handle, State: s}}, nil
	}
	if w.State != contract.SpawnExited {
		return nil, protocol.Errorf(protocol.CodeInternal, "run state %s", w.State)
	}
	res := &sdk.Result{Payload: answer{Signals: s.Signals, Exit: w.Exit}}
	if w.Exit.StdoutBlob != nil {
		res.Blobs = map[string]uint32{"stdoutBase64": *w.Exit.StdoutBlob, "stderrBase64": *w.Exit.StderrBlob}
	}
	return res, nil
}

func run(req *sdk.Request) (*sdk.Result, error) {
	if req.Resume != nil {
		return finish(req)
	}
	id, h, err := start(req)
	if err != nil {
		return nil, err
	}
	return &sdk.Result{Suspend: &sdk.Suspend{Handle: h, State: state{Run: id}}}, nil
}

func stop(req *sdk.Request) (*sdk.Result, error) {
	if req.Resume != nil {
		return finish(req)
	}
	id, h, err := start(req)
	if err != nil {
		return nil, err
	}
	s := state{Run: id}
	for i := 0; i < 2; i++ {
		out, err := spawn.Signal(id)
		if err != nil {
			return nil, err
		}
		s.Signals = append(s.Signals, out.Outcome)
	}
	return &sdk.Result{Suspend: &sdk.Suspend{Handle: h, State: s}}, nil
}

func main() {}
