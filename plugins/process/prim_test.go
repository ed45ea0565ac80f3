//go:build !wasip1

package main_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"lemon/host/hosttest"
	"lemon/hostcalls/contract"
	"lemon/protocol"
)

type primAnswer struct {
	Signals      []string           `json:"signals"`
	Exit         contract.SpawnExit `json:"exit"`
	StdoutBase64 string             `json:"stdoutBase64"`
	StderrBase64 string             `json:"stderrBase64"`
}

// primInvoke calls method of the primitives' test module
// (testdata/primmod) loaded beside the process module.
func (e *env) primInvoke(t *testing.T, method, stdin string, argv ...string) (primAnswer, *protocol.Error) {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"argv": argv, "timeoutMs": 30000,
		"stdinBase64": base64.StdEncoding.EncodeToString([]byte(stdin))})
	e.seq++
	out, perr := e.h.Invoke(context.Background(), protocol.InvokeRequest{InvokeID: fmt.Sprintf("p%d-%d", e.seq, time.Now().UnixNano()),
		NodeID: "n1", Method: method, Args: raw, SessionGeneration: 1})
	var a primAnswer
	if perr != nil {
		return a, perr
	}
	if err := json.Unmarshal(out, &a); err != nil {
		t.Fatalf("payload %s: %v", out, err)
	}
	return a, nil
}

func loadPrimMod(t *testing.T, e *env) {
	t.Helper()
	wasm := hosttest.Build(t, "plugins/process/testdata/primmod")
	if _, err := e.h.Load(context.Background(), hosttest.Pin("primtest", wasm), wasm); err != nil {
		t.Fatal(err)
	}
}

// The spawn primitives through the real host and a wasm module: start
// with a stdin blob, suspend until the end, wait; output comes back as
// blobs, the exit status and the times as the host observed them; the
// receipt calls' store namespace is untouched.
func TestPrimitivesThroughModule(t *testing.T) {
	e := newEnv(t, 1)
	loadPrimMod(t, e)
	a, perr := e.primInvoke(t, "node.primtest.run", "in\x00put", "sh", "-c", "cat; printf err >&2; exit 4")
	if perr != nil {
		t.Fatal(perr)
	}
	out, _ := base64.StdEncoding.DecodeString(a.StdoutBase64)
	errb, _ := base64.StdEncoding.DecodeString(a.StderrBase64)
	x := a.Exit
	if x.ExitCode == nil || *x.ExitCode != 4 || x.Signal != 0 || x.Stopped != "" || x.OutputTruncated || string(out) != "in\x00put" || string(errb) != "err" {
		t.Fatalf("answer %+v stdout %q stderr %q", a, out, errb)
	}
	if x.StartedMs <= 0 || x.EndedMs < x.StartedMs {
		t.Fatalf("times %d..%d", x.StartedMs, x.EndedMs)
	}
	// No receipt was written: a process.get of any id is not_found.
	if rc, perr := e.invoke(context.Background(), protocol.MethodProcessGet, map[string]any{"nodeId": "n1", "processId": "x"}); perr != nil || rc.State != protocol.ProcessStateNotFound {
		t.Fatalf("get: %+v %v", rc, perr)
	}
}

// spawn.signal from a module: the first call is "sent", the second
// "already" (the host never signals a group twice); the run ends by
// SIGKILL with stop reason cancel.
func TestPrimitiveSignalThroughModule(t *testing.T) {
	e := newEnv(t, 1)
	loadPrimMod(t, e)
	a, perr := e.primInvoke(t, "node.primtest.stop", "", "sleep", "30")
	if perr != nil {
		t.Fatal(perr)
	}
	if len(a.Signals) != 2 || a.Signals[0] != contract.SpawnSignalSent ||
		(a.Signals[1] != contract.SpawnSignalAlready && a.Signals[1] != contract.SpawnExited) {
		t.Fatalf("signals %v", a.Signals)
	}
	if a.Exit.ExitCode != nil || a.Exit.Signal != 9 || a.Exit.Stopped != "cancel" {
		t.Fatalf("exit %+v", a.Exit)
	}
	// The argv limits hold for the primitive from a module too.
	if _, perr := e.primInvoke(t, "node.primtest.run", "", "./x"); perr == nil || perr.Code != protocol.CodeInvalidParams {
		t.Fatalf("relative argv[0]: %v", perr)
	}
}
