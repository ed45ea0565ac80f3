package controller

// Adversarial tests of the /ws protocol: each names the attack it makes
// and the behaviour that must hold.

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"lemon/protocol"
)

// A request that fits the controller's maxPayload but not the node's
// advertised one must not be forwarded: the node would refuse the frame
// and lose its connection (and every other call in flight on it).
func TestAdvRequestOverNodeMaxPayloadIsNotForwarded(t *testing.T) {
	s := startServer(t, testConfig())
	const nodeMax = 4096
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{MaxPayload: nodeMax}, echoHandler)
	n.ws.SetReadLimit(nodeMax) // what a real node does with its own limit
	op := connectOperator(t, s.url, adminToken)
	id := nodeIDOf("worker-1")

	f := op.call(mEcho, map[string]any{"nodeId": id, "value": strings.Repeat("v", nodeMax)})
	wantError(t, f, protocol.CodeInvalidParams, protocol.DomainPayloadTooLarge)
	wantRetry(t, f, false, false)
	select {
	case req := <-n.requests:
		t.Fatalf("oversized request forwarded: %d bytes of args", len(req.Args))
	default:
	}
	// The node is still connected and serves a request that fits.
	if f := op.call(mEcho, map[string]any{"nodeId": id, "value": "small"}); !f.OK {
		t.Fatalf("after the refused request: %s", f.raw)
	}
	if req := <-n.requests; len(req.Args) > nodeMax {
		t.Fatalf("args %d bytes", len(req.Args))
	}
}

// Request ids must be valid UTF-8: encoding/json folds invalid bytes and
// lone surrogate escapes into U+FFFD, so the echoed id would not be the
// one sent (and two different ids would collide).
func TestAdvRequestIDNotUTF8(t *testing.T) {
	s := startServer(t, testConfig())
	p := connectOperator(t, s.url, adminToken)
	for _, raw := range []string{
		"{\"type\":\"req\",\"id\":\"a\xffb\",\"method\":\"node.list\"}",
		`{"type":"req","id":"a\ud800b","method":"node.list"}`,
		"{\"type\":\"req\",\"id\":\"x\",\"method\":\"node.l\xffist\"}",
	} {
		p.writeRaw(websocket.TextMessage, []byte(raw))
		f := p.next()
		wantError(t, f, protocol.CodeInvalidRequest, "")
		if f.ID != protocol.UnknownID {
			t.Fatalf("%q: answered under id %q", raw, f.ID)
		}
	}
	if f := p.call("node.list", nil); !f.OK {
		t.Fatalf("connection no longer serves: %s", f.raw)
	}
}

// A peer that never completes connect is closed after the handshake
// timeout, even when it keeps the socket busy with pings and a frame
// dribbled in fragments (slowloris).
func TestAdvHandshakeSlowloris(t *testing.T) {
	cfg := testConfig()
	cfg.HandshakeTimeout = 300 * time.Millisecond
	s := startServer(t, cfg)
	ws, _, err := websocket.DefaultDialer.Dial(s.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	w, err := ws.NextWriter(websocket.TextMessage)
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}()
	frame := []byte(`{"type":"req","id":"c1","method":"connect","params":{"role":"operator"}}`)
	for i := 0; ; i++ {
		select {
		case <-closed:
			return
		case <-time.After(20 * time.Millisecond):
		}
		if i > 500 {
			t.Fatal("slowloris connection still open")
		}
		// One byte per fragment, a ping between fragments.
		if i < len(frame)-1 {
			w.Write(frame[i : i+1])
			if fw, ok := w.(interface{ Flush() error }); ok {
				fw.Flush()
			}
		}
		ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(time.Second))
	}
}

// After connect, a peer that sends nothing (not even a ping) is closed
// after the idle timeout.
func TestAdvIdleTimeoutReclaims(t *testing.T) {
	cfg := testConfig()
	cfg.IdleTimeout = 300 * time.Millisecond
	s := startServer(t, cfg)
	p := connectOperator(t, s.url, adminToken)
	p.waitClosed()
}

// A node answering a call after it was replaced by a newer connection is
// refused, and the caller has UNAVAILABLE, never the stale result.
func TestAdvResultFromReplacedConnection(t *testing.T) {
	s := startServer(t, testConfig())
	first := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, silentHandler)
	op := connectOperator(t, s.url, adminToken)
	ch := op.start(mEcho, map[string]any{"nodeId": nodeIDOf("worker-1")})
	req := <-first.requests
	connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, silentHandler)
	f := op.await(ch)
	wantError(t, f, protocol.CodeUnavailable, protocol.DomainNodeDisconnected)
	wantRetry(t, f, false, true)
	// The old socket may already be closed; if the frame gets through it is refused.
	rch := first.start(protocol.MethodInvokeResult, protocol.InvokeResult{InvokeID: req.InvokeID, Result: json.RawMessage(`{"stale":1}`)})
	select {
	case r := <-rch:
		wantError(t, r, protocol.CodeNotFound, "")
	case <-first.closed:
	}
}

// A node answering twice, or with both result and error, or for an
// invokeId never sent, never reaches the caller twice.
func TestAdvNodeResultAbuse(t *testing.T) {
	s := startServer(t, testConfig())
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, silentHandler)
	op := connectOperator(t, s.url, adminToken)
	id := nodeIDOf("worker-1")

	ch := op.start(mEcho, map[string]any{"nodeId": id})
	req := <-n.requests
	if f := n.call(protocol.MethodInvokeResult, protocol.InvokeResult{InvokeID: req.InvokeID, Result: json.RawMessage(`{"n":1}`)}); !f.OK {
		t.Fatalf("first result: %s", f.raw)
	}
	wantError(t, n.call(protocol.MethodInvokeResult, protocol.InvokeResult{InvokeID: req.InvokeID, Result: json.RawMessage(`{"n":2}`)}),
		protocol.CodeNotFound, "")
	if f := op.await(ch); !f.OK || string(f.Payload) != `{"n":1}` {
		t.Fatalf("caller: %s", f.raw)
	}

	ch = op.start(mEcho, map[string]any{"nodeId": id})
	req = <-n.requests
	wantError(t, n.call(protocol.MethodInvokeResult, map[string]any{"invokeId": req.InvokeID, "result": map[string]int{"x": 1},
		"error": protocol.Errorf(protocol.CodeConflict, "both")}), protocol.CodeInvalidParams, "")
	f := op.await(ch)
	wantError(t, f, protocol.CodeInternal, "")
	wantRetry(t, f, false, true)

	// Non-string and huge invokeIds are refused without effect.
	wantError(t, n.call(protocol.MethodInvokeResult, `{"invokeId":7,"result":{}}`), protocol.CodeInvalidParams, "")
	wantError(t, n.call(protocol.MethodInvokeResult, map[string]any{"invokeId": strings.Repeat("i", 100000), "result": 1}), protocol.CodeNotFound, "")
	// Case-variant and duplicate keys are refused.
	ch = op.start(mEcho, map[string]any{"nodeId": id})
	req = <-n.requests
	wantError(t, n.call(protocol.MethodInvokeResult, `{"invokeId":"`+req.InvokeID+`","Result":{"x":1}}`), protocol.CodeInvalidParams, "")
	f = op.await(ch)
	wantError(t, f, protocol.CodeInternal, "")
}

// Node advertisements the controller must refuse at connect.
func TestAdvNodeAdvertiseAbuse(t *testing.T) {
	s := startServer(t, testConfig())
	many := map[string]int{}
	for i := 0; i <= protocol.MaxAdvertisedMethods; i++ {
		many["node.fs.m"+strings.Repeat("x", i%50)+string(rune('a'+i%26))+strings.Repeat("y", i/26)] = 1
	}
	cases := map[string]*protocol.NodeAdvertise{
		"version 0":         {Methods: map[string]int{mEcho: 0}},
		"negative version":  {Methods: map[string]int{mEcho: -1}},
		"method with space": {Methods: map[string]int{"node.fs read": 1}},
		"too many methods":  {Methods: many},
		"maxPayload 1023":   {Methods: map[string]int{}, MaxPayload: 1023},
		"bad nodeId":        {Methods: map[string]int{}, NodeID: strings.Repeat("n", 300)},
		"control in name":   {Methods: map[string]int{}, Name: "wor\x01ker-1"},
	}
	for name, adv := range cases {
		t.Run(name, func(t *testing.T) {
			p := dialPeer(t, s.url)
			f := p.call("connect", mustJSON(t, protocol.ConnectParams{Role: protocol.RoleNode,
				Auth: protocol.ConnectAuth{Token: nodeToken}, Node: adv}))
			wantError(t, f, protocol.CodeInvalidParams, "")
		})
	}
	t.Run("another node's id", func(t *testing.T) {
		p := dialPeer(t, s.url)
		f := p.call("connect", mustJSON(t, protocol.ConnectParams{Role: protocol.RoleNode,
			Auth: protocol.ConnectAuth{Token: nodeToken}, Node: &protocol.NodeAdvertise{Methods: map[string]int{}, NodeID: nodeIDOf("worker-2")}}))
		wantError(t, f, protocol.CodeUnauthorized, protocol.DomainNodeIdentityMismatch)
	})
	t.Run("operator connect with node advertise", func(t *testing.T) {
		p := dialPeer(t, s.url)
		f := p.call("connect", mustJSON(t, protocol.ConnectParams{Role: protocol.RoleOperator,
			Auth: protocol.ConnectAuth{Token: adminToken}, Node: &protocol.NodeAdvertise{Methods: map[string]int{}}}))
		wantError(t, f, protocol.CodeInvalidParams, "")
	})
	t.Run("node asking for operator scopes", func(t *testing.T) {
		p := dialPeer(t, s.url)
		f := p.call("connect", mustJSON(t, protocol.ConnectParams{Role: protocol.RoleNode, Scopes: []string{protocol.ScopeAdmin},
			Auth: protocol.ConnectAuth{Token: nodeToken}, Node: &protocol.NodeAdvertise{Methods: map[string]int{}}}))
		wantError(t, f, protocol.CodeInvalidParams, "")
	})
	t.Run("huge client id", func(t *testing.T) {
		p := dialPeer(t, s.url)
		f := p.call("connect", mustJSON(t, protocol.ConnectParams{Role: protocol.RoleOperator,
			Auth: protocol.ConnectAuth{Token: adminToken}, Client: protocol.ConnectClient{ID: strings.Repeat("c", 129)}}))
		wantError(t, f, protocol.CodeInvalidParams, "")
	})
}

// logSink collects every slog record as text.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Tokens and params carrying a canary never appear in a response or a
// log line, whatever the failure.
func TestAdvCanaryNeverEchoedOrLogged(t *testing.T) {
	const canary = "CANARY-7f3a9e"
	sink := &logSink{}
	cfg := testConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(sink, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := startServer(t, cfg)
	var seen []string
	record := func(f frame) { seen = append(seen, string(f.raw)) }

	// Wrong tokens, both roles.
	for _, role := range []string{protocol.RoleOperator, protocol.RoleNode} {
		p := dialPeer(t, s.url)
		params := protocol.ConnectParams{Role: role, Auth: protocol.ConnectAuth{Token: "tok-" + canary},
			Client: protocol.ConnectClient{ID: "c-" + canary, Version: "v"}}
		if role == protocol.RoleNode {
			params.Node = &protocol.NodeAdvertise{Methods: map[string]int{}, Name: "n-" + canary}
		}
		record(p.call("connect", mustJSON(t, params)))
	}
	// Malformed connect params holding the canary in keys and values.
	for _, params := range []string{
		`{"role":"operator","auth":{"token":"` + canary + `","` + canary + `":1}}`,
		`{"role":"` + canary + `","auth":{"token":"x"}}`,
		`{"role":"operator","auth":{"token":["` + canary + `"]}}`,
		`{"role":"operator","auth":{"token":"` + adminToken + `"},"scopes":["` + canary + `"]}`,
		`{"role":"operator","auth":{"token":"x"},"` + canary + `":true}`,
		`{"role":"operator","auth":{"token":"` + canary + `"},"auth":{"token":"y"}}`,
	} {
		record(dialPeer(t, s.url).call("connect", params))
	}

	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, echoHandler)
	op := connectOperator(t, s.url, adminToken)
	id := nodeIDOf("worker-1")
	record(op.call(mEcho, map[string]any{"nodeId": id, canary: 1}))
	record(op.call(mEcho, `{"nodeId":"`+id+`","value":1,"value":"`+canary+`"}`))
	record(op.call(mEcho, map[string]any{"nodeId": canary}))
	record(op.call("node.invoke", map[string]any{"nodeId": id, "method": canary}))
	record(op.call("node.invoke", map[string]any{"nodeId": id, "method": mEcho, "args": map[string]any{"nodeId": canary}}))
	record(op.call(canary, nil))
	record(op.call("node.describe", map[string]any{"nodeId": canary}))
	record(n.call(protocol.MethodInvokeResult, map[string]any{"invokeId": canary, "result": canary}))
	record(n.call(canary, nil))
	// A malformed frame whose id is the canary.
	op.writeRaw(websocket.TextMessage, []byte(`{"type":"req","id":"`+canary+`","method":7}`))
	record(op.next())
	for _, s := range seen {
		if strings.Contains(s, canary) && !strings.Contains(s, `"id":"`+canary+`"`) {
			t.Errorf("response echoes the canary: %s", s)
		}
	}
	s.Close()
	if logs := sink.String(); strings.Contains(logs, canary) {
		t.Fatalf("log holds the canary:\n%s", logs)
	}
}

// A result that takes its call just as the caller's deadline fires is
// the outcome (the node was told it was accepted): the caller gets it,
// not TIMEOUT, and the node gets no cancel.
func TestAdvResultRacingTheDeadline(t *testing.T) {
	s := startServer(t, testConfig())
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, echoHandler)
	op := connectOperator(t, s.url, adminToken)
	// Hold the result between taking the call and delivering it until
	// past the 1.5 s deadline of mRace (long enough that the result
	// reaches the take before the deadline even on a loaded machine).
	hook := func() { time.Sleep(1800 * time.Millisecond) }
	s.hookAfterTake.Store(&hook)
	f := op.call(mRace, map[string]any{"nodeId": nodeIDOf("worker-1"), "value": "late"})
	if !f.OK || !bytes.Contains(f.Payload, []byte(`"value":"late"`)) {
		t.Fatalf("caller: %s", f.raw)
	}
	s.hookAfterTake.Store(nil)
	select {
	case id := <-n.cancels:
		t.Fatalf("cancel sent for an accepted result %q", id)
	default:
	}
}

// A node that never answers gets exactly one node.invoke.cancel, and the
// caller one TIMEOUT.
func TestAdvSilentNodeOneCancel(t *testing.T) {
	s := startServer(t, testConfig())
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, silentHandler)
	op := connectOperator(t, s.url, adminToken)
	ch := op.start(mSlow, map[string]any{"nodeId": nodeIDOf("worker-1")})
	req := <-n.requests
	wantError(t, op.await(ch), protocol.CodeTimeout, "")
	if got := <-n.cancels; got != req.InvokeID {
		t.Fatalf("cancel %q", got)
	}
	op.ws.Close() // a caller disconnect after the timeout cancels nothing more
	// A later call round-trips, so every event of the first was delivered before it.
	op2 := connectOperator(t, s.url, adminToken)
	ch = op2.start(mEcho, map[string]any{"nodeId": nodeIDOf("worker-1")})
	req = <-n.requests
	n.call(protocol.MethodInvokeResult, protocol.InvokeResult{InvokeID: req.InvokeID, Result: json.RawMessage(`{}`)})
	if f := op2.await(ch); !f.OK {
		t.Fatalf("%s", f.raw)
	}
	select {
	case id := <-n.cancels:
		t.Fatalf("second cancel %q", id)
	default:
	}
}

// gatedListener wraps accepted connections so a test can stall the
// controller's writes to one of them (a peer that stops reading).
type gatedListener struct {
	net.Listener
	mu    sync.Mutex
	conns []*gatedConn
}

type gatedConn struct {
	net.Conn
	mu   sync.Mutex
	gate chan struct{} // nil: open; else Write waits until it is closed
}

func (l *gatedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	g := &gatedConn{Conn: c}
	l.mu.Lock()
	l.conns = append(l.conns, g)
	l.mu.Unlock()
	return g, nil
}

func (l *gatedListener) conn(i int) *gatedConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conns[i]
}

func (g *gatedConn) block() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = make(chan struct{})
}

func (g *gatedConn) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
}

func (g *gatedConn) Write(p []byte) (int, error) {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return g.Conn.Write(p)
}

// A pairing requester that stops reading must not stall the controller:
// approving its pairing notifies it without holding the registry lock,
// so other requests (node.list, routing, connects) go on.
func TestAdvStalledPairingWaiterDoesNotStallRegistry(t *testing.T) {
	s, err := New(pairingConfig("", &testClock{t: time.Now()}))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &gatedListener{Listener: raw}
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.Serve(context.Background(), ln)
	}()
	t.Cleanup(func() {
		s.Close()
		<-served
	})
	url := "ws://" + raw.Addr().String() + "/ws"

	w := connectOperator(t, url, pairToken) // accepted connection 0
	t.Cleanup(ln.conn(0).open)              // runs before the server closes
	req := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest,
		protocol.PairRequestParams{Name: "stall-1", NodeType: "execution", Methods: defaultMethods()}))
	ln.conn(0).block()
	for i := 0; i < 400; i++ {
		w.start(protocol.MethodPairList, nil)
	}
	full := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for c := range s.conns {
			if len(c.out) == cap(c.out) {
				return true
			}
		}
		return false
	}
	for i := 0; !full(); i++ {
		if i > 1000 {
			t.Fatal("the stalled connection's queue never filled")
		}
		time.Sleep(5 * time.Millisecond)
	}
	approver := connectOperator(t, url, approverToken)
	approved := approver.start(protocol.MethodPairApprove, protocol.PairDecisionParams{Code: req.Code})
	time.Sleep(50 * time.Millisecond) // let the approval reach the notification
	reader := connectOperator(t, url, readToken)
	if f := reader.call("node.list", nil); !f.OK {
		t.Fatalf("node.list while a pairing requester stalls: %s", f.raw)
	}
	ln.conn(0).open()
	if f := approver.await(approved); !f.OK {
		t.Fatalf("approve: %s", f.raw)
	}
}

// A peer with a node token that lets the answers to its pre-connect
// frames pile up unread, then connects, must not stall the registry
// (its hello-ok is queued under the registry lock): it is closed first.
func TestAdvUnreadPreConnectAnswersDoNotStallRegistry(t *testing.T) {
	s, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &gatedListener{Listener: raw}
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.Serve(context.Background(), ln)
	}()
	t.Cleanup(func() {
		s.Close()
		<-served
	})
	url := "ws://" + raw.Addr().String() + "/ws"
	p := dialPeer(t, url)
	t.Cleanup(ln.conn(0).open)
	ln.conn(0).block()
	// One answer in the blocked writer plus a full queue (256), then connect.
	for i := 0; i < 257; i++ {
		p.writeRaw(websocket.TextMessage, []byte(`{"type":"req","id":"x","method":"node.list"}`))
	}
	p.writeJSON(protocol.Request{Type: "req", ID: "c1", Method: "connect",
		Params: mustJSON(t, protocol.ConnectParams{Role: protocol.RoleNode, Auth: protocol.ConnectAuth{Token: nodeToken},
			Node: &protocol.NodeAdvertise{Methods: map[string]int{}}})})
	time.Sleep(100 * time.Millisecond) // let the frames reach the controller
	if f := connectOperator(t, url, readToken).call("node.list", nil); !f.OK {
		t.Fatalf("node.list: %s", f.raw)
	}
}

// Scope is checked before params: a read-only operator gets FORBIDDEN
// for node.fs.read even with malformed params, directly and through
// node.invoke; node.process.* is never routed by node.invoke; and
// node.process.run reaches the node with timeoutMs + 5000 as its deadline.
func TestAdvOperatorScopeAndProcessDeadline(t *testing.T) {
	s := startServer(t, testConfig())
	id := nodeIDOf("worker-1")
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{Methods: map[string]int{
		"node.fs.read": 1, "node.process.run": 1, "node.process.get": 1}}, silentHandler)
	reader := connectOperator(t, s.url, readToken)
	wantError(t, reader.call("node.fs.read", map[string]any{"nodeId": id, "path": "a"}), protocol.CodeForbidden, "")
	wantError(t, reader.call("node.fs.read", `{"bogus":1}`), protocol.CodeForbidden, "")
	wantError(t, reader.call("node.invoke", map[string]any{"nodeId": id, "method": "node.fs.read", "args": map[string]any{"path": "a"}}),
		protocol.CodeForbidden, "")
	admin := connectOperator(t, s.url, adminToken)
	for _, m := range []string{"node.process.run", "node.process.get", "node.process.cancel"} {
		wantError(t, admin.call("node.invoke", map[string]any{"nodeId": id, "method": m}), protocol.CodeForbidden, protocol.DomainGenericInvokeRefused)
	}
	select {
	case req := <-n.requests:
		t.Fatalf("refused call reached the node: %s", req.Method)
	default:
	}
	admin.start("node.process.run", map[string]any{"nodeId": id, "processId": "p1", "cwd": ".", "argv": []string{"true"},
		"stdinBase64": "", "timeoutMs": 1000, "maxOutputBytes": 16})
	if req := <-n.requests; req.Method != "node.process.run" || req.TimeoutMs != 6000 {
		t.Fatalf("process.run reached the node with %s timeoutMs=%d", req.Method, req.TimeoutMs)
	}
	spec, _ := protocol.LookupMethod("node.process.run")
	if spec.CallerSlack != time.Second {
		t.Fatalf("caller slack %v", spec.CallerSlack)
	}
}

// Many results arriving at once from one node (every invocation finishing
// together) are all accepted: a result refused with RATE_LIMITED was lost
// and its caller got TIMEOUT for work the node had done.
func TestAdvResultBurstOverMaxInflight(t *testing.T) {
	cfg := testConfig()
	cfg.MaxInflight = 2
	s := startServer(t, cfg)
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, silentHandler)
	const calls = 6
	ops := make([]*peer, calls) // one call per operator socket: each has 2 slots too
	chans := make([]chan frame, calls)
	reqs := make([]protocol.InvokeRequest, calls)
	for i := range chans {
		ops[i] = connectOperator(t, s.url, adminToken)
		chans[i] = ops[i].start(mEcho, map[string]any{"nodeId": nodeIDOf("worker-1"), "value": i})
		reqs[i] = <-n.requests
	}
	// Results are held after taking their call, so the first ones occupy
	// every slot while the rest arrive.
	release := make(chan struct{})
	hook := func() { <-release }
	s.hookAfterTake.Store(&hook)
	acks := make([]chan frame, calls)
	for i, r := range reqs {
		acks[i] = n.start(protocol.MethodInvokeResult, protocol.InvokeResult{InvokeID: r.InvokeID, Result: json.RawMessage(`{"i":1}`)})
	}
	time.Sleep(50 * time.Millisecond) // let every result reach the controller
	close(release)
	for i := range acks {
		if f := n.await(acks[i]); !f.OK {
			t.Fatalf("result %d refused: %s", i, f.raw)
		}
		if f := ops[i].await(chans[i]); !f.OK {
			t.Fatalf("caller %d: %s", i, f.raw)
		}
	}
	s.hookAfterTake.Store(nil)
}

// mPanic is a test method whose validator panics, as a bug in any
// validator would.
const mPanic = "node.fs.zztest.panic"

func init() {
	protocol.RegisterMethod(protocol.MethodSpec{Name: mPanic, Version: 1,
		Validate: func(json.RawMessage) *protocol.Error { panic("validator bug CANARY-77aa") }})
}

// A panic while serving one request answers INTERNAL_ERROR and leaves
// the controller (and that connection) serving; nothing of it is logged
// but the method name.
func TestAdvHandlerPanicIsContained(t *testing.T) {
	sink := &logSink{}
	cfg := testConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(sink, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := startServer(t, cfg)
	op := connectOperator(t, s.url, adminToken)
	f := op.call(mPanic, map[string]any{"nodeId": nodeIDOf("worker-1")})
	wantError(t, f, protocol.CodeInternal, "")
	if f := op.call("node.list", nil); !f.OK {
		t.Fatalf("after the panic: %s", f.raw)
	}
	logs := sink.String()
	if strings.Contains(logs, "CANARY") || !strings.Contains(logs, mPanic) {
		t.Fatalf("log:\n%s", logs)
	}
}

// Request ids: 128 bytes are echoed, 129 are refused under id unknown;
// numbers, null and nested JSON are not objects; two operators using the
// same id at once each get their own answer.
func TestAdvRequestIDBoundsAndCollisions(t *testing.T) {
	s := startServer(t, testConfig())
	p := connectOperator(t, s.url, adminToken)
	id128 := strings.Repeat("é", 64) // 128 bytes of UTF-8
	p.writeRaw(websocket.TextMessage, []byte(`{"type":"req","id":"`+id128+`","method":"node.list"}`))
	if f := p.next(); !f.OK || f.ID != id128 {
		t.Fatalf("128-byte id: %s", f.raw)
	}
	p.writeRaw(websocket.TextMessage, []byte(`{"type":"req","id":"`+id128+`x","method":"node.list"}`))
	if f := p.next(); f.OK || f.ID != protocol.UnknownID {
		t.Fatalf("129-byte id: %s", f.raw)
	}
	for _, raw := range []string{`123`, `null`, `true`, ` {"type":"req","id":{"a":1},"method":"node.list"}`, `{"type":"req","id":null,"method":"node.list"}`} {
		p.writeRaw(websocket.TextMessage, []byte(raw))
		if f := p.next(); f.OK || f.ID != protocol.UnknownID || f.Error.Code != protocol.CodeInvalidRequest {
			t.Fatalf("%s: %s", raw, f.raw)
		}
	}

	connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, echoHandler)
	a := connectOperator(t, s.url, adminToken)
	b := connectOperator(t, s.url, adminToken)
	id := nodeIDOf("worker-1")
	for i := 0; i < 20; i++ {
		a.writeJSON(protocol.Request{Type: "req", ID: "same", Method: mEcho, Params: mustJSON(t, map[string]any{"nodeId": id, "value": "A"})})
		b.writeJSON(protocol.Request{Type: "req", ID: "same", Method: mEcho, Params: mustJSON(t, map[string]any{"nodeId": id, "value": "B"})})
		fa, fb := a.next(), b.next()
		if !bytes.Contains(fa.Payload, []byte(`"A"`)) || !bytes.Contains(fb.Payload, []byte(`"B"`)) {
			t.Fatalf("crossed answers: %s / %s", fa.raw, fb.raw)
		}
	}
}

// A node's error message and field reach the caller only when printable:
// a compromised node must not write escape sequences to an operator's
// terminal through `lemon call`.
func TestAdvNodeErrorControlCharacters(t *testing.T) {
	s := startServer(t, testConfig())
	connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, func(req protocol.InvokeRequest) (any, *protocol.Error, bool) {
		var p echoParams
		json.Unmarshal(req.Args, &p)
		var msg string
		json.Unmarshal(p.Value, &msg)
		return nil, &protocol.Error{Code: protocol.CodeNotFound, Message: msg,
			Details: &protocol.ErrorDetails{Code: "not_found", Field: msg}}, true
	})
	op := connectOperator(t, s.url, adminToken)
	for _, msg := range []string{"\x1b]52;c;ZXZpbA==\x07", "line\nbreak", "c1\u009bcontrol", "del\x7f"} {
		f := op.call(mEcho, map[string]any{"nodeId": nodeIDOf("worker-1"), "value": msg})
		wantError(t, f, protocol.CodeNotFound, "not_found")
		if f.Error.Message != "the node reported an error" || f.Error.Details.Field != "" {
			t.Fatalf("%q passed through: %s", msg, f.raw)
		}
	}
	f := op.call(mEcho, map[string]any{"nodeId": nodeIDOf("worker-1"), "value": "no such file — é"})
	if f.Error.Message != "no such file — é" {
		t.Fatalf("printable message altered: %s", f.raw)
	}
}

// A node result that fits the frames between node and controller but not
// the caller's response (a 128-byte request id makes the response the
// longer frame) is payload_too_large with the method's outcome flags:
// the node ran the method, so a pure read is retrySafe:true and a
// mutation mutationMayHaveApplied:true.
func TestAdvNodeResultOverCallerMaxPayloadKeepsOutcomeFlags(t *testing.T) {
	cfg := testConfig()
	cfg.MaxPayload = 64 << 10
	s := startServer(t, cfg)
	id128 := strings.Repeat("i", 128)
	fill := cfg.MaxPayload - len(`{"type":"res","id":"`+id128+`","ok":true,"payload":{"v":""}}`) + 1
	// The result is fill bytes of filler, one fewer when the echo value
	// is "at" (the response is then exactly cfg.MaxPayload).
	big := func(req protocol.InvokeRequest) (any, *protocol.Error, bool) {
		var p echoParams
		json.Unmarshal(req.Args, &p)
		if string(p.Value) == `"at"` {
			return map[string]string{"v": strings.Repeat("x", fill-1)}, nil, true
		}
		return map[string]string{"v": strings.Repeat("x", fill)}, nil, true
	}
	connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, big)
	op := connectOperator(t, s.url, adminToken)
	nodeID := nodeIDOf("worker-1")
	op.writeRaw(websocket.TextMessage, []byte(`{"type":"req","id":"`+id128+`","method":"`+mEcho+`","params":{"nodeId":"`+nodeID+`","value":"at"}}`))
	if f := op.next(); !f.OK || len(f.raw) != cfg.MaxPayload {
		t.Fatalf("a response of exactly maxPayload: ok %v, %d bytes", f.OK, len(f.raw))
	}
	for _, c := range []struct {
		method, params string
		retry, applied bool
	}{
		{"node.host.info", `{"nodeId":"` + nodeID + `"}`, true, false},
		{mEcho, `{"nodeId":"` + nodeID + `","value":"v"}`, false, true},
	} {
		op.writeRaw(websocket.TextMessage, []byte(`{"type":"req","id":"`+id128+`","method":"`+c.method+`","params":`+c.params+`}`))
		f := op.next()
		if f.ID != id128 {
			t.Fatalf("%s: answered %s", c.method, f.raw)
		}
		wantError(t, f, protocol.CodeInternal, protocol.DomainPayloadTooLarge)
		wantRetry(t, f, c.retry, c.applied)
	}
}
