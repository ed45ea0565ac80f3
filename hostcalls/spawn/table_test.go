package spawn

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"lemon/hostcalls"
	"lemon/protocol"
)

// fakeCall is the invocation side of a host call: blobs, awaitables and
// the session's result room.
type fakeCall struct {
	inv   hostcalls.Invocation
	mu    sync.Mutex
	blobs map[uint32][]byte
	done  <-chan struct{} // the last awaitable
}

func newCall(invokeID string, maxResult int) *fakeCall {
	return &fakeCall{inv: hostcalls.Invocation{InvokeID: invokeID, NodeID: "n1", MaxResultBytes: maxResult},
		blobs: map[uint32][]byte{}}
}

func (c *fakeCall) Module() string                   { return "process" }
func (c *fakeCall) Method() string                   { return protocol.MethodProcessRun }
func (c *fakeCall) Invocation() hostcalls.Invocation { return c.inv }
func (c *fakeCall) Await(done <-chan struct{}) uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = done
	return 1
}
func (c *fakeCall) Blob(id uint32) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.blobs[id]
	return b, ok
}
func (c *fakeCall) PutBlob(b []byte) uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := uint32(len(c.blobs) + 1)
	c.blobs[id] = b
	return id
}

// receiptOf calls a receipt host call and returns the receipt with its
// output blobs resolved (nil when null).
func receiptOf(t *testing.T, c *fakeCall, fn hostcalls.Func, id string) (*WireReceipt, []byte, []byte) {
	t.Helper()
	args, _ := json.Marshal(IDArgs{ProcessID: id})
	out, err := fn(context.Background(), c, args)
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	var rep ReceiptReply
	if err := json.Unmarshal(out, &rep); err != nil || rep.Receipt == nil {
		t.Fatalf("reply %s: %v", out, err)
	}
	var stdout, stderr []byte
	if rep.Receipt.StdoutBlob != nil {
		stdout, _ = c.Blob(*rep.Receipt.StdoutBlob)
		stderr, _ = c.Blob(*rep.Receipt.StderrBlob)
	}
	return rep.Receipt, stdout, stderr
}

// Issue 9 item 3a at the host-call level: over a connection of maxPayload
// 65536 the output of `head -c 100000 /dev/zero` with maxOutputBytes
// 1048576 is captured only up to what that connection's receipt can carry,
// and spawn.get and spawn.cancel answer for it on any connection: output
// too large for a smaller one is null there, with outputTruncated:true.
func TestSessionRoomCapsOutput(t *testing.T) {
	f := newFixture(t, nil)
	const room = 65536 - 131 // a 65536-byte frame less the node.invoke.result envelope
	budget := protocol.ProcessOutputBudget(room)
	c := newCall("inv-1", room)
	stdin := c.PutBlob(nil)
	args, _ := json.Marshal(RunArgs{ProcessID: "head:1", Cwd: ".", Argv: []string{"head", "-c", "100000", "/dev/zero"},
		StdinBlob: stdin, TimeoutMs: 30000, MaxOutputBytes: 1048576})
	out, err := tableFunc(f.s, "spawn.run")(context.Background(), c, args)
	if err != nil {
		t.Fatal(err)
	}
	var rep RunReply
	if json.Unmarshal(out, &rep) != nil || rep.Status != "started" {
		t.Fatalf("spawn.run: %s", out)
	}
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		t.Fatal("the run did not finish within a minute")
	}
	w, stdout, stderr := receiptOf(t, c, tableFunc(f.s, "spawn.result"), "head:1")
	state := w.State
	if w.StdoutBlob == nil || len(stdout)+len(stderr) != budget || !w.OutputTruncated {
		t.Fatalf("spawn.result: %d+%d output bytes, truncated %v; want %d, true", len(stdout), len(stderr), w.OutputTruncated, budget)
	}
	// The receipt with its output fits the room it was captured for.
	for _, call := range []struct {
		name string
		fn   hostcalls.Func
	}{{"spawn.get", tableFunc(f.s, "spawn.get")}, {"spawn.cancel", tableFunc(f.s, "spawn.cancel")}} {
		same := newCall("inv-2", room)
		w, stdout, _ := receiptOf(t, same, call.fn, "head:1")
		if w.StdoutBlob == nil || len(stdout) != budget {
			t.Fatalf("%s on the same room: output %d bytes, blob %v", call.name, len(stdout), w.StdoutBlob)
		}
		r := protocol.ProcessReceipt{ProcessID: "head:1", NodeID: "n1", State: w.State, ExitCode: w.ExitCode,
			StdoutBase64: ptr(b64(stdout)), StderrBase64: ptr(""), OutputTruncated: true}
		if b, _ := json.Marshal(r); len(b)+protocol.RelayReserve > room {
			t.Fatalf("%s: the receipt takes %d bytes of a %d-byte room", call.name, len(b), room)
		}
		// A smaller connection cannot carry that output: null, truncated.
		small := newCall("inv-3", 8192)
		w, _, _ = receiptOf(t, small, call.fn, "head:1")
		if w.StdoutBlob != nil || w.StderrBlob != nil || !w.OutputTruncated || w.State != state {
			t.Fatalf("%s on a smaller room: %+v, want %s with null output and outputTruncated", call.name, w, state)
		}
	}
}

func ptr(s string) *string { return &s }

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// tableFunc is the Func of s's table entry name: the decode, the call and
// the encode, as the gate runs it.
func tableFunc(s *Spawner, name string) hostcalls.Func {
	for _, hc := range s.Table() {
		if hc.Name == name {
			return hc.Func
		}
	}
	panic("no host call " + name)
}
