package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"lemon/client"
	"lemon/client/fakecontrol"
	"lemon/protocol"
	"lemon/version"
)

const opToken = "op-secret-token-1234"

func echoHandler(release <-chan struct{}) fakecontrol.Handler {
	return func(_ *fakecontrol.Conn, req protocol.Request) (any, *protocol.Error) {
		switch req.Method {
		case "echo":
			return req.Params, nil
		case "slow":
			<-release
			return map[string]string{"slow": "done"}, nil
		case "fail":
			return nil, protocol.DomainError(protocol.CodeConflict, protocol.DomainRevisionConflict, "changed")
		}
		return nil, protocol.Errorf(protocol.CodeMethodNotFound, "unknown method")
	}
}

func dial(t *testing.T, srv *fakecontrol.Server) *client.Conn {
	t.Helper()
	c, err := client.Dial(context.Background(), srv.URL, client.Options{Token: opToken})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestCallReturnsPayloadAndError(t *testing.T) {
	srv := fakecontrol.New(fakecontrol.Options{OperatorToken: opToken, Handle: echoHandler(nil)})
	defer srv.Close()
	c := dial(t, srv)
	if got := c.Hello().Policy.MaxPayload; got != protocol.DefaultMaxPayload {
		t.Fatalf("maxPayload = %d", got)
	}
	payload, perr := c.Call(context.Background(), "echo", map[string]int{"a": 1})
	if perr != nil || string(payload) != `{"a":1}` {
		t.Fatalf("echo = %s, %v", payload, perr)
	}
	_, perr = c.Call(context.Background(), "fail", nil)
	if perr == nil || perr.Code != protocol.CodeConflict || perr.DomainCode() != protocol.DomainRevisionConflict {
		t.Fatalf("fail = %+v", perr)
	}
}

// Concurrent calls share one socket; a slow call does not hold up others,
// and every caller gets its own answer.
func TestCallMultiplexesConcurrentRequests(t *testing.T) {
	release := make(chan struct{})
	srv := fakecontrol.New(fakecontrol.Options{OperatorToken: opToken, Handle: echoHandler(release)})
	defer srv.Close()
	c := dial(t, srv)

	slowDone := make(chan json.RawMessage, 1)
	go func() {
		p, _ := c.Call(context.Background(), "slow", nil)
		slowDone <- p
	}()
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprintf(`{"i":%d}`, i)
			p, perr := c.Call(context.Background(), "echo", json.RawMessage(want))
			if perr != nil || string(p) != want {
				errs <- fmt.Sprintf("call %d: got %s, %v", i, p, perr)
			}
		}()
	}
	wg.Wait() // completes while "slow" is still blocked
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	select {
	case <-slowDone:
		t.Fatal("slow call finished before release")
	default:
	}
	close(release)
	if p := <-slowDone; string(p) != `{"slow":"done"}` {
		t.Fatalf("slow = %s", p)
	}
}

func TestDialWrongTokenIsUnauthorizedWithoutEcho(t *testing.T) {
	srv := fakecontrol.New(fakecontrol.Options{OperatorToken: opToken})
	defer srv.Close()
	const wrong = "wrong-token-zzzz-9876"
	_, err := client.Dial(context.Background(), srv.URL, client.Options{Token: wrong})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeUnauthorized {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), wrong) {
		t.Fatal("error echoes the token")
	}
}

func TestDialRefusedIsClassified(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = client.Dial(context.Background(), "ws://"+addr+"/ws?token=sekrit", client.Options{Token: opToken})
	var de *client.DialError
	if !errors.As(err, &de) || de.Reason != "connection refused" {
		t.Fatalf("err = %v", err)
	}
	if msg := err.Error(); strings.Contains(msg, "sekrit") || strings.Contains(msg, opToken) {
		t.Fatalf("error leaks secrets: %s", msg)
	}
	_, err = client.Dial(context.Background(), "http://"+addr+"/ws", client.Options{Token: opToken})
	if !errors.As(err, &de) || !strings.HasPrefix(de.Reason, "malformed URL") {
		t.Fatalf("http scheme: %v", err)
	}
}

// policy.maxPayload bounds outbound frames: a frame of exactly maxPayload
// bytes is sent (and accepted), one byte more is refused locally.
func TestCallMaxPayloadBoundary(t *testing.T) {
	const limit = 4096
	srv := fakecontrol.New(fakecontrol.Options{OperatorToken: opToken, MaxPayload: limit, Handle: echoHandler(nil)})
	defer srv.Close()
	c := dial(t, srv)
	if c.MaxPayload() != limit {
		t.Fatalf("MaxPayload = %d", c.MaxPayload())
	}
	// The next call gets id "r2"; its frame is the overhead plus the string.
	overhead := len(`{"type":"req","id":"r2","method":"echo","params":""}`)
	fill := strings.Repeat("x", limit-overhead)
	p, perr := c.Call(context.Background(), "echo", json.RawMessage(`"`+fill+`"`))
	if perr != nil || len(p) != len(fill)+2 {
		t.Fatalf("at limit: %d bytes, %v", len(p), perr)
	}
	// Next id "r3" has the same length; one byte over the limit.
	_, perr = c.Call(context.Background(), "echo", json.RawMessage(`"`+fill+`x"`))
	if perr == nil || perr.DomainCode() != protocol.DomainPayloadTooLarge {
		t.Fatalf("over limit: %v", perr)
	}
	// The connection still serves.
	if _, perr := c.Call(context.Background(), "echo", json.RawMessage(`1`)); perr != nil {
		t.Fatalf("after refusal: %v", perr)
	}
}

func TestPendingCallFailsWhenConnectionDrops(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := fakecontrol.New(fakecontrol.Options{OperatorToken: opToken, Handle: echoHandler(release)})
	defer srv.Close()
	c := dial(t, srv)
	done := make(chan *protocol.Error, 1)
	go func() {
		_, perr := c.Call(context.Background(), "slow", nil)
		done <- perr
	}()
	// Wait until the request reached the server, then crash it.
	if _, perr := c.Call(context.Background(), "echo", json.RawMessage(`1`)); perr != nil {
		t.Fatal(perr)
	}
	srv.DropAll()
	perr := <-done
	if perr == nil || perr.Code != protocol.CodeUnavailable {
		t.Fatalf("pending = %v", perr)
	}
	<-c.Done()
	if c.Err() == nil {
		t.Fatal("Err() nil after drop")
	}
	if _, perr := c.Call(context.Background(), "echo", nil); perr == nil || perr.Code != protocol.CodeUnavailable {
		t.Fatalf("call after drop = %v", perr)
	}
}

func TestCallContextDeadlineIsTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := fakecontrol.New(fakecontrol.Options{OperatorToken: opToken, Handle: echoHandler(release)})
	defer srv.Close()
	c := dial(t, srv)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(20*time.Millisecond))
	defer cancel()
	_, perr := c.Call(ctx, "slow", nil)
	if perr == nil || perr.Code != protocol.CodeTimeout {
		t.Fatalf("got %v", perr)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c.Close() // idempotent
	if !errors.Is(c.Err(), client.ErrClosed) {
		t.Fatalf("Err = %v", c.Err())
	}
}

// Issue 9 item 7: a controller's close frame (1008 with a reason, as for
// a slow consumer) reaches the caller: the failed call's message and
// Err() name the code and reason; control characters are not passed on.
func TestCloseReasonSurfaced(t *testing.T) {
	const reason = "slow consumer: queued frames were not read in time"
	srv := fakecontrol.New(fakecontrol.Options{OperatorToken: opToken, Handle: func(c *fakecontrol.Conn, req protocol.Request) (any, *protocol.Error) {
		text := reason
		if req.Method == "ctl" {
			text = "bad\x1b[2Jreason"
		}
		c.CloseWith(websocket.ClosePolicyViolation, text)
		return nil, nil
	}})
	defer srv.Close()
	c := dial(t, srv)
	_, perr := c.Call(context.Background(), "close", nil)
	want := "connection to the controller was lost (closed by the controller: 1008 " + reason + ")"
	if perr == nil || perr.Code != protocol.CodeUnavailable || perr.DomainCode() != "connection_lost" || perr.Message != want {
		t.Fatalf("call: %+v, want message %q", perr, want)
	}
	<-c.Done()
	var ce *websocket.CloseError
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "1008 "+reason) || !errors.As(err, &ce) || ce.Code != 1008 {
		t.Fatalf("Err() = %v", err)
	}
	c2 := dial(t, srv)
	_, perr = c2.Call(context.Background(), "ctl", nil)
	if perr == nil || !strings.HasSuffix(perr.Message, "1008 bad?[2Jreason)") {
		t.Fatalf("control characters: %+v", perr)
	}
}

// ResolveNode: an exact nodeId wins over a name; a unique name gives its
// nodeId; an unknown word passes through; two nodes of one name are
// INVALID_PARAMS node_name_ambiguous; a refused node.list passes through.
func TestResolveNode(t *testing.T) {
	nodes := []protocol.NodeSummary{
		{NodeID: "node-a", Name: "alpha"}, {NodeID: "node-b", Name: "node-a"},
		{NodeID: "node-c", Name: "twin"}, {NodeID: "node-d", Name: "twin"},
	}
	var refuse atomic.Bool
	srv := fakecontrol.New(fakecontrol.Options{OperatorToken: opToken, Handle: func(_ *fakecontrol.Conn, req protocol.Request) (any, *protocol.Error) {
		if req.Method != protocol.MethodNodeList {
			return nil, protocol.Errorf(protocol.CodeMethodNotFound, "unknown method")
		}
		if refuse.Load() {
			return nil, protocol.Errorf(protocol.CodeForbidden, "scope")
		}
		return protocol.NodeListResult{Nodes: nodes}, nil
	}})
	defer srv.Close()
	c := dial(t, srv)
	ctx := context.Background()
	for in, want := range map[string]string{"node-a": "node-a", "alpha": "node-a", "node-b": "node-b", "nobody": "nobody"} {
		if got, perr := c.ResolveNode(ctx, in); perr != nil || got != want {
			t.Errorf("ResolveNode(%q) = %q, %v; want %q", in, got, perr, want)
		}
	}
	_, perr := c.ResolveNode(ctx, "twin")
	if perr == nil || perr.Code != protocol.CodeInvalidParams || perr.DomainCode() != client.DomainNodeNameAmbiguous ||
		perr.Details.Field != "nodeId" || strings.Contains(perr.Message, "twin") || strings.Contains(perr.Message, "node-c") {
		t.Errorf("ambiguous name: %+v", perr)
	}
	refuse.Store(true)
	if got, perr := c.ResolveNode(ctx, "alpha"); perr != nil || got != "alpha" {
		t.Errorf("refused node.list: %q, %v; want alpha unchanged", got, perr)
	}
}

// A client that names no version sends the build's (lemon/version), the
// one version source.
func TestDefaultClientVersionIsTheBuildVersion(t *testing.T) {
	got := make(chan string, 1)
	srv := fakecontrol.New(fakecontrol.Options{OperatorToken: opToken, ConnectHook: func(p protocol.ConnectParams) *protocol.Error {
		got <- p.Client.Version
		return nil
	}})
	defer srv.Close()
	dial(t, srv)
	if v := <-got; v != version.Version {
		t.Fatalf("client.version %q, want %q", v, version.Version)
	}
}
