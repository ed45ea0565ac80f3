package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"lemon/protocol"
)

// Test methods registered only in this package's tests. Their names fall
// under the spec's scope prefixes so RequiredScope covers them.
const (
	mEcho    = "node.fs.zztest.echo"       // admin, default deadline
	mSlow    = "node.fs.zztest.slow"       // admin, 200 ms broker deadline
	mRace    = "node.fs.zztest.race"       // admin, 1.5 s broker deadline
	mNoGen   = "node.process.zztest.nogen" // admin, NoGenericInvoke
	mProof   = "node.secrets.zztest.proof" // admin, RecheckSession when params.proof
	mNoScope = "node.zztest.noscope"       // registered but without a scope rule
)

const testWait = 10 * time.Second // hang guard only; no test asserts a duration

type echoParams struct {
	NodeID string          `json:"nodeId"`
	Value  json.RawMessage `json:"value,omitempty"`
	Proof  bool            `json:"proof,omitempty"`
}

func validateEcho(params json.RawMessage) *protocol.Error {
	var p echoParams
	if e := protocol.DecodeParams(params, &p); e != nil {
		return e
	}
	return protocol.RequireNodeID(p.NodeID)
}

func init() {
	protocol.RegisterMethod(protocol.MethodSpec{Name: mEcho, Version: 1, Validate: validateEcho})
	protocol.RegisterMethod(protocol.MethodSpec{Name: mSlow, Version: 1, Validate: validateEcho,
		Deadline: func(json.RawMessage) time.Duration { return 200 * time.Millisecond }})
	protocol.RegisterMethod(protocol.MethodSpec{Name: mRace, Version: 1, Validate: validateEcho,
		Deadline: func(json.RawMessage) time.Duration { return 1500 * time.Millisecond }})
	protocol.RegisterMethod(protocol.MethodSpec{Name: mNoGen, Version: 1, Validate: validateEcho, NoGenericInvoke: true})
	protocol.RegisterMethod(protocol.MethodSpec{Name: mProof, Version: 1, Validate: validateEcho,
		RecheckSession: func(p json.RawMessage) bool {
			var e echoParams
			json.Unmarshal(p, &e)
			return e.Proof
		}})
	protocol.RegisterMethod(protocol.MethodSpec{Name: mNoScope, Version: 1})
}

const (
	adminToken = "admin-token-0123456789abcdef"
	readToken  = "read-token-0123456789abcdef"
	nodeToken  = "node-token-worker-1-abcdef"
	node2Token = "node-token-worker-2-abcdef"
)

func testConfig() Config {
	return Config{
		Operators: []OperatorCredential{
			{Name: "admin", TokenHash: HashToken(adminToken), Scopes: []string{protocol.ScopeAdmin}},
			{Name: "reader", TokenHash: HashToken(readToken), Scopes: []string{protocol.ScopeRead}},
		},
		NodeTokens: []NodeCredential{
			{Name: "worker-1", TokenHash: HashToken(nodeToken)},
			{Name: "worker-2", TokenHash: HashToken(node2Token)},
		},
	}
}

type testServer struct {
	*Server
	url string
}

func startServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.Serve(context.Background(), ln)
	}()
	t.Cleanup(func() {
		s.Close()
		<-served
	})
	return &testServer{Server: s, url: "ws://" + ln.Addr().String() + "/ws"}
}

// frame is any frame the controller sends.
type frame struct {
	Type     string                 `json:"type"`
	ID       string                 `json:"id"`
	OK       bool                   `json:"ok"`
	Payload  json.RawMessage        `json:"payload"`
	Error    *protocol.Error        `json:"error"`
	Event    string                 `json:"event"`
	Seq      uint64                 `json:"seq"`
	Protocol int                    `json:"protocol"`
	Policy   protocol.HelloPolicy   `json:"policy"`
	Auth     protocol.HelloAuth     `json:"auth"`
	Features protocol.HelloFeatures `json:"features"`
	Server   protocol.HelloServer   `json:"server"`
	Module   *protocol.ModuleSetRef `json:"moduleSet"`
	raw      []byte
}

// peer is a raw gorilla WebSocket with a reader goroutine that sorts
// responses by id and queues events and hello-ok.
type peer struct {
	t      testing.TB
	ws     *websocket.Conn
	wmu    sync.Mutex
	nextID atomic.Uint64

	mu        sync.Mutex
	waiters   map[string]chan frame
	frames    chan frame // every frame not claimed by a waiter
	closed    chan struct{}
	closeCode int
}

func dialPeer(t testing.TB, url string) *peer {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &peer{t: t, ws: ws, waiters: map[string]chan frame{}, frames: make(chan frame, 1024), closed: make(chan struct{})}
	ws.SetReadLimit(64 << 20)
	go p.readLoop()
	t.Cleanup(func() { ws.Close() })
	return p
}

func (p *peer) readLoop() {
	defer close(p.closed)
	for {
		_, data, err := p.ws.ReadMessage()
		if err != nil {
			if ce, ok := err.(*websocket.CloseError); ok {
				p.mu.Lock()
				p.closeCode = ce.Code
				p.mu.Unlock()
			}
			return
		}
		var f frame
		if err := json.Unmarshal(data, &f); err != nil {
			panic(fmt.Sprintf("controller sent invalid JSON: %q", data))
		}
		f.raw = data
		p.mu.Lock()
		w, ok := p.waiters[f.ID]
		if ok && f.Type == protocol.FrameRes {
			delete(p.waiters, f.ID)
		}
		p.mu.Unlock()
		if ok && f.Type == protocol.FrameRes {
			w <- f
			continue
		}
		p.frames <- f
	}
}

func (p *peer) writeRaw(mt int, data []byte) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if err := p.ws.WriteMessage(mt, data); err != nil {
		p.t.Logf("write: %v", err)
	}
}

func (p *peer) writeJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		p.t.Fatal(err)
	}
	p.writeRaw(websocket.TextMessage, b)
}

// start sends a request and returns the channel its response arrives on.
func (p *peer) start(method string, params any) chan frame {
	id := fmt.Sprintf("r%d", p.nextID.Add(1))
	ch := make(chan frame, 1)
	p.mu.Lock()
	p.waiters[id] = ch
	p.mu.Unlock()
	var raw json.RawMessage
	switch v := params.(type) {
	case nil:
	case json.RawMessage:
		raw = v
	case string:
		raw = json.RawMessage(v)
	default:
		raw, _ = json.Marshal(v)
	}
	p.writeJSON(protocol.Request{Type: protocol.FrameReq, ID: id, Method: method, Params: raw})
	return ch
}

func (p *peer) await(ch chan frame) frame {
	p.t.Helper()
	select {
	case f := <-ch:
		return f
	case <-time.After(testWait):
		p.t.Fatal("no response")
	}
	return frame{}
}

func (p *peer) call(method string, params any) frame {
	p.t.Helper()
	return p.await(p.start(method, params))
}

// next returns the next unclaimed frame.
func (p *peer) next() frame {
	p.t.Helper()
	select {
	case f := <-p.frames:
		return f
	case <-time.After(testWait):
		p.t.Fatal("no frame")
	}
	return frame{}
}

func (p *peer) waitClosed() int {
	p.t.Helper()
	return p.waitClosedWithin(testWait)
}

// waitClosedWithin is waitClosed with a longer hang guard, for a close
// that travels through the cluster's KV watch (cluster tests).
func (p *peer) waitClosedWithin(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.closed:
	case <-time.After(d):
		p.t.Fatal("connection not closed")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closeCode
}

// connectOperator dials and connects with token; it fails the test unless hello-ok arrives.
func connectOperator(t testing.TB, url, token string, scopes ...string) *peer {
	t.Helper()
	p := dialPeer(t, url)
	p.writeJSON(protocol.Request{Type: protocol.FrameReq, ID: "c1", Method: "connect",
		Params: mustJSON(t, protocol.ConnectParams{Role: protocol.RoleOperator, Auth: protocol.ConnectAuth{Token: token},
			Scopes: scopes, Client: protocol.ConnectClient{ID: "test", Version: "1"}})})
	f := p.next()
	if f.Type != protocol.FrameHelloOK {
		t.Fatalf("connect: got %s", f.raw)
	}
	return p
}

func mustJSON(t testing.TB, v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeNode is a node written with gorilla: it connects with a token and
// answers node.invoke.request events through handle.
type fakeNode struct {
	*peer
	hello    frame
	requests chan protocol.InvokeRequest
	cancels  chan string
	// other receives every other event (e.g. node.modules.changed).
	other  chan frame
	handle func(req protocol.InvokeRequest) (result any, err *protocol.Error, reply bool)
}

func defaultMethods() map[string]int {
	return map[string]int{mEcho: 1, mSlow: 1, mRace: 1, mNoGen: 1, mProof: 1, "node.host.info": 1}
}

func connectNode(t testing.TB, url, token string, adv protocol.NodeAdvertise, handle func(protocol.InvokeRequest) (any, *protocol.Error, bool)) *fakeNode {
	t.Helper()
	return connectNodeRetry(t, url, token, adv, handle, 0)
}

// connectNodeRetry is connectNode that, like a real node's reconnect loop,
// dials again while the controller refuses with a retry-safe UNAVAILABLE
// (a clustered controller whose JetStream state is electing a leader after
// a peer died), for at most within.
func connectNodeRetry(t testing.TB, url, token string, adv protocol.NodeAdvertise, handle func(protocol.InvokeRequest) (any, *protocol.Error, bool), within time.Duration) *fakeNode {
	t.Helper()
	if adv.Methods == nil {
		adv.Methods = defaultMethods()
	}
	deadline := time.Now().Add(within)
	var p *peer
	var hello frame
	for {
		p = dialPeer(t, url)
		p.writeJSON(protocol.Request{Type: protocol.FrameReq, ID: "c1", Method: "connect",
			Params: mustJSON(t, protocol.ConnectParams{Role: protocol.RoleNode, Auth: protocol.ConnectAuth{Token: token},
				Client: protocol.ConnectClient{ID: "fake-node", Version: "1"}, Node: &adv})})
		hello = p.next()
		e := hello.Error
		if hello.Type == protocol.FrameHelloOK || e == nil || e.Code != protocol.CodeUnavailable ||
			e.Details.RetrySafe == nil || !*e.Details.RetrySafe || time.Now().After(deadline) {
			break
		}
		p.ws.Close()
		time.Sleep(200 * time.Millisecond)
	}
	if hello.Type != protocol.FrameHelloOK {
		t.Fatalf("node connect: got %s", hello.raw)
	}
	n := &fakeNode{peer: p, hello: hello, requests: make(chan protocol.InvokeRequest, 1024), cancels: make(chan string, 64), other: make(chan frame, 64), handle: handle}
	go n.loop()
	return n
}

func (n *fakeNode) loop() {
	for {
		var f frame
		select {
		case f = <-n.frames:
		case <-n.closed:
			return
		}
		if f.Type != protocol.FrameEvent {
			continue
		}
		switch f.Event {
		case protocol.EventInvokeRequest:
			var req protocol.InvokeRequest
			json.Unmarshal(f.Payload, &req)
			select {
			case n.requests <- req:
			default: // benchmarks do not drain requests
			}
			if n.handle == nil {
				continue
			}
			go func() {
				res, perr, reply := n.handle(req)
				if !reply {
					return
				}
				ir := protocol.InvokeResult{InvokeID: req.InvokeID, Error: perr}
				if perr == nil {
					ir.Result, _ = json.Marshal(res)
				}
				n.start(protocol.MethodInvokeResult, ir)
			}()
		case protocol.EventInvokeCancel:
			var c protocol.InvokeCancel
			json.Unmarshal(f.Payload, &c)
			n.cancels <- c.InvokeID
		default:
			select {
			case n.other <- f:
			default:
			}
		}
	}
}

func echoHandler(req protocol.InvokeRequest) (any, *protocol.Error, bool) {
	var p echoParams
	json.Unmarshal(req.Args, &p)
	return map[string]any{"method": req.Method, "value": p.Value}, nil, true
}

func silentHandler(protocol.InvokeRequest) (any, *protocol.Error, bool) { return nil, nil, false }

func wantError(t testing.TB, f frame, code, domain string) {
	t.Helper()
	if f.Type != protocol.FrameRes || f.OK || f.Error == nil {
		t.Fatalf("want error %s, got %s", code, f.raw)
	}
	if f.Error.Code != code || f.Error.DomainCode() != domain {
		t.Fatalf("want %s/%q, got %s/%q (%s)", code, domain, f.Error.Code, f.Error.DomainCode(), f.raw)
	}
}

func wantRetry(t testing.TB, f frame, retrySafe, mayHaveApplied bool) {
	t.Helper()
	d := f.Error.Details
	if d == nil || d.RetrySafe == nil || d.MutationMayHaveApplied == nil ||
		*d.RetrySafe != retrySafe || *d.MutationMayHaveApplied != mayHaveApplied {
		t.Fatalf("want retrySafe=%v mutationMayHaveApplied=%v, got %s", retrySafe, mayHaveApplied, f.raw)
	}
}

func nodeIDOf(name string) string { return tokenNodeID(name) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func timeAfter() <-chan time.Time { return time.After(testWait) }

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
