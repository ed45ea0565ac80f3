package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"lemon/host/hosttest"
	"lemon/protocol"
)

// mBig is mEcho with a 5-minute deadline: the pipelining tests move
// about 100 MiB through a fake node, slow under -race on a loaded machine,
// and must not see calls time out.
const mBig = "node.fs.zztest.big"

func init() {
	protocol.RegisterMethod(protocol.MethodSpec{Name: mBig, Version: 1, Validate: validateEcho,
		Deadline: func(json.RawMessage) time.Duration { return 5 * time.Minute }})
}

func bigNodeMethods() map[string]int { return map[string]int{mBig: 1} }

// bigResult is a node result whose operator response is just under the
// default maxPayload (1 MiB): the largest answer a node.fs.read can give.
func bigResult() json.RawMessage {
	return json.RawMessage(`{"v":"` + strings.Repeat("x", protocol.DefaultMaxPayload-200) + `"}`)
}

// smallBufListener fixes each accepted socket's kernel send buffer at
// 64 KiB, so what a client has not read stays in the controller's queue
// instead of the kernel's (loopback would otherwise absorb megabytes).
type smallBufListener struct{ net.Listener }

func (l smallBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(64 << 10)
	}
	return c, err
}

func startSmallBufServer(t *testing.T, cfg Config) *testServer {
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
		s.Serve(context.Background(), smallBufListener{ln})
	}()
	t.Cleanup(func() {
		s.Close()
		<-served
	})
	return &testServer{Server: s, url: "ws://" + ln.Addr().String() + "/ws"}
}

// smallBufDialer fixes the client's kernel receive buffer at 64 KiB.
var smallBufDialer = &websocket.Dialer{NetDial: func(network, addr string) (net.Conn, error) {
	c, err := net.Dial(network, addr)
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetReadBuffer(64 << 10)
	}
	return c, err
}}

// rawOperator is an operator WebSocket without a reader goroutine: the
// test decides when it reads.
func rawOperator(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	ws, _, err := smallBufDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	ws.SetReadLimit(4 << 20)
	ws.WriteJSON(protocol.Request{Type: protocol.FrameReq, ID: "c1", Method: "connect",
		Params: mustJSON(t, protocol.ConnectParams{Role: protocol.RoleOperator, Auth: protocol.ConnectAuth{Token: adminToken},
			Client: protocol.ConnectClient{ID: "test", Version: "1"}})})
	_, hello, err := ws.ReadMessage()
	if err != nil || !bytes.Contains(hello, []byte(`"hello-ok"`)) {
		t.Fatalf("connect: %v %.200s", err, hello)
	}
	return ws
}

// readAll reads n responses from ws and reports an error unless each is
// an ok response and every request id r1..rn is answered.
func readAll(t *testing.T, ws *websocket.Conn, n int) {
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		_, data, err := ws.ReadMessage()
		if err != nil {
			t.Errorf("response %d of %d: %v", i+1, n, err)
			return
		}
		head := data[:min(len(data), 100)]
		var f struct {
			Type, ID string
			OK       bool
		}
		// The payload is cut off, so only the leading fields are decoded.
		end := bytes.Index(head, []byte(`,"payload"`))
		if end < 0 || json.Unmarshal(append(head[:end:end], '}'), &f) != nil || f.Type != "res" || !f.OK {
			t.Errorf("response %d: %.120s", i+1, data)
			return
		}
		seen[f.ID] = true
	}
	for i := 1; i <= n; i++ {
		if !seen["r"+strconv.Itoa(i)] {
			t.Errorf("no answer to r%d", i)
		}
	}
}

// waitQueueFull waits until the controller's connection for ws has a
// sender waiting for room: its answers exceed the write queue. (Before
// the fix this was the moment the connection was cut.)
// It may run on any goroutine: it reports a hang with t.Error and false.
func waitQueueFull(t *testing.T, s *testServer, ws *websocket.Conn) bool {
	local := ws.LocalAddr().String()
	full := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for c := range s.conns {
			if c.ws.RemoteAddr().String() == local {
				return waiters(&c.budget) > 0
			}
		}
		return false
	}
	for deadline := time.Now().Add(2 * time.Minute); !full(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) { // hang guard only
			t.Error("the answers never exceeded the write queue")
			return false
		}
	}
	return true
}

// answerAllAsync answers n invoke requests with result on its own
// goroutine; with checkAcks, each result must be accepted. wait returns
// once every result has been acknowledged.
func answerAllAsync(t *testing.T, node *fakeNode, n int, result json.RawMessage, checkAcks bool) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		acks := make([]chan frame, 0, n)
		for i := 0; i < n; i++ {
			select {
			case req := <-node.requests:
				acks = append(acks, node.start(protocol.MethodInvokeResult, protocol.InvokeResult{InvokeID: req.InvokeID, Result: result}))
			case <-time.After(2 * time.Minute): // hang guard only
				t.Errorf("node got %d of %d requests", i, n)
				return
			}
		}
		for _, a := range acks {
			select {
			case f := <-a:
				if checkAcks && !f.OK {
					t.Errorf("result not accepted: %.200s", f.raw)
				}
			case <-time.After(2 * time.Minute): // hang guard only
				t.Error("no ack for a result")
				return
			}
		}
	}()
	return func() { <-done }
}

func pipelineEcho(t *testing.T, ws *websocket.Conn, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		req := `{"type":"req","id":"r` + strconv.Itoa(i) + `","method":"` + mBig + `","params":{"nodeId":"` + nodeIDOf("worker-1") + `"}}`
		if err := ws.WriteMessage(websocket.TextMessage, []byte(req)); err != nil {
			t.Fatal(err)
		}
	}
}

// Issue 9 item 7: a client pipelining more 1 MiB reads than the 16 MiB
// write queue holds (24 here, within max_inflight 256) and reading them
// is not cut: answers past the queue's room wait for it.
func TestPipelinedMaxPayloadReadsAreNotCut(t *testing.T) {
	cfg := testConfig()
	// The client starts reading only once its queue is full, so the
	// slow-consumer rule (tested below) must not fire meanwhile, however
	// loaded CI is.
	cfg.SlowConsumerTimeout = 2 * time.Minute
	s := startSmallBufServer(t, cfg)
	node := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{Name: "worker-1", Methods: bigNodeMethods()}, nil)
	ws := rawOperator(t, s.url)
	const n = 24
	pipelineEcho(t, ws, n)
	wait := answerAllAsync(t, node, n, bigResult(), true)
	if waitQueueFull(t, s, ws) { // the client reads once its answers exceed the queue
		readAll(t, ws, n)
	}
	wait()
}

// Issue 9 item 7, as reported: 24 connections each pipelining 1 MiB
// reads past their queue's room (here 2 MiB, 4 reads each) all get every
// answer.
func TestManyConnectionsPipeliningReadsAreNotCut(t *testing.T) {
	cfg := testConfig()
	cfg.MaxBufferedBytes = 2 << 20
	cfg.SlowConsumerTimeout = 2 * time.Minute // as above
	s := startSmallBufServer(t, cfg)
	node := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{Name: "worker-1", Methods: bigNodeMethods()}, nil)
	const conns, each = 24, 4
	ops := make([]*websocket.Conn, conns)
	for i := range ops {
		ops[i] = rawOperator(t, s.url)
		pipelineEcho(t, ops[i], each)
	}
	wait := answerAllAsync(t, node, conns*each, bigResult(), true)
	var wg sync.WaitGroup
	for _, ws := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if waitQueueFull(t, s, ws) { // each client reads once its answers exceed its queue
				readAll(t, ws, each)
			}
		}()
	}
	wg.Wait()
	wait()
}

// Issue 9 item 7: a peer that stops reading while its queue is full is
// closed with 1008 and a reason (it used to see 1006, no close frame).
// The close frame overtakes the answers still queued.
func TestSlowConsumerGetsCloseReason(t *testing.T) {
	cfg := testConfig()
	cfg.SlowConsumerTimeout = 200 * time.Millisecond
	var logs hosttest.LogBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s := startSmallBufServer(t, cfg)
	node := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{Name: "worker-1", Methods: bigNodeMethods()}, nil)
	ws := rawOperator(t, s.url)
	const n = 24
	pipelineEcho(t, ws, n)
	// Results that arrive after the cut find their call gone (NOT_FOUND).
	wait := answerAllAsync(t, node, n, bigResult(), false)
	defer wait()
	// Read as soon as the cut is logged: well within the 10 s the writer
	// waits on the full socket before giving up on it.
	waitFor(t, "the unread connection to be cut", func() bool { return strings.Contains(logs.String(), "slow consumer; closing") })
	read := 0
	for {
		_, _, err := ws.ReadMessage()
		if err == nil {
			read++
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || ce.Text != slowConsumerReason {
			t.Fatalf("after %d answers: %v, want close 1008 %q", read, err, slowConsumerReason)
		}
		break
	}
	if read >= n {
		t.Fatalf("read %d answers: the queued ones were not dropped", read)
	}
	if l := logs.String(); strings.Contains(l, "xxxx") {
		t.Fatal("the log holds payload bytes")
	}
}

// The write queue's byte budget at its boundary: frames adding up to the
// limit are queued at once, one byte more waits; a waiter that times out
// is reported as such; waiters are served in arrival order.
func TestQueueBudgetBoundary(t *testing.T) {
	b := &queueBudget{limit: 100}
	if _, ok, _ := b.acquire(60, time.Hour, nil); !ok {
		t.Fatal("60 of 100")
	}
	if _, ok, _ := b.acquire(40, time.Hour, nil); !ok {
		t.Fatal("exactly at the limit")
	}
	if _, ok, timedOut := b.acquire(1, time.Millisecond, nil); ok || !timedOut {
		t.Fatalf("one byte past the limit: ok=%v timedOut=%v", ok, timedOut)
	}
	if got := b.queued(); got != 100 {
		t.Fatalf("queued %d after a timed-out wait, want 100", got)
	}
	// A frame larger than the limit is charged the limit: it fits an empty queue.
	if n, _, _ := (&queueBudget{limit: 10}).acquire(11, time.Hour, nil); n != 10 {
		t.Fatalf("charge %d, want 10", n)
	}
	// FIFO: a 50-byte waiter queued first is granted before a 1-byte one.
	order := make(chan int64, 2)
	wait := func(n int64) {
		if _, ok, _ := b.acquire(n, time.Hour, nil); ok {
			order <- n
		}
	}
	go wait(50)
	for waiters(b) != 1 {
		runtime.Gosched()
	}
	go wait(1)
	for waiters(b) != 2 {
		runtime.Gosched()
	}
	b.release(40) // 60 queued: neither the 50 (head) nor, behind it, the 1 may go
	if w := waiters(b); w != 2 {
		t.Fatalf("%d waiters after a partial release, want 2", w)
	}
	b.release(10) // 50 queued: the 50 fits, then the 1 does not (101)
	if got := <-order; got != 50 {
		t.Fatalf("granted %d first, want 50", got)
	}
	b.release(1)
	if got := <-order; got != 1 {
		t.Fatalf("granted %d, want 1", got)
	}
	if got := b.queued(); got != 100 {
		t.Fatalf("queued %d, want 100", got)
	}
	// A waiter released by done is not granted and takes no bytes.
	done := make(chan struct{})
	close(done)
	if _, ok, timedOut := b.acquire(1, time.Hour, done); ok || timedOut {
		t.Fatalf("done: ok=%v timedOut=%v", ok, timedOut)
	}
}

func waiters(b *queueBudget) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters)
}

// A waiter is timed out only when the queue makes no progress for the
// timeout, not when its own wait is long: one far back in a line behind a
// peer that reads (each release is progress) keeps waiting. The clock is
// the test's: the real timer only makes the waiter look at it.
func TestQueueBudgetTimesOutOnlyWithoutProgress(t *testing.T) {
	clock := &testClock{t: time.Now()}
	b := &queueBudget{limit: 10, now: clock.Now}
	for i := 0; i < 10; i++ {
		b.acquire(1, time.Hour, nil)
	}
	type res struct{ ok, timedOut bool }
	got := make(chan res, 1)
	go func() {
		_, ok, timedOut := b.acquire(10, 20*time.Millisecond, nil)
		got <- res{ok, timedOut}
	}()
	for waiters(b) != 1 {
		runtime.Gosched()
	}
	// Progress well within the timeout, over many real timeouts.
	for i := 0; i < 9; i++ {
		clock.Add(15 * time.Millisecond)
		b.release(1)
		select {
		case r := <-got:
			t.Fatalf("waiter ended while the queue made progress: %+v", r)
		case <-time.After(30 * time.Millisecond): // longer than the real timer
		}
	}
	b.release(1) // now the 10 bytes fit
	if r := <-got; !r.ok || r.timedOut {
		t.Fatalf("granted waiter: %+v", r)
	}
	// No progress for the timeout: the next waiter times out.
	go func() {
		_, ok, timedOut := b.acquire(1, 20*time.Millisecond, nil)
		got <- res{ok, timedOut}
	}()
	for waiters(b) != 1 {
		runtime.Gosched()
	}
	clock.Add(20 * time.Millisecond)
	select {
	case r := <-got:
		if r.ok || !r.timedOut {
			t.Fatalf("stalled waiter: %+v", r)
		}
	case <-time.After(testWait): // hang guard only
		t.Fatal("a waiter behind a stalled queue never timed out")
	}
}
