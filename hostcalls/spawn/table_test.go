package spawn

import (
	"encoding/base64"
	"sync"

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

func ptr(s string) *string { return &s }

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// tableFunc is the Func of s's table entry name: the decode, the call and
// the encode, as the gate runs it.
func tableFunc(s *Spawner, name string) hostcalls.Func {
	for _, hc := range s.Table() {
		if hc.Name == name {
			return hc.JSONFunc()
		}
	}
	panic("no host call " + name)
}
