package worker

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"lemon/host/moduleset"
	"lemon/protocol"
)

type okDispatcher struct{ calls int }

func (d *okDispatcher) Methods() map[string]int {
	return map[string]int{"node.kv.get": 1, "node.kv.put": 1, "node.fs.read": 1}
}

func (d *okDispatcher) Invoke(context.Context, protocol.InvokeRequest) (json.RawMessage, *protocol.Error) {
	d.calls++
	return json.RawMessage(`{}`), nil
}

func declSession(d Dispatcher) *session {
	no := false
	max := 4
	s := &session{disp: d, readyCh: make(chan struct{}), limit: 1 << 20, decl: map[string]moduleset.Method{
		"node.kv.get": {Name: "node.kv.get", Version: 1, Retry: protocol.RetryRead,
			Params: &protocol.Schema{Type: "object", AdditionalProperties: &no, Required: []string{"nodeId", "key"},
				Properties: map[string]*protocol.Schema{"nodeId": {Type: "string"}, "key": {Type: "string", MaxLength: &max}}}},
		"node.kv.put": {Name: "node.kv.put", Version: 1, Retry: protocol.RetryMutation},
	}}
	close(s.readyCh)
	return s
}

// The retry class of a result the node cannot deliver comes from the
// pinned set's declarations; protocol's classification serves methods
// the set does not declare.
func TestSessionPureReadFromDeclarations(t *testing.T) {
	s := declSession(nil)
	for m, want := range map[string]bool{"node.kv.get": true, "node.kv.put": false, "node.fs.read": true, "node.fs.write": false, "node.kv.other": false} {
		if got := s.pureRead(m); got != want {
			t.Errorf("%s: %v", m, got)
		}
	}
	var r protocol.InvokeResult
	tooDeep := json.RawMessage(`[` + repeat("[", protocol.MaxJSONDepth) + repeat("]", protocol.MaxJSONDepth) + `]`)
	json.Unmarshal(encodeResult("i", s.pureRead("node.kv.get"), tooDeep, nil, 1<<20, false), &r)
	if r.Error == nil || *r.Error.Details.RetrySafe != true || *r.Error.Details.MutationMayHaveApplied {
		t.Fatalf("declared read: %+v", r.Error)
	}
	json.Unmarshal(encodeResult("i", s.pureRead("node.kv.put"), tooDeep, nil, 1<<20, false), &r)
	if r.Error == nil || *r.Error.Details.RetrySafe != false {
		t.Fatalf("declared mutation: %+v", r.Error)
	}
}

func repeat(s string, n int) string { return strings.Repeat(s, n) }

// The node checks the declared params schema itself before dispatching.
func TestSessionValidatesDeclaredSchema(t *testing.T) {
	d := &okDispatcher{}
	s := declSession(d)
	ctx := context.Background()
	_, perr := s.invoke(ctx, protocol.InvokeRequest{InvokeID: "i1", Method: "node.kv.get", Args: json.RawMessage(`{"nodeId":"n","key":"toolong"}`)})
	if perr == nil || perr.Code != protocol.CodeInvalidParams || perr.Details.Field != "key" || d.calls != 0 {
		t.Fatalf("got %v, %d calls", perr, d.calls)
	}
	if _, perr := s.invoke(ctx, protocol.InvokeRequest{InvokeID: "i2", Method: "node.kv.get", Args: json.RawMessage(`{"nodeId":"n","key":"k"}`)}); perr != nil || d.calls != 1 {
		t.Fatalf("got %v, %d calls", perr, d.calls)
	}
	// No schema declared: any object passes to the dispatcher.
	if _, perr := s.invoke(ctx, protocol.InvokeRequest{InvokeID: "i3", Method: "node.kv.put", Args: json.RawMessage(`{"nodeId":"n","x":1}`)}); perr != nil || d.calls != 2 {
		t.Fatalf("got %v, %d calls", perr, d.calls)
	}
}

// While draining for a new set, new invocations are refused retry-safe
// and the drain completes once the last one in flight has finished.
func TestSessionDrain(t *testing.T) {
	s := declSession(&okDispatcher{})
	s.active = 1
	ch := s.startDrain()
	select {
	case <-ch:
		t.Fatal("drained with a call in flight")
	default:
	}
	s.done()
	select {
	case <-ch:
	default:
		t.Fatal("not drained after the last call")
	}
	// A late refusal finishing after the drain does not close twice.
	s.active = 1
	s.done()
}
