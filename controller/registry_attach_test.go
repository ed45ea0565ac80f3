package controller

import (
	"context"
	"encoding/json"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lemon/protocol"
)

// These tests cover attach's rule that nothing which can wait on a peer
// runs under the registry lock: a node whose socket stops reading while
// its hello-ok is being queued must not stall node.list, node.describe,
// routing or another node's connect; and the hello-ok stays the first
// frame a node sees, for the connection that owns the node only.

// stallListener records accepted connections; a test can stall the
// controller's writes to one of them (a peer that never reads) and learn
// when the controller's writer is stuck in such a write.
type stallListener struct {
	net.Listener
	mu    sync.Mutex
	conns []*stallConn
}

type stallConn struct {
	net.Conn
	mu      sync.Mutex
	gate    chan struct{} // nil: writes pass; else Write waits until it is closed
	entered chan struct{} // receives once per Write that waits on the gate
}

func (l *stallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	s := &stallConn{Conn: c, entered: make(chan struct{}, 16)}
	l.mu.Lock()
	l.conns = append(l.conns, s)
	l.mu.Unlock()
	return s, nil
}

func (l *stallListener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

func (l *stallListener) last() *stallConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conns[len(l.conns)-1]
}

func (s *stallConn) stall() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate == nil {
		s.gate = make(chan struct{})
	}
}

func (s *stallConn) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
}

func (s *stallConn) Write(p []byte) (int, error) {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		select {
		case s.entered <- struct{}{}:
		default:
		}
		<-gate
	}
	return s.Conn.Write(p)
}

// attachServer is a controller on a stallListener whose attach hook is
// set before it serves (so the hook is read race-free).
type attachServer struct {
	*Server
	url string
	ln  *stallListener
}

func startAttachServer(t *testing.T, hook func(*conn)) *attachServer {
	t.Helper()
	s, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	s.reg.testHookBeforeHello = hook
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &stallListener{Listener: raw}
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.Serve(context.Background(), ln)
	}()
	t.Cleanup(func() {
		// Stalled writers must finish before the server can close.
		ln.mu.Lock()
		for _, c := range ln.conns {
			c.release()
		}
		ln.mu.Unlock()
		s.Close()
		<-served
	})
	return &attachServer{Server: s, url: "ws://" + raw.Addr().String() + "/ws", ln: ln}
}

// fillerFrame is a well-formed event a test queues to fill a write queue.
var fillerFrame = []byte(`{"type":"event","event":"zztest.filler","seq":0,"payload":{}}`)

// jamWriteQueue makes c's next send block for real: it queues one frame,
// waits until the writer is stuck writing it to the stalled socket sc,
// then fills the write queue to capacity.
func jamWriteQueue(t *testing.T, c *conn, sc *stallConn) {
	c.budget.acquire(int64(len(fillerFrame)), testWait, nil)
	c.out <- outFrame{data: fillerFrame, charged: int64(len(fillerFrame))}
	select {
	case <-sc.entered:
	case <-time.After(testWait): // hang guard only
		t.Error("the controller's writer never reached the stalled socket")
		return
	}
	for {
		select {
		case c.out <- outFrame{data: fillerFrame, charged: int64(len(fillerFrame))}:
			c.budget.acquire(int64(len(fillerFrame)), testWait, nil)
		default:
			return
		}
	}
}

// dialNodeNoWait dials, stalls the controller's writes to this socket
// (after the upgrade) and sends a node connect without waiting for hello-ok.
func (s *attachServer) dialNodeNoWait(t *testing.T, token string) (*peer, *stallConn) {
	t.Helper()
	n := s.ln.count()
	p := dialPeer(t, s.url)
	if s.ln.count() != n+1 {
		t.Fatal("unexpected extra connection")
	}
	sc := s.ln.last()
	sc.stall()
	p.writeJSON(protocol.Request{Type: protocol.FrameReq, ID: "c1", Method: "connect",
		Params: mustJSON(t, protocol.ConnectParams{Role: protocol.RoleNode, Auth: protocol.ConnectAuth{Token: token},
			Client: protocol.ConnectClient{ID: "stuck-node", Version: "1"}, Node: &protocol.NodeAdvertise{Methods: defaultMethods()}})})
	return p, sc
}

func describeNode(t *testing.T, op *peer, id string) protocol.NodeDescription {
	t.Helper()
	f := op.call(protocol.MethodNodeDescribe, map[string]any{"nodeId": id})
	if !f.OK {
		t.Fatalf("node.describe: %s", f.raw)
	}
	var d protocol.NodeDescription
	if err := json.Unmarshal(f.Payload, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// readUntilHello skips filler frames and returns the first other frame.
func readUntilHello(t *testing.T, p *peer) frame {
	t.Helper()
	for {
		f := p.next()
		if f.Type == protocol.FrameEvent && f.Event == "zztest.filler" {
			continue
		}
		return f
	}
}

// waitPending waits until a call routed to c is registered on it (the
// router is about to queue its node.invoke.request). Hang guard only.
func waitPending(t *testing.T, c *conn, n int) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		c.pmu.Lock()
		got := len(c.pending)
		c.pmu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("call never routed to the node")
		}
		time.Sleep(time.Millisecond)
	}
}

// answerNext reads the next frame of p, which must be a
// node.invoke.request, and answers it with result.
func answerNext(t *testing.T, p *peer, result string) protocol.InvokeRequest {
	t.Helper()
	ev := p.next()
	if ev.Type != protocol.FrameEvent || ev.Event != protocol.EventInvokeRequest {
		t.Fatalf("want node.invoke.request, got %s", ev.raw)
	}
	var req protocol.InvokeRequest
	if err := json.Unmarshal(ev.Payload, &req); err != nil {
		t.Fatal(err)
	}
	p.start(protocol.MethodInvokeResult, protocol.InvokeResult{InvokeID: req.InvokeID, Result: json.RawMessage(result)})
	return req
}

// A node whose socket stops reading while its hello-ok is being queued
// (its write queue full, its writer stuck in a socket write) must not
// stall the registry: node.list, node.describe, another node's connect
// and a call routed to that other node all complete while it stays
// stuck. A call routed to the stuck node waits, and its
// node.invoke.request reaches the node only after hello-ok.
func TestAttachStuckHelloDoesNotStallRegistry(t *testing.T) {
	stuck := make(chan *conn, 1)
	var armed atomic.Bool
	armed.Store(true)
	s := startAttachServer(t, func(c *conn) {
		if c.node.rec.Name == "worker-1" && armed.CompareAndSwap(true, false) {
			jamWriteQueue(t, c, c.ws.UnderlyingConn().(*guardedConn).Conn.(*stallConn))
			stuck <- c
		}
	})
	p, sc := s.dialNodeNoWait(t, nodeToken)
	var c *conn
	select {
	case c = <-stuck:
	case <-time.After(testWait): // hang guard only
		t.Fatal("attach hook not reached")
	}

	op := connectOperator(t, s.url, adminToken)
	f := op.call(protocol.MethodNodeList, nil)
	if !f.OK {
		t.Fatalf("node.list: %s", f.raw)
	}
	var list protocol.NodeListResult
	json.Unmarshal(f.Payload, &list)
	if len(list.Nodes) != 2 || list.Nodes[0].Name != "worker-1" || !list.Nodes[0].Online || list.Nodes[1].Online {
		t.Fatalf("node.list while worker-1 is stuck: %s", f.raw)
	}
	if d := describeNode(t, op, nodeIDOf("worker-1")); !d.Online || d.Methods[mEcho] != 1 {
		t.Fatalf("worker-1 while stuck: %+v", d)
	}
	// Another node connects and serves a routed call.
	n2 := connectNode(t, s.url, node2Token, protocol.NodeAdvertise{}, echoHandler)
	f = op.call(mEcho, map[string]any{"nodeId": nodeIDOf("worker-2"), "value": "v"})
	if !f.OK || string(f.Payload) != `{"method":"node.fs.zztest.echo","value":"v"}` {
		t.Fatalf("call to worker-2: %s", f.raw)
	}
	if d := describeNode(t, op, nodeIDOf("worker-2")); !d.Online || d.Methods[mEcho] != 1 {
		t.Fatalf("worker-2: %+v", d)
	}
	// A call to worker-1 is routed to it and waits for its hello-ok.
	res := op.start(mEcho, map[string]any{"nodeId": nodeIDOf("worker-1"), "value": "w1"})
	waitPending(t, c, 1)
	// worker-1 is still stuck in its hello-ok send.
	if len(c.out) != cap(c.out) {
		t.Fatalf("stuck queue holds %d of %d", len(c.out), cap(c.out))
	}

	// Once the socket drains, worker-1 reads the fillers (standing in
	// for unread earlier frames), its hello-ok, then the call.
	sc.release()
	if h := readUntilHello(t, p); h.Type != protocol.FrameHelloOK || h.Auth.NodeID != nodeIDOf("worker-1") {
		t.Fatalf("first frame after the fillers: %s", h.raw)
	}
	if req := answerNext(t, p, `{"w1":true}`); req.NodeID != nodeIDOf("worker-1") {
		t.Fatalf("request: %+v", req)
	}
	if f := op.await(res); !f.OK || string(f.Payload) != `{"w1":true}` {
		t.Fatalf("call to worker-1: %s", f.raw)
	}
	select {
	case <-n2.closed:
		t.Fatal("worker-2 was closed")
	default:
	}
}

// A connection replaced while its hello-ok send is stuck never gets that
// hello-ok: the newer connection closes it at once (its queue being
// full, without a close frame) and keeps the node.
func TestAttachReplacedDuringStuckHello(t *testing.T) {
	stuck := make(chan struct{}, 1)
	var armed atomic.Bool
	armed.Store(true)
	s := startAttachServer(t, func(c *conn) {
		if armed.CompareAndSwap(true, false) { // the first connect only
			jamWriteQueue(t, c, c.ws.UnderlyingConn().(*guardedConn).Conn.(*stallConn))
			stuck <- struct{}{}
		}
	})
	a, _ := s.dialNodeNoWait(t, nodeToken)
	select {
	case <-stuck:
	case <-time.After(testWait): // hang guard only
		t.Fatal("attach hook not reached")
	}
	b := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, echoHandler)
	a.waitClosed()
	select {
	case f := <-a.frames:
		t.Fatalf("replaced connection received %s", f.raw)
	default:
	}
	op := connectOperator(t, s.url, adminToken)
	id := nodeIDOf("worker-1")
	if f := op.call(mEcho, map[string]any{"nodeId": id, "value": 2}); !f.OK || string(f.Payload) != `{"method":"node.fs.zztest.echo","value":2}` {
		t.Fatalf("call: %s", f.raw)
	}
	if got := len(b.requests); got != 1 {
		t.Fatalf("newer connection served %d calls, want 1", got)
	}
	if d := describeNode(t, op, id); !d.Online {
		t.Fatalf("node offline: %+v", d)
	}
}

// A connection replaced after it went live but before its hello-ok was
// queued gets no hello-ok: its first frame is the CloseSessionReplaced
// close, queued ahead of it.
func TestAttachReplacedBeforeHelloQueued(t *testing.T) {
	entered := make(chan struct{})
	proceed := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(proceed) }) }
	t.Cleanup(release)
	var armed atomic.Bool
	armed.Store(true)
	s := startAttachServer(t, func(c *conn) {
		if armed.CompareAndSwap(true, false) { // the first connect only
			close(entered)
			<-proceed
		}
	})
	a := dialPeer(t, s.url)
	a.writeJSON(protocol.Request{Type: protocol.FrameReq, ID: "c1", Method: "connect",
		Params: mustJSON(t, protocol.ConnectParams{Role: protocol.RoleNode, Auth: protocol.ConnectAuth{Token: nodeToken},
			Node: &protocol.NodeAdvertise{Methods: defaultMethods()}})})
	select {
	case <-entered:
	case <-time.After(testWait): // hang guard only
		t.Fatal("attach hook not reached")
	}
	b := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, echoHandler)
	release()
	if code := a.waitClosed(); code != CloseSessionReplaced {
		t.Fatalf("replaced connection closed with %d", code)
	}
	select {
	case f := <-a.frames:
		t.Fatalf("replaced connection received %s", f.raw)
	default:
	}
	op := connectOperator(t, s.url, adminToken)
	if f := op.call(mEcho, map[string]any{"nodeId": nodeIDOf("worker-1")}); !f.OK {
		t.Fatalf("call: %s", f.raw)
	}
	<-b.requests
}

// When a node reconnects, its old connection is closed as replaced as
// soon as the new one is live, even while the new one's hello-ok is not
// queued yet; a call routed meanwhile reaches the new connection after
// its hello-ok, never before.
func TestAttachHelloFirstOnReconnect(t *testing.T) {
	// The first connect passes the hook; the second waits in it until
	// proceed is closed.
	var n atomic.Int32
	attaching := make(chan *conn, 1)
	proceed := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(proceed) }) }
	t.Cleanup(release)
	s := startAttachServer(t, func(c *conn) {
		if n.Add(1) == 2 {
			attaching <- c
			<-proceed
		}
	})
	old := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, echoHandler)
	op := connectOperator(t, s.url, adminToken)
	id := nodeIDOf("worker-1")

	a := dialPeer(t, s.url)
	a.writeJSON(protocol.Request{Type: protocol.FrameReq, ID: "c1", Method: "connect",
		Params: mustJSON(t, protocol.ConnectParams{Role: protocol.RoleNode, Auth: protocol.ConnectAuth{Token: nodeToken},
			Node: &protocol.NodeAdvertise{Methods: defaultMethods()}})})
	var c *conn
	select {
	case c = <-attaching:
	case <-time.After(testWait): // hang guard only
		t.Fatal("attach hook not reached")
	}
	if code := old.waitClosed(); code != CloseSessionReplaced {
		t.Fatalf("old connection closed with %d", code)
	}
	res := op.start(mEcho, map[string]any{"nodeId": id, "value": "new"})
	waitPending(t, c, 1)
	release()

	if h := a.next(); h.Type != protocol.FrameHelloOK {
		t.Fatalf("first frame: %s", h.raw)
	}
	answerNext(t, a, `{"new":true}`)
	if f := op.await(res); !f.OK || string(f.Payload) != `{"new":true}` {
		t.Fatalf("call after attach: %s", f.raw)
	}
	if got := len(old.requests); got != 0 {
		t.Fatalf("old connection got %d requests", got)
	}
}

// attach sends nothing and holds the registry lock only for its own
// bookkeeping: run with a conn that has no writer at all (any send would
// block forever), it returns, and a session revoked before it makes the
// attach fail with session_revoked, leaving the node offline.
func TestAttachSendsNothingAndRechecksSession(t *testing.T) {
	f := newFlushFixture(t, 2)
	for i := range 2 {
		adv := &protocol.NodeAdvertise{NodeID: f.ids[i], Methods: map[string]int{mEcho: 1}}
		a, perr := f.r.authenticateNode(f.tokens[i], adv)
		if perr != nil {
			t.Fatal(perr)
		}
		if i == 1 {
			f.r.mu.Lock()
			rs := *f.r.sessions[a.session]
			rs.Revoked = true
			f.r.sessions[a.session] = &rs
			f.r.mu.Unlock()
		}
		c := &conn{peerMax: protocol.DefaultMaxPayload}
		done := make(chan *protocol.Error, 1)
		go func() {
			_, perr := f.r.attach(a, c, adv, protocol.ConnectClient{ID: "t"}, func() {})
			done <- perr
		}()
		select {
		case perr = <-done:
		case <-time.After(testWait): // hang guard only
			t.Fatal("attach blocked")
		}
		d, _ := f.r.describe(f.ids[i])
		switch {
		case i == 0 && (perr != nil || !d.Online):
			t.Fatalf("attach: %v, online %v", perr, d.Online)
		case i == 1 && (perr == nil || perr.DomainCode() != protocol.DomainSessionRevoked || d.Online):
			t.Fatalf("attach on a revoked session: %v, online %v", perr, d.Online)
		}
	}
}
