package worker_test

// Adversarial tests of the node worker against a misbehaving controller:
// the worker must not crash, must back off and reconnect, must bound what
// it reads, and must never log its token or request content.

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

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
