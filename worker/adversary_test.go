package worker_test

// Adversarial tests of the node worker against a misbehaving controller:
// the worker must not crash, must back off and reconnect, must bound what
// it reads, and must never log its token or request content.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"lemon/client"
	"lemon/controller"
	"lemon/protocol"
	"lemon/worker"
)

const canary = "CANARY-3b9d"

// evilController runs script[i] for the i-th connection (the last one for
// every later connection). A script gets the socket after the worker's
// connect frame was read.
type evilController struct {
	t       *testing.T
	srv     *httptest.Server
	script  []func(ws *websocket.Conn, connect protocol.Request)
	conns   atomic.Int64
	results chan protocol.InvokeResult
}

func newEvil(t *testing.T, script ...func(ws *websocket.Conn, connect protocol.Request)) *evilController {
	e := &evilController{t: t, script: script, results: make(chan protocol.InvokeResult, 64)}
	up := websocket.Upgrader{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		ws.SetReadLimit(4 << 20)
		i := int(e.conns.Add(1)) - 1
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var req protocol.Request
		json.Unmarshal(data, &req)
		e.script[min(i, len(e.script)-1)](ws, req)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *evilController) url() string { return "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/ws" }

func helloFrame(nodeID string) []byte {
	b, _ := json.Marshal(protocol.NodeHelloOK{HelloOK: protocol.HelloOK{Type: protocol.FrameHelloOK, Protocol: 1,
		Server: protocol.HelloServer{Version: "evil", ConnID: "x"},
		Policy: protocol.HelloPolicy{MaxPayload: protocol.DefaultMaxPayload, TickIntervalMs: 25000},
		Auth:   protocol.HelloAuth{Role: protocol.RoleNode, NodeID: nodeID}}})
	return b
}

func event(t *testing.T, name string, seq uint64, payload any) []byte {
	p, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(protocol.Event{Type: protocol.FrameEvent, Event: name, Seq: seq, Payload: p})
	return b
}

// serveResults acks every node.invoke.result and forwards its params.
func (e *evilController) serveResults(ws *websocket.Conn) {
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var req protocol.Request
		if json.Unmarshal(data, &req) != nil || req.Method != protocol.MethodInvokeResult {
			continue
		}
		var r protocol.InvokeResult
		json.Unmarshal(req.Params, &r)
		e.results <- r
		b, _ := json.Marshal(protocol.OKResponse(req.ID, json.RawMessage(`{"accepted":true}`)))
		ws.WriteMessage(websocket.TextMessage, b)
	}
}

func TestAdvWorkerSurvivesMisbehavingController(t *testing.T) {
	text := func(ws *websocket.Conn, s string) { ws.WriteMessage(websocket.TextMessage, []byte(s)) }
	var e *evilController
	e = newEvil(t,
		// Binary frame instead of hello-ok.
		func(ws *websocket.Conn, _ protocol.Request) {
			ws.WriteMessage(websocket.BinaryMessage, []byte("\x00\x01"))
		},
		// Garbage, then a frame past the handshake read limit.
		func(ws *websocket.Conn, _ protocol.Request) {
			text(ws, `not json`)
			text(ws, `[1,2,3]`)
			text(ws, `"str"`)
			text(ws, `{"type":"event","event":"node.invoke.request","seq":1,"payload":{"invokeId":"early","method":"fast"}}`)
			ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"x","pad":"`+strings.Repeat("p", 2<<20)+`"}`))
			ws.ReadMessage()
		},
		// Closed mid-handshake.
		func(ws *websocket.Conn, _ protocol.Request) {},
		// A non-fatal refusal.
		func(ws *websocket.Conn, c protocol.Request) {
			b, _ := json.Marshal(protocol.ErrResponse(c.ID, protocol.Errorf(protocol.CodeInternal, "try later")))
			ws.WriteMessage(websocket.TextMessage, b)
		},
		// hello-ok, then junk events, then a frame past the worker's limit.
		func(ws *websocket.Conn, _ protocol.Request) {
			ws.WriteMessage(websocket.TextMessage, helloFrame("n1"))
			text(ws, `{"type":"event","event":"no.such.event","seq":1,"payload":{"x":1}}`)
			text(ws, `{"type":"event","event":"node.invoke.request","seq":2,"payload":[1]}`)
			text(ws, `{"type":"event","event":"node.invoke.request","seq":3,"payload":{"invokeId":7}}`)
			text(ws, `{"type":"event","event":"node.invoke.request","seq":4,"payload":{"invokeId":"`+strings.Repeat("i", 300)+`","method":"fast"}}`)
			text(ws, `{"type":"event","event":"node.invoke.cancel","seq":5,"payload":{"invokeId":"nobody"}}`)
			text(ws, `{"type":"event","event":"node.invoke.cancel","seq":6,"payload":"x"}`)
			text(ws, `{"type":"res","id":"r999","ok":true}`)
			text(ws, `{"type":"hello-ok"}`)
			text(ws, "{\"type\":\"event\",\"event\":\"node.invoke.request\",\"seq\":7,\"payload\":{\"invokeId\":\"bad\xff\",\"method\":\"fast\"}}")
			ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"x","pad":"`+strings.Repeat("p", 3<<20)+`"}`))
			ws.ReadMessage()
		},
		// Finally a sane controller: one invocation, answered.
		func(ws *websocket.Conn, _ protocol.Request) {
			ws.WriteMessage(websocket.TextMessage, helloFrame("n1"))
			ws.WriteMessage(websocket.TextMessage, event(t, protocol.EventInvokeRequest, 1, protocol.InvokeRequest{
				InvokeID: "good", NodeID: "n1", Method: "fast", Args: json.RawMessage(`{}`), TimeoutMs: 5000}))
			e.serveResults(ws)
		},
	)
	var mu sync.Mutex
	var logs strings.Builder
	startWorker(t, worker.Config{ControllerURL: e.url(), Token: "tok-" + canary, Dispatcher: newFake(),
		MaxPayload: 1 << 20,
		Logger:     slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	select {
	case r := <-e.results:
		if r.InvokeID != "good" || string(r.Result) != `{"fast":true}` {
			t.Fatalf("result %+v", r)
		}
	case <-ctxT(t).Done():
		t.Fatalf("no result after %d connections", e.conns.Load())
	}
	select {
	case r := <-e.results:
		t.Fatalf("a junk invocation ran: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(logs.String(), canary) {
		t.Fatalf("log holds the token:\n%s", logs.String())
	}
}

// A controller that floods invocations while the node is at capacity
// gets busy answers; the node keeps serving once capacity frees.
func TestAdvWorkerFloodAtCapacity(t *testing.T) {
	const flood = 2000
	var e *evilController
	f := newFake()
	e = newEvil(t, func(ws *websocket.Conn, _ protocol.Request) {
		var wmu sync.Mutex
		write := func(b []byte) {
			wmu.Lock()
			defer wmu.Unlock()
			ws.WriteMessage(websocket.TextMessage, b)
		}
		write(helloFrame("n1"))
		write(event(t, protocol.EventInvokeRequest, 1, protocol.InvokeRequest{
			InvokeID: "slow-0", NodeID: "n1", Method: "slow", Args: json.RawMessage(`{}`), TimeoutMs: 10000}))
		go func() {
			for i := 0; i < flood; i++ {
				write(event(t, protocol.EventInvokeRequest, uint64(i+2), protocol.InvokeRequest{
					InvokeID: fmt.Sprintf("f%d", i), NodeID: "n1", Method: "fast", Args: json.RawMessage(`{}`), TimeoutMs: 10000}))
			}
		}()
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				return
			}
			var req protocol.Request
			if json.Unmarshal(data, &req) != nil || req.Method != protocol.MethodInvokeResult {
				continue
			}
			var r protocol.InvokeResult
			json.Unmarshal(req.Params, &r)
			e.results <- r
			b, _ := json.Marshal(protocol.OKResponse(req.ID, json.RawMessage(`{"accepted":true}`)))
			write(b)
		}
	})
	e.results = make(chan protocol.InvokeResult, flood+10)
	startWorker(t, worker.Config{ControllerURL: e.url(), Token: nodeToken, Dispatcher: f, MaxConcurrent: 1})
	<-f.started // the slow call holds the only slot
	busy := 0
	for busy < flood {
		select {
		case r := <-e.results:
			if r.Error == nil || r.Error.DomainCode() != "node_busy" {
				t.Fatalf("result %+v", r)
			}
			busy++
		case <-ctxT(t).Done():
			t.Fatalf("only %d busy answers", busy)
		}
	}
	close(f.release)
	select {
	case r := <-e.results:
		if r.Error != nil || r.InvokeID != "slow-0" {
			t.Fatalf("slow: %+v", r)
		}
	case <-ctxT(t).Done():
		t.Fatal("slow call never answered")
	}
}

// mPanicValidate is registered only in this package's tests: its
// validator panics, as a bug in any validator would.
const mPanicValidate = "node.fs.zztest.panicvalidate"

func init() {
	protocol.RegisterMethod(protocol.MethodSpec{Name: mPanicValidate, Version: 1,
		Validate: func(json.RawMessage) *protocol.Error { panic("validator bug with " + canary) }})
}

// A validator that panics on the controller's args answers INTERNAL_ERROR
// instead of ending the node process, and the panic value is not logged.
func TestAdvWorkerValidatorPanic(t *testing.T) {
	f := newFake()
	f.methods[mPanicValidate] = 1
	var e *evilController
	e = newEvil(t, func(ws *websocket.Conn, _ protocol.Request) {
		ws.WriteMessage(websocket.TextMessage, helloFrame("n1"))
		ws.WriteMessage(websocket.TextMessage, event(t, protocol.EventInvokeRequest, 1, protocol.InvokeRequest{
			InvokeID: "p1", NodeID: "n1", Method: mPanicValidate, Args: json.RawMessage(`{}`), TimeoutMs: 5000}))
		ws.WriteMessage(websocket.TextMessage, event(t, protocol.EventInvokeRequest, 2, protocol.InvokeRequest{
			InvokeID: "f1", NodeID: "n1", Method: "fast", Args: json.RawMessage(`{}`), TimeoutMs: 5000}))
		e.serveResults(ws)
	})
	var mu sync.Mutex
	var logs strings.Builder
	startWorker(t, worker.Config{ControllerURL: e.url(), Dispatcher: f,
		Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	got := map[string]protocol.InvokeResult{}
	for len(got) < 2 {
		select {
		case r := <-e.results:
			got[r.InvokeID] = r
		case <-ctxT(t).Done():
			t.Fatalf("results: %+v", got)
		}
	}
	if r := got["p1"]; r.Error == nil || r.Error.Code != protocol.CodeInternal {
		t.Fatalf("panicking validator: %+v", r)
	}
	if r := got["f1"]; r.Error != nil {
		t.Fatalf("fast after the panic: %+v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(logs.String(), canary) {
		t.Fatalf("panic value logged:\n%s", logs.String())
	}
}

// canaryDispatcher serves node.fs.read: path "slow" waits for its
// context, "panic" panics with the args, anything else fails NOT_FOUND.
type canaryDispatcher struct{}

func (canaryDispatcher) Methods() map[string]int { return map[string]int{"node.fs.read": 1} }

func (canaryDispatcher) Invoke(ctx context.Context, req protocol.InvokeRequest) (json.RawMessage, *protocol.Error) {
	var p protocol.FSReadParams
	json.Unmarshal(req.Args, &p)
	switch {
	case strings.HasSuffix(p.Path, "slow"):
		<-ctx.Done()
		return nil, protocol.Errorf(protocol.CodeTimeout, "cancelled")
	case strings.HasSuffix(p.Path, "panic"):
		panic(string(req.Args))
	}
	return nil, protocol.DomainError(protocol.CodeNotFound, protocol.DomainNotFound, "no such file")
}

// End to end through the real controller: tokens and params carrying a
// canary never appear in a log line of either side or in any error the
// operator client returns.
func TestAdvCanaryThroughControllerAndWorker(t *testing.T) {
	var cmu, wmu sync.Mutex
	var clog, wlog strings.Builder
	opToken, ndToken := "op-"+canary+"-tok", "node-"+canary+"-tok"
	srv, err := controller.New(controller.Config{
		Operators:  []controller.OperatorCredential{{Name: "admin", TokenHash: controller.HashToken(opToken), Scopes: []string{protocol.ScopeAdmin}}},
		NodeTokens: []controller.NodeCredential{{Name: "w1", TokenHash: controller.HashToken(ndToken)}},
		Logger:     slog.New(slog.NewTextHandler(lockedWriter{&cmu, &clog}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(context.Background(), ln) }()
	defer func() { srv.Close(); <-served }()
	url := "ws://" + ln.Addr().String() + "/ws"
	wlogger := slog.New(slog.NewTextHandler(lockedWriter{&wmu, &wlog}, &slog.HandlerOptions{Level: slog.LevelDebug}))

	// A worker with a wrong token stops with a fatal error.
	bad, _ := worker.New(worker.Config{ControllerURL: url, Token: "wrong-" + canary, Name: "w1", Dispatcher: canaryDispatcher{}, Logger: wlogger})
	var errs []string
	if err := bad.Run(ctxT(t)); err == nil {
		t.Fatal("wrong token accepted")
	} else {
		errs = append(errs, err.Error())
	}
	startWorker(t, worker.Config{ControllerURL: url, Token: ndToken, Name: "w1", Dispatcher: canaryDispatcher{}, Logger: wlogger})

	if _, err := client.Dial(ctxT(t), url, client.Options{Token: "bad-" + canary}); err == nil {
		t.Fatal("wrong operator token accepted")
	} else {
		errs = append(errs, err.Error())
	}
	if _, err := client.Dial(ctxT(t), "ws://user:"+canary+"@127.0.0.1:1/ws?token="+canary, client.Options{Token: opToken}); err == nil {
		t.Fatal("dial to a closed port")
	} else {
		errs = append(errs, err.Error())
	}
	op, err := client.Dial(ctxT(t), url, client.Options{Token: opToken})
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	var list protocol.NodeListResult
	for i := 0; ; i++ {
		raw, perr := op.Call(ctxT(t), "node.list", nil)
		if perr != nil {
			t.Fatal(perr)
		}
		json.Unmarshal(raw, &list)
		if len(list.Nodes) == 1 && list.Nodes[0].Online {
			break
		}
		if i > 500 {
			t.Fatal("worker never came online")
		}
		time.Sleep(10 * time.Millisecond)
	}
	id := list.Nodes[0].NodeID
	short, cancel := context.WithTimeout(ctxT(t), 200*time.Millisecond)
	defer cancel()
	for _, c := range []struct {
		ctx    context.Context
		params any
	}{
		{ctxT(t), map[string]any{"nodeId": id, "path": canary + "/file"}},
		{ctxT(t), map[string]any{"nodeId": id, "path": canary + "/panic"}},
		{ctxT(t), map[string]any{"nodeId": id, "path": canary, "x": canary}},
		{ctxT(t), map[string]any{"nodeId": id, "path": canary, "length": canary}},
		{ctxT(t), map[string]any{"nodeId": canary, "path": canary}},
		{short, map[string]any{"nodeId": id, "path": canary + "/slow"}},
	} {
		if _, perr := op.Call(c.ctx, "node.fs.read", c.params); perr == nil {
			t.Fatalf("%v succeeded", c.params)
		} else {
			b, _ := json.Marshal(perr)
			errs = append(errs, string(b))
		}
	}
	op.Close()
	for _, e := range errs {
		if strings.Contains(e, canary) {
			t.Errorf("error holds the canary: %s", e)
		}
	}
	srv.Close()
	cmu.Lock()
	defer cmu.Unlock()
	wmu.Lock()
	defer wmu.Unlock()
	if strings.Contains(clog.String(), canary) {
		t.Errorf("controller log holds the canary:\n%s", clog.String())
	}
	if strings.Contains(wlog.String(), canary) {
		t.Errorf("worker log holds the canary:\n%s", wlog.String())
	}
}
