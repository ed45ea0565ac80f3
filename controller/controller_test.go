package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"lemon/protocol"
)

func TestHelloOK(t *testing.T) {
	s := startServer(t, testConfig())
	p := dialPeer(t, s.url)
	p.writeJSON(protocol.Request{Type: "req", ID: "c1", Method: "connect",
		Params: mustJSON(t, protocol.ConnectParams{Role: "operator", Auth: protocol.ConnectAuth{Token: readToken},
			Client: protocol.ConnectClient{ID: "cli", Version: "1"}})})
	h := p.next()
	if h.Type != protocol.FrameHelloOK || h.Protocol != 1 || h.Policy.MaxPayload != 1<<20 ||
		h.Auth.Role != "operator" || h.Auth.ClientID != "cli" || h.Server.ConnID == "" ||
		len(h.Auth.Scopes) != 1 || h.Auth.Scopes[0] != protocol.ScopeRead || h.Policy.TickIntervalMs != 25000 {
		t.Fatalf("hello-ok: %s", h.raw)
	}
	found := false
	for _, m := range h.Features.Methods {
		found = found || m == "node.list"
	}
	if !found {
		t.Fatalf("features.methods lacks node.list: %s", h.raw)
	}
}

func TestConnectRefusals(t *testing.T) {
	s := startServer(t, testConfig())
	cases := []struct {
		name, token, domain string
	}{
		{"no token", "", protocol.DomainOperatorAuthMissing},
		{"wrong token", "wrong-secret-value-XYZZY", protocol.DomainOperatorAuthInvalid},
		{"token too long", strings.Repeat("Q", MaxTokenBytes+1), protocol.DomainOperatorAuthInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := dialPeer(t, s.url)
			p.writeJSON(protocol.Request{Type: "req", ID: "c1", Method: "connect",
				Params: mustJSON(t, protocol.ConnectParams{Role: "operator", Auth: protocol.ConnectAuth{Token: tc.token}})})
			f := p.next()
			wantError(t, f, protocol.CodeUnauthorized, tc.domain)
			if f.ID != "c1" {
				t.Fatalf("id %q", f.ID)
			}
			if tc.token != "" && bytes.Contains(f.raw, []byte(tc.token[:10])) {
				t.Fatalf("response echoes the token: %s", f.raw)
			}
			if code := p.waitClosed(); code != websocket.ClosePolicyViolation {
				t.Fatalf("close code %d", code)
			}
		})
	}
	t.Run("node wrong token", func(t *testing.T) {
		p := dialPeer(t, s.url)
		p.writeJSON(protocol.Request{Type: "req", ID: "c1", Method: "connect",
			Params: mustJSON(t, protocol.ConnectParams{Role: "node", Auth: protocol.ConnectAuth{Token: "nope-secret-ABCDEF"},
				Node: &protocol.NodeAdvertise{Methods: map[string]int{}}})})
		f := p.next()
		wantError(t, f, protocol.CodeUnauthorized, protocol.DomainOperatorAuthInvalid)
		if bytes.Contains(f.raw, []byte("nope-secret")) {
			t.Fatalf("echo: %s", f.raw)
		}
	})
	t.Run("operator token cannot connect as node", func(t *testing.T) {
		p := dialPeer(t, s.url)
		p.writeJSON(protocol.Request{Type: "req", ID: "c1", Method: "connect",
			Params: mustJSON(t, protocol.ConnectParams{Role: "node", Auth: protocol.ConnectAuth{Token: adminToken},
				Node: &protocol.NodeAdvertise{Methods: map[string]int{}}})})
		wantError(t, p.next(), protocol.CodeUnauthorized, protocol.DomainOperatorAuthInvalid)
	})
	t.Run("node token bound to another name", func(t *testing.T) {
		p := dialPeer(t, s.url)
		p.writeJSON(protocol.Request{Type: "req", ID: "c1", Method: "connect",
			Params: mustJSON(t, protocol.ConnectParams{Role: "node", Auth: protocol.ConnectAuth{Token: nodeToken},
				Node: &protocol.NodeAdvertise{Name: "worker-2", Methods: map[string]int{}}})})
		wantError(t, p.next(), protocol.CodeUnauthorized, protocol.DomainNodeIdentityMismatch)
	})
	t.Run("bad role", func(t *testing.T) {
		p := dialPeer(t, s.url)
		f := p.call("connect", `{"role":"root","auth":{"token":"x"}}`)
		wantError(t, f, protocol.CodeInvalidParams, "")
		if f.Error.Details.Field != "role" {
			t.Fatalf("field: %s", f.raw)
		}
	})
	t.Run("unknown connect field", func(t *testing.T) {
		p := dialPeer(t, s.url)
		f := p.call("connect", `{"role":"operator","auth":{"token":"x"},"bogus":1}`)
		wantError(t, f, protocol.CodeInvalidParams, "")
	})
}

func TestNoOperatorAuthConfigured(t *testing.T) {
	cfg := testConfig()
	cfg.Operators = nil
	s := startServer(t, cfg)
	p := dialPeer(t, s.url)
	f := p.call("connect", mustJSON(t, protocol.ConnectParams{Role: "operator", Auth: protocol.ConnectAuth{Token: adminToken}}))
	wantError(t, f, protocol.CodeUnauthorized, protocol.DomainAuthNotConfigured)
}

// fakeListener reports a non-loopback address.
type fakeListener struct{ net.Listener }

func (fakeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 7777} }

func TestRefuseNonLoopbackWithoutOperatorAuth(t *testing.T) {
	cfg := testConfig()
	cfg.Operators = nil
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := s.Serve(context.Background(), fakeListener{ln}); !errors.Is(err, ErrInsecureListen) {
		t.Fatalf("Serve: %v", err)
	}
	// With operator auth the same listener is accepted (Serve runs until ctx ends).
	s2, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s2.Serve(ctx, fakeListener{ln}); err != nil {
		t.Fatalf("Serve with auth: %v", err)
	}
}

func TestHandshakeRules(t *testing.T) {
	s := startServer(t, testConfig())
	p := dialPeer(t, s.url)
	wantError(t, p.call("node.list", nil), protocol.CodeHandshakeRequired, "")
	// Still open: connect works afterwards.
	p.start("connect", mustJSON(t, protocol.ConnectParams{Role: "operator", Auth: protocol.ConnectAuth{Token: adminToken}}))
	if h := p.next(); h.Type != protocol.FrameHelloOK {
		t.Fatalf("want hello-ok, got %s", h.raw)
	}
	wantError(t, p.call("connect", mustJSON(t, protocol.ConnectParams{Role: "operator", Auth: protocol.ConnectAuth{Token: adminToken}})),
		protocol.CodeAlreadyConnected, "")
	wantError(t, p.call("no.such.method", nil), protocol.CodeMethodNotFound, "")
}

func TestMalformedFrames(t *testing.T) {
	s := startServer(t, testConfig())
	p := connectOperator(t, s.url, adminToken)
	for _, raw := range []string{`{not json`, `[1,2]`, `"str"`, `{"type":"req","id":7,"method":"node.list"}`} {
		p.writeRaw(websocket.TextMessage, []byte(raw))
		f := p.next()
		wantError(t, f, protocol.CodeInvalidRequest, "")
		if f.ID != protocol.UnknownID {
			t.Fatalf("%s: id %q", raw, f.ID)
		}
	}
	// A readable id is echoed with INVALID_REQUEST for a non-req frame.
	p.writeRaw(websocket.TextMessage, []byte(`{"type":"res","id":"x9"}`))
	f := p.next()
	wantError(t, f, protocol.CodeInvalidRequest, "")
	if f.ID != "x9" {
		t.Fatalf("id %q", f.ID)
	}
	// Connection still serves.
	if f := p.call("node.list", nil); !f.OK {
		t.Fatalf("node.list after bad frames: %s", f.raw)
	}
}

func TestBinaryFrameRefused(t *testing.T) {
	s := startServer(t, testConfig())
	p := connectOperator(t, s.url, adminToken)
	p.writeRaw(websocket.BinaryMessage, []byte(`{"type":"req","id":"b","method":"node.list"}`))
	f := p.next()
	wantError(t, f, protocol.CodeInvalidRequest, protocol.DomainBinaryFrame)
	if code := p.waitClosed(); code != websocket.CloseUnsupportedData {
		t.Fatalf("close code %d", code)
	}
}

// padRequest builds a node.list request frame of exactly size bytes.
func padRequest(t *testing.T, size int) []byte {
	base := `{"type":"req","id":"big","method":"node.list","pad":""}`
	n := size - len(base)
	if n < 0 {
		t.Fatal("size too small")
	}
	return []byte(`{"type":"req","id":"big","method":"node.list","pad":"` + strings.Repeat("a", n) + `"}`)
}

func TestOversizedFrame(t *testing.T) {
	cfg := testConfig()
	cfg.MaxPayload = 64 << 10
	s := startServer(t, cfg)
	other := connectOperator(t, s.url, adminToken)
	p := connectOperator(t, s.url, adminToken)

	// Exactly maxPayload: served.
	p.writeRaw(websocket.TextMessage, padRequest(t, cfg.MaxPayload))
	if f := p.next(); !f.OK || f.ID != "big" {
		t.Fatalf("frame at the limit: %s", f.raw)
	}
	// One byte more: refused and the connection closed.
	p.writeRaw(websocket.TextMessage, padRequest(t, cfg.MaxPayload+1))
	f := p.next()
	wantError(t, f, protocol.CodeInvalidRequest, protocol.DomainPayloadTooLarge)
	if code := p.waitClosed(); code != websocket.CloseMessageTooBig {
		t.Fatalf("close code %d", code)
	}
	// Other connections keep working, and new ones are accepted.
	if f := other.call("node.list", nil); !f.OK {
		t.Fatalf("other connection: %s", f.raw)
	}
	if f := connectOperator(t, s.url, adminToken).call("node.list", nil); !f.OK {
		t.Fatalf("new connection: %s", f.raw)
	}
}

func TestOversizedFrameDefaultLimit(t *testing.T) {
	s := startServer(t, testConfig())
	p := connectOperator(t, s.url, adminToken)
	p.writeRaw(websocket.TextMessage, padRequest(t, protocol.DefaultMaxPayload))
	if f := p.next(); !f.OK {
		t.Fatalf("1 MiB frame: %s", f.raw)
	}
	p.writeRaw(websocket.TextMessage, padRequest(t, protocol.DefaultMaxPayload+1))
	wantError(t, p.next(), protocol.CodeInvalidRequest, protocol.DomainPayloadTooLarge)
}

func TestJSONLimits(t *testing.T) {
	s := startServer(t, testConfig())
	p := connectOperator(t, s.url, adminToken)
	// The envelope object is depth 1; "pad" adds depth-1 nested arrays.
	depthFrame := func(depth int) []byte {
		return []byte(`{"type":"req","id":"d","method":"node.list","pad":` +
			strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`)
	}
	p.writeRaw(websocket.TextMessage, depthFrame(protocol.MaxJSONDepth))
	if f := p.next(); !f.OK {
		t.Fatalf("depth %d: %s", protocol.MaxJSONDepth, f.raw)
	}
	p.writeRaw(websocket.TextMessage, depthFrame(protocol.MaxJSONDepth+1))
	f := p.next()
	wantError(t, f, protocol.CodeInvalidRequest, protocol.DomainJSONLimits)
	if f.ID != protocol.UnknownID {
		t.Fatalf("id %q", f.ID)
	}
	// Items: the 7 keys and strings of the envelope, plus n array elements.
	itemsFrame := func(total int) []byte {
		n := total - 7
		return []byte(`{"type":"req","id":"i","method":"node.list","pad":[` +
			strings.TrimSuffix(strings.Repeat("0,", n), ",") + `]}`)
	}
	p.writeRaw(websocket.TextMessage, itemsFrame(protocol.MaxJSONItems))
	if f := p.next(); !f.OK {
		t.Fatalf("%d items: %s", protocol.MaxJSONItems, f.raw)
	}
	p.writeRaw(websocket.TextMessage, itemsFrame(protocol.MaxJSONItems+1))
	wantError(t, p.next(), protocol.CodeInvalidRequest, protocol.DomainJSONLimits)
	// The connection survives.
	if f := p.call("node.list", nil); !f.OK {
		t.Fatalf("after limits: %s", f.raw)
	}
}

func TestNodeListDescribe(t *testing.T) {
	s := startServer(t, testConfig())
	op := connectOperator(t, s.url, readToken)
	var list protocol.NodeListResult
	f := op.call("node.list", nil)
	json.Unmarshal(f.Payload, &list)
	if len(list.Nodes) != 2 || list.Nodes[0].Name != "worker-1" || list.Nodes[0].Online ||
		list.Nodes[0].NodeID != nodeIDOf("worker-1") || list.Nodes[0].Identity != protocol.NodeIdentityToken {
		t.Fatalf("list: %s", f.raw)
	}
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{Name: "  worker-1 ", ModuleSetDigest: "abc", MaxPayload: 4096,
		Capabilities: []string{"read"}}, echoHandler)
	if n.hello.Auth.NodeID != nodeIDOf("worker-1") || n.hello.Auth.Role != "node" {
		t.Fatalf("node hello: %s", n.hello.raw)
	}
	f = op.call("node.list", nil)
	json.Unmarshal(f.Payload, &list)
	if !list.Nodes[0].Online || list.Nodes[1].Online || list.Nodes[0].ConnectedAtMs == 0 {
		t.Fatalf("list after connect: %s", f.raw)
	}
	f = op.call("node.describe", map[string]string{"nodeId": nodeIDOf("worker-1")})
	var d protocol.NodeDescription
	json.Unmarshal(f.Payload, &d)
	if !d.Online || d.Methods[mEcho] != 1 || d.ModuleSetDigest != "abc" || d.MaxPayload != 4096 ||
		len(d.Capabilities) != 1 || d.Client == nil || d.Client.ID != "fake-node" {
		t.Fatalf("describe: %s", f.raw)
	}
	f = op.call("node.describe", map[string]string{"nodeId": "node-nope"})
	wantError(t, f, protocol.CodeNotFound, "")
	if f.Error.Message != "no node has this name or nodeId ('lemon nodes' lists them)" {
		t.Fatalf("unknown node: %s", f.raw)
	}
	wantError(t, op.call("node.describe", map[string]string{}), protocol.CodeInvalidParams, "")
	wantError(t, op.call("node.list", `{"x":1}`), protocol.CodeInvalidParams, "")

	n.ws.Close()
	n.waitClosed()
	// The registry notices the disconnect.
	for i := 0; ; i++ {
		f = op.call("node.list", nil)
		json.Unmarshal(f.Payload, &list)
		if !list.Nodes[0].Online {
			break
		}
		if i > 1000 {
			t.Fatal("node still online")
		}
	}
	if list.Nodes[0].LastSeenAtMs == 0 {
		t.Fatalf("lastSeenAtMs: %s", f.raw)
	}
}

func TestRoutingErrors(t *testing.T) {
	s := startServer(t, testConfig())
	op := connectOperator(t, s.url, adminToken)
	connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{Methods: map[string]int{mEcho: 2}}, echoHandler)

	wantError(t, op.call(mEcho, map[string]any{}), protocol.CodeInvalidParams, "")
	f := op.call(mEcho, map[string]any{"nodeId": ""})
	wantError(t, f, protocol.CodeInvalidParams, "")
	if f.Error.Details.Field != "nodeId" {
		t.Fatalf("field: %s", f.raw)
	}
	wantError(t, op.call(mEcho, map[string]any{"nodeId": nodeIDOf("worker-1"), "bogus": 1}), protocol.CodeInvalidParams, "")
	wantError(t, op.call(mEcho, `[1]`), protocol.CodeInvalidParams, "")
	wantError(t, op.call(mEcho, map[string]any{"nodeId": "node-unknown"}), protocol.CodeNotFound, "")
	f = op.call(mEcho, map[string]any{"nodeId": nodeIDOf("worker-2")})
	wantError(t, f, protocol.CodeUnavailable, protocol.DomainNodeOffline)
	wantRetry(t, f, true, false)
	// worker-1 advertised version 2; the controller requires version 1.
	f = op.call(mEcho, map[string]any{"nodeId": nodeIDOf("worker-1")})
	wantError(t, f, protocol.CodeUnavailable, protocol.DomainNodeMethodUnavailable)
	// A registered method without a scope rule is refused.
	wantError(t, op.call(mNoScope, map[string]any{"nodeId": nodeIDOf("worker-1")}), protocol.CodeForbidden, "")
	// Node-only methods are refused to operators.
	wantError(t, op.call(protocol.MethodInvokeResult, map[string]any{}), protocol.CodeForbidden, "")
}

func TestScopes(t *testing.T) {
	s := startServer(t, testConfig())
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, echoHandler)
	id := nodeIDOf("worker-1")
	reader := connectOperator(t, s.url, readToken)
	f := reader.call(mEcho, map[string]any{"nodeId": id})
	wantError(t, f, protocol.CodeForbidden, "")
	if !contains(f.Error.Message, protocol.ScopeAdmin) {
		t.Fatalf("message: %s", f.raw)
	}
	wantError(t, reader.call("node.invoke", map[string]any{"nodeId": id, "method": "node.host.info"}), protocol.CodeForbidden, "")
	if f := reader.call("node.host.info", map[string]any{"nodeId": id}); !f.OK {
		t.Fatalf("host.info with read: %s", f.raw)
	}
	// An admin connection that asked only for operator.read holds only that.
	narrowed := connectOperator(t, s.url, adminToken, protocol.ScopeRead)
	wantError(t, narrowed.call(mEcho, map[string]any{"nodeId": id}), protocol.CodeForbidden, "")
	// A reader cannot ask for admin.
	p := dialPeer(t, s.url)
	wantError(t, p.call("connect", mustJSON(t, protocol.ConnectParams{Role: "operator",
		Auth: protocol.ConnectAuth{Token: readToken}, Scopes: []string{protocol.ScopeAdmin}})), protocol.CodeForbidden, "")
	wantError(t, p.call("connect", mustJSON(t, protocol.ConnectParams{Role: "operator",
		Auth: protocol.ConnectAuth{Token: readToken}, Scopes: []string{"operator.root"}})), protocol.CodeInvalidParams, "")
	// Node sessions cannot call operator methods.
	wantError(t, n.call("node.list", nil), protocol.CodeForbidden, "")
	wantError(t, n.call(mEcho, map[string]any{"nodeId": id}), protocol.CodeForbidden, "")
}

func TestRouteRoundTrip(t *testing.T) {
	s := startServer(t, testConfig())
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, echoHandler)
	op := connectOperator(t, s.url, adminToken)
	id := nodeIDOf("worker-1")
	f := op.call(mEcho, map[string]any{"nodeId": id, "value": map[string]int{"x": 42}})
	if !f.OK || string(f.Payload) != `{"method":"node.fs.zztest.echo","value":{"x":42}}` {
		t.Fatalf("round trip: %s", f.raw)
	}
	req := <-n.requests
	if req.NodeID != id || req.Method != mEcho || req.TimeoutMs != protocol.DefaultTimeoutMs ||
		req.SessionGeneration != 1 || req.InvokeID == "" || !bytes.Contains(req.Args, []byte(`"x":42`)) {
		t.Fatalf("invoke request: %+v", req)
	}
	// Node errors pass through, bounded.
	n.handle = func(protocol.InvokeRequest) (any, *protocol.Error, bool) {
		return nil, protocol.DomainError(protocol.CodeConflict, protocol.DomainRevisionConflict, "revision changed").WithRetry(false, false), true
	}
	f = op.call(mEcho, map[string]any{"nodeId": id})
	wantError(t, f, protocol.CodeConflict, protocol.DomainRevisionConflict)
	wantRetry(t, f, false, false)
	n.handle = func(protocol.InvokeRequest) (any, *protocol.Error, bool) {
		return nil, &protocol.Error{Code: "WEIRD", Message: strings.Repeat("x", 2000), Details: &protocol.ErrorDetails{Code: "Bad Code!"}}, true
	}
	f = op.call(mEcho, map[string]any{"nodeId": id})
	wantError(t, f, protocol.CodeInternal, "")
	if len(f.Error.Message) > 100 {
		t.Fatalf("unbounded message: %s", f.raw)
	}
	// Concurrent calls on one socket are all answered.
	n.handle = echoHandler
	chans := make([]chan frame, 50)
	for i := range chans {
		chans[i] = op.start(mEcho, map[string]any{"nodeId": id, "value": i})
	}
	for i, ch := range chans {
		f := op.await(ch)
		if !f.OK || !bytes.Contains(f.Payload, []byte(fmt.Sprintf(`"value":%d}`, i))) {
			t.Fatalf("call %d: %s", i, f.raw)
		}
	}
}

func TestInvokeResultFromNode(t *testing.T) {
	s := startServer(t, testConfig())
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, silentHandler)
	op := connectOperator(t, s.url, adminToken)
	id := nodeIDOf("worker-1")
	// Unknown invokeId: NOT_FOUND to the node.
	wantError(t, n.call(protocol.MethodInvokeResult, protocol.InvokeResult{InvokeID: "nope", Result: json.RawMessage(`{}`)}), protocol.CodeNotFound, "")
	// Neither result nor error: the node is told, the caller fails.
	ch := op.start(mEcho, map[string]any{"nodeId": id})
	req := <-n.requests
	wantError(t, n.call(protocol.MethodInvokeResult, protocol.InvokeResult{InvokeID: req.InvokeID}), protocol.CodeInvalidParams, "")
	f := op.await(ch)
	wantError(t, f, protocol.CodeInternal, "")
	wantRetry(t, f, false, true)
	// Another node cannot answer worker-1's call.
	other := connectNode(t, s.url, node2Token, protocol.NodeAdvertise{}, silentHandler)
	ch = op.start(mEcho, map[string]any{"nodeId": id})
	req = <-n.requests
	wantError(t, other.call(protocol.MethodInvokeResult, protocol.InvokeResult{InvokeID: req.InvokeID, Result: json.RawMessage(`{"forged":true}`)}),
		protocol.CodeNotFound, "")
	if f := n.call(protocol.MethodInvokeResult, protocol.InvokeResult{InvokeID: req.InvokeID, Result: json.RawMessage(`{"ok":1}`)}); !f.OK {
		t.Fatalf("ack: %s", f.raw)
	}
	if f := op.await(ch); !f.OK || string(f.Payload) != `{"ok":1}` {
		t.Fatalf("result: %s", f.raw)
	}
}

func TestTimeoutSendsCancel(t *testing.T) {
	s := startServer(t, testConfig())
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, silentHandler)
	op := connectOperator(t, s.url, adminToken)
	f := op.call(mSlow, map[string]any{"nodeId": nodeIDOf("worker-1")})
	wantError(t, f, protocol.CodeTimeout, "")
	wantRetry(t, f, false, true)
	req := <-n.requests
	if req.TimeoutMs != 200 {
		t.Fatalf("timeoutMs %d", req.TimeoutMs)
	}
	select {
	case got := <-n.cancels:
		if got != req.InvokeID {
			t.Fatalf("cancel for %q, want %q", got, req.InvokeID)
		}
	case <-timeAfter():
		t.Fatal("no node.invoke.cancel")
	}
	// A late result is refused (the call is gone) and the caller already has TIMEOUT.
	wantError(t, n.call(protocol.MethodInvokeResult, protocol.InvokeResult{InvokeID: req.InvokeID, Result: json.RawMessage(`{}`)}),
		protocol.CodeNotFound, "")
}

func TestCallerDisconnectCancels(t *testing.T) {
	s := startServer(t, testConfig())
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, silentHandler)
	op := connectOperator(t, s.url, adminToken)
	op.start(mEcho, map[string]any{"nodeId": nodeIDOf("worker-1")})
	req := <-n.requests
	op.ws.Close()
	select {
	case got := <-n.cancels:
		if got != req.InvokeID {
			t.Fatalf("cancel for %q, want %q", got, req.InvokeID)
		}
	case <-timeAfter():
		t.Fatal("no node.invoke.cancel after caller disconnect")
	}
}

func TestNodeDisconnectFailsPending(t *testing.T) {
	s := startServer(t, testConfig())
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, silentHandler)
	op := connectOperator(t, s.url, adminToken)
	ch := op.start(mEcho, map[string]any{"nodeId": nodeIDOf("worker-1")})
	<-n.requests
	chRead := op.start("node.host.info", map[string]any{"nodeId": nodeIDOf("worker-1")})
	<-n.requests
	n.ws.Close()
	f := op.await(ch)
	wantError(t, f, protocol.CodeUnavailable, protocol.DomainNodeDisconnected)
	wantRetry(t, f, false, true)
	f = op.await(chRead)
	wantError(t, f, protocol.CodeUnavailable, protocol.DomainNodeDisconnected)
	wantRetry(t, f, true, false) // a pure read cannot have mutated anything
}

func TestNodeReplacement(t *testing.T) {
	s := startServer(t, testConfig())
	first := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, silentHandler)
	op := connectOperator(t, s.url, adminToken)
	ch := op.start(mEcho, map[string]any{"nodeId": nodeIDOf("worker-1")})
	<-first.requests
	second := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, echoHandler)
	if code := first.waitClosed(); code != CloseSessionReplaced {
		t.Fatalf("first close code %d", code)
	}
	wantError(t, op.await(ch), protocol.CodeUnavailable, protocol.DomainNodeDisconnected)
	f := op.call(mEcho, map[string]any{"nodeId": nodeIDOf("worker-1")})
	if !f.OK {
		t.Fatalf("after replacement: %s", f.raw)
	}
	if req := <-second.requests; req.SessionGeneration != 2 {
		t.Fatalf("generation %d", req.SessionGeneration)
	}
	select {
	case <-first.requests:
		t.Fatal("replaced connection received a request")
	default:
	}
}

func TestGenericInvoke(t *testing.T) {
	s := startServer(t, testConfig())
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, echoHandler)
	op := connectOperator(t, s.url, adminToken)
	id := nodeIDOf("worker-1")
	f := op.call("node.invoke", map[string]any{"nodeId": id, "method": mEcho, "args": map[string]any{"value": "v"}})
	if !f.OK || string(f.Payload) != `{"method":"node.fs.zztest.echo","value":"v"}` {
		t.Fatalf("generic: %s", f.raw)
	}
	req := <-n.requests
	if string(req.Args) != `{"nodeId":"`+id+`","value":"v"}` {
		t.Fatalf("args: %s", req.Args)
	}
	if f := op.call("node.invoke", map[string]any{"nodeId": id, "method": mEcho}); !f.OK {
		t.Fatalf("no args: %s", f.raw)
	}
	<-n.requests
	if f := op.call("node.invoke", map[string]any{"nodeId": id, "method": mEcho, "args": map[string]any{"nodeId": id}}); !f.OK {
		t.Fatalf("matching nodeId: %s", f.raw)
	}
	<-n.requests
	wantError(t, op.call("node.invoke", map[string]any{"nodeId": id, "method": mEcho, "args": map[string]any{"nodeId": "other"}}),
		protocol.CodeInvalidParams, "")
	wantError(t, op.call("node.invoke", map[string]any{"nodeId": id, "method": mEcho, "args": []int{1}}), protocol.CodeInvalidParams, "")
	wantError(t, op.call("node.invoke", map[string]any{"nodeId": id, "method": mNoGen}), protocol.CodeForbidden, protocol.DomainGenericInvokeRefused)
	wantError(t, op.call("node.invoke", map[string]any{"nodeId": id, "method": "node.process.run"}), protocol.CodeForbidden, protocol.DomainGenericInvokeRefused)
	wantError(t, op.call("node.invoke", map[string]any{"nodeId": id, "method": "node.nope"}), protocol.CodeInvalidParams, "")
	wantError(t, op.call("node.invoke", map[string]any{"method": mEcho}), protocol.CodeInvalidParams, "")
	wantError(t, op.call("node.invoke", map[string]any{"nodeId": id, "method": mEcho, "args": map[string]any{"bogus": 1}}), protocol.CodeInvalidParams, "")
}

func TestResultOverAdvertisedPayload(t *testing.T) {
	s := startServer(t, testConfig())
	big := strings.Repeat("z", 3000)
	connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{MaxPayload: 2048}, func(protocol.InvokeRequest) (any, *protocol.Error, bool) {
		return map[string]string{"big": big}, nil, true
	})
	op := connectOperator(t, s.url, adminToken)
	f := op.call(mEcho, map[string]any{"nodeId": nodeIDOf("worker-1")})
	wantError(t, f, protocol.CodeInternal, protocol.DomainPayloadTooLarge)
	wantRetry(t, f, false, true)
	if bytes.Contains(f.raw, []byte("zzzz")) {
		t.Fatal("refused result leaked to the caller")
	}
}

func TestRecheckSession(t *testing.T) {
	s := startServer(t, testConfig())
	op := connectOperator(t, s.url, adminToken)
	id := nodeIDOf("worker-1")
	connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, echoHandler)

	// Same connection and generation after the reply: success.
	if f := op.call(mProof, map[string]any{"nodeId": id, "proof": true}); !f.OK {
		t.Fatalf("unchanged session: %s", f.raw)
	}
	// The node's session changes between its reply and the recheck.
	hook := func() { connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, echoHandler) }
	s.hookAfterResult.Store(&hook)
	f := op.call(mProof, map[string]any{"nodeId": id, "proof": true})
	wantError(t, f, protocol.CodeConflict, protocol.DomainPrivateProofAckChanged)
	wantRetry(t, f, false, true)
	// Without RecheckSession the same change does not matter.
	if f := op.call(mProof, map[string]any{"nodeId": id}); !f.OK {
		t.Fatalf("no recheck: %s", f.raw)
	}
}

func TestOperatorRateLimit(t *testing.T) {
	cfg := testConfig()
	cfg.RequestsPerSecond = 0.001
	cfg.Burst = 2
	s := startServer(t, cfg)
	op := connectOperator(t, s.url, readToken)
	for i := 0; i < 2; i++ {
		if f := op.call("node.list", nil); !f.OK {
			t.Fatalf("call %d: %s", i, f.raw)
		}
	}
	// The limit is per credential, across connections.
	op2 := connectOperator(t, s.url, readToken)
	f := op2.call("node.list", nil)
	wantError(t, f, protocol.CodeRateLimited, protocol.DomainRateLimited)
	wantRetry(t, f, true, false)
	if f := connectOperator(t, s.url, adminToken).call("node.list", nil); !f.OK {
		t.Fatalf("another credential: %s", f.raw)
	}
}

func TestMaxInflight(t *testing.T) {
	cfg := testConfig()
	cfg.MaxInflight = 2
	s := startServer(t, cfg)
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, silentHandler)
	op := connectOperator(t, s.url, adminToken)
	id := nodeIDOf("worker-1")
	op.start(mEcho, map[string]any{"nodeId": id})
	op.start(mEcho, map[string]any{"nodeId": id})
	<-n.requests
	<-n.requests
	f := op.call(mEcho, map[string]any{"nodeId": id})
	wantError(t, f, protocol.CodeRateLimited, protocol.DomainTooManyInflight)
	wantRetry(t, f, true, false)
}
