package controller

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"lemon/protocol"
)

// maxIDBytes bounds a request id and a method name.
const maxIDBytes = 128

// maxPreConnectQueued bounds the frames queued for a peer that has not
// connected yet. One that lets more answers pile up unread is closed, so
// a peer cannot fill its write queue before connecting and then hold up
// its own hello-ok (sent after the registry lock is released).
const maxPreConnectQueued = 64

// outFrame is one item of a connection's write queue: a text frame
// (charged bytes of the queue's budget), or a close frame (closeCode != 0)
// after which the writer closes the socket.
type outFrame struct {
	data      []byte
	charged   int64
	closeCode int
	closeText string
}

// slowConsumerReason is sent with 1008 to a peer whose full write queue
// made no progress for Config.SlowConsumerTimeout.
const slowConsumerReason = "slow consumer: queued frames were not read in time"

// queueBudget bounds the bytes queued for one connection's writer
// (Config.MaxBufferedBytes). A sender whose frame does not fit waits, in
// arrival order behind earlier waiters, until the writer has sent enough
// (see docs/PROTOCOL.md, Transport).
type queueBudget struct {
	mu          sync.Mutex
	limit       int64
	used        int64
	waiters     []*budgetWaiter
	lastRelease time.Time        // when the writer last finished a frame
	now         func() time.Time // nil: time.Now (tests set a clock)
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed once the bytes are granted
}

func (b *queueBudget) clock() time.Time {
	if b.now != nil {
		return b.now()
	}
	return time.Now()
}

// acquire charges n bytes (at most the limit, so any frame fits an empty
// queue) and returns the charge. It waits for room until done closes or
// the queue makes no progress (the writer finishes no frame) for timeout:
// a sender far back in a long line behind a peer that reads is not timed
// out, only one behind a peer that stopped. ok is false when the bytes
// were not granted, and timedOut tells the stall apart from done.
func (b *queueBudget) acquire(n int64, timeout time.Duration, done <-chan struct{}) (charge int64, ok, timedOut bool) {
	n = min(n, b.limit)
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.limit {
		b.used += n
		b.mu.Unlock()
		return n, true, false
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	since := b.clock() // progress is counted from now or the last release, the later
	b.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
wait:
	for {
		select {
		case <-w.ready:
			return n, true, false
		case <-t.C:
			b.mu.Lock()
			idle := b.clock().Sub(since)
			if b.lastRelease.After(since) {
				idle = b.clock().Sub(b.lastRelease)
			}
			b.mu.Unlock()
			if idle < timeout {
				t.Reset(timeout - idle)
				continue
			}
			timedOut = true
			break wait
		case <-done:
			break wait
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, x := range b.waiters {
		if x == w {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			b.grantLocked() // the waiters behind w may fit now
			return n, false, timedOut
		}
	}
	return n, true, false // granted just as the wait ended
}

// release returns n bytes (a frame has been written or dropped).
func (b *queueBudget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.lastRelease = b.clock()
	b.grantLocked()
	b.mu.Unlock()
}

func (b *queueBudget) grantLocked() {
	for len(b.waiters) > 0 && b.used+b.waiters[0].n <= b.limit {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.used += w.n
		close(w.ready)
	}
}

func (b *queueBudget) queued() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// conn is one WebSocket connection, operator or node.
type conn struct {
	s        *Server
	ws       *websocket.Conn
	id       string
	addr     string          // addrKey of the peer, for the auth-failure throttle
	ctx      context.Context // cancelled when the connection ends
	cancel   context.CancelFunc
	out      chan outFrame
	budget   queueBudget
	urgent   chan outFrame // cap 1: a close frame that overtakes the queue
	done     chan struct{} // closed when the connection is closing
	finished chan struct{} // closed when run has returned
	once     sync.Once
	closing  atomic.Bool // a close frame has been queued
	eventMu  sync.Mutex  // orders seq with queue order
	seq      uint64
	inflight chan struct{}

	// Set once by the handshake, before any concurrent handler starts.
	connected  bool
	role       string
	scopes     []string
	clientID   string
	op         *operatorEntry
	node       *nodeEntry
	generation uint64
	peerMax    int    // node's advertised maxPayload (≤ controller's)
	session    string // hex sha256 of a paired node's session token; "" for an interim token

	// Fan-out (fanout.go): the sinks of sub-requests by id, and the
	// fan-outs running on this operator connection.
	subs    sync.Map // string → subSinkFunc
	fmu     sync.Mutex
	fanouts int

	pmu     sync.Mutex
	pending map[string]*call // node connections: invocations in flight
	gone    bool             // node connection torn down; no new pending

	// Observability (observe.go): the operator requests in flight by id,
	// the close text the controller sent, and how the read loop ended.
	rmu      sync.Mutex
	reqs     map[string]*opRequest
	sentText atomic.Pointer[string]
	readErr  error // set by readLoop before teardown
}

func newConn(s *Server, ws *websocket.Conn) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	return &conn{
		s:        s,
		ws:       ws,
		id:       randomHex(8),
		addr:     addrKey(ws.RemoteAddr()),
		ctx:      ctx,
		cancel:   cancel,
		out:      make(chan outFrame, 256),
		budget:   queueBudget{limit: int64(s.cfg.MaxBufferedBytes)},
		urgent:   make(chan outFrame, 1),
		done:     make(chan struct{}),
		finished: make(chan struct{}),
		inflight: make(chan struct{}, s.cfg.MaxInflight),
		pending:  map[string]*call{},
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("controller: crypto/rand failed")
	}
	return hex.EncodeToString(b)
}

// run serves the connection until it ends, then tears it down.
func (c *conn) run() {
	defer close(c.finished)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writer()
	}()
	c.ws.SetPingHandler(func(appData string) error {
		c.touch()
		err := c.ws.WriteControl(websocket.PongMessage, []byte(appData), time.Now().Add(writeTimeout))
		if errors.Is(err, websocket.ErrCloseSent) {
			return nil
		}
		return err
	})
	c.ws.SetPongHandler(func(string) error { c.touch(); return nil })
	c.ws.SetReadDeadline(time.Now().Add(c.s.cfg.HandshakeTimeout))
	c.readLoop()
	if c.closing.Load() {
		// A close frame is queued: let the writer deliver it (and what precedes it).
		select {
		case <-writerDone:
		case <-time.After(writeTimeout):
		}
	}
	c.closeWith(0, "")
	c.teardown()
	<-writerDone
}

func (c *conn) touch() {
	if c.connected && !c.closing.Load() {
		c.ws.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
	}
}

// closeWith ends the connection. With a code, a close frame is queued
// behind frames already queued (so an error response is delivered first).
func (c *conn) closeWith(code int, text string) {
	if code != 0 && c.closing.CompareAndSwap(false, true) {
		c.sentText.Store(&text)
		select {
		case c.out <- outFrame{closeCode: code, closeText: text}:
			return // the writer closes after sending it
		case <-c.done:
			return
		default:
			// Queue full: close at once, without the courtesy frame.
		}
	}
	c.once.Do(func() {
		close(c.done)
		c.cancel()
		c.ws.Close()
	})
}

// closeUrgent ends the connection with a close frame sent ahead of every
// frame still queued (those are dropped): the peer gets the reason as
// soon as it reads past what the socket already holds.
func (c *conn) closeUrgent(code int, text string) {
	if c.closing.CompareAndSwap(false, true) {
		c.sentText.Store(&text)
		c.urgent <- outFrame{closeCode: code, closeText: text}
	}
}

func (c *conn) writer() {
	for {
		var f outFrame
		select {
		case <-c.done:
			return
		case f = <-c.urgent:
		case f = <-c.out:
			select {
			case u := <-c.urgent: // an urgent close overtakes queued frames
				f = u
			default:
			}
		}
		c.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
		if f.closeCode != 0 {
			c.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(f.closeCode, f.closeText))
			// The reader ends when the peer answers the close, or after a grace second.
			c.ws.SetReadDeadline(time.Now().Add(time.Second))
			return
		}
		err := c.ws.WriteMessage(websocket.TextMessage, f.data)
		c.budget.release(f.charged)
		if err != nil {
			c.closeWith(0, "")
			return
		}
	}
}

// send queues one frame and reports whether it was queued. The queue
// holds at most MaxBufferedBytes; a frame that does not fit waits for the
// writer to make room. The answers a peer asked for are bounded by
// MaxInflight, so a peer that reads is never cut for pipelining; one whose
// full queue makes no progress for SlowConsumerTimeout is closed with 1008
// and slowConsumerReason.
func (c *conn) send(data []byte) bool {
	n, ok, timedOut := c.budget.acquire(int64(len(data)), c.s.cfg.SlowConsumerTimeout, c.done)
	if !ok {
		if timedOut {
			c.s.log.Warn("slow consumer; closing", "conn", c.id, "role", c.roleLabel(), "queuedBytes", c.budget.queued())
			c.s.metrics.slowConsumers.Inc()
			c.closeUrgent(websocket.ClosePolicyViolation, slowConsumerReason)
		}
		return false
	}
	select {
	case c.out <- outFrame{data: data, charged: n}:
		return true
	case <-c.done:
		c.budget.release(n)
		return false
	}
}

func (c *conn) sendJSON(v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	return c.send(b)
}

func (c *conn) respond(id string, payload any) bool {
	b, err := json.Marshal(payload)
	if err != nil {
		return c.respondErr(id, protocol.Errorf(protocol.CodeInternal, "internal error"))
	}
	return c.respondRaw(id, b)
}

// respondRaw answers with a raw payload, refusing one that would make the
// frame exceed the controller's maxPayload.
func (c *conn) respondRaw(id string, payload json.RawMessage) bool {
	b, err := protocol.AppendOKResponse(nil, id, payload)
	if err != nil {
		return c.respondErr(id, protocol.Errorf(protocol.CodeInternal, "internal error"))
	}
	if len(b) > c.s.cfg.MaxPayload {
		return c.respondErr(id, protocol.DomainError(protocol.CodeInternal, protocol.DomainPayloadTooLarge,
			"the result does not fit the connection's maxPayload"))
	}
	c.noteAnswer(id, nil)
	return c.send(b)
}

func (c *conn) respondErr(id string, e *protocol.Error) bool {
	c.noteAnswer(id, e)
	if sink := c.subSink(id); sink != nil { // a fan-out's node call
		sink(nil, e)
		return true
	}
	return c.sendJSON(protocol.ErrResponse(id, e))
}

// sendEvent queues an event with the connection's next seq (from 1).
func (c *conn) sendEvent(name string, payload any) bool {
	queued, _ := c.sendEventMax(name, payload, 0)
	return queued
}

// sendEventMax is sendEvent for a frame of at most max bytes (0: no
// bound). A larger frame is not sent and uses no seq: fits is false.
func (c *conn) sendEventMax(name string, payload any, max int) (queued, fits bool) {
	p, err := json.Marshal(payload)
	if err != nil {
		return false, true
	}
	return c.sendEventRaw(name, p, max)
}

// sendEventRaw is sendEventMax for a payload already encoded as valid JSON
// (built by this program or checked on arrival): its bytes are appended to
// the frame, not encoded again.
func (c *conn) sendEventRaw(name string, p json.RawMessage, max int) (queued, fits bool) {
	c.eventMu.Lock()
	defer c.eventMu.Unlock()
	b, err := protocol.AppendEvent(nil, name, c.seq+1, p)
	if err != nil {
		return false, true
	}
	if max > 0 && len(b) > max {
		return false, false
	}
	c.seq++
	return c.send(b), true
}

// readLoop reads frames until the connection fails or closes.
func (c *conn) readLoop() {
	max := c.s.cfg.MaxPayload
	for {
		mt, r, err := c.ws.NextReader()
		if err != nil {
			c.readErr = err
			return
		}
		if mt != websocket.TextMessage {
			c.respondErr(protocol.UnknownID, protocol.DomainError(protocol.CodeInvalidRequest,
				protocol.DomainBinaryFrame, "binary frames are refused; send one JSON object per text frame"))
			c.closeWith(websocket.CloseUnsupportedData, "binary frames are refused")
			return
		}
		data, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
		if err != nil {
			return
		}
		if len(data) > max {
			c.respondErr(protocol.UnknownID, protocol.DomainError(protocol.CodeInvalidRequest,
				protocol.DomainPayloadTooLarge, "frame exceeds maxPayload"))
			c.closeWith(websocket.CloseMessageTooBig, "frame exceeds maxPayload")
			return
		}
		c.touch()
		if !c.handleFrame(data) {
			return
		}
	}
}

// handleFrame processes one frame; false ends the read loop.
func (c *conn) handleFrame(data []byte) bool {
	if err := protocol.CheckJSONLimits(data); err != nil {
		if errors.Is(err, protocol.ErrTooDeep) || errors.Is(err, protocol.ErrTooManyItems) {
			c.respondErr(protocol.UnknownID, protocol.DomainError(protocol.CodeInvalidRequest,
				protocol.DomainJSONLimits, "frame exceeds the JSON depth or item limits"))
		} else {
			c.respondErr(protocol.UnknownID, protocol.Errorf(protocol.CodeInvalidRequest, "frame is not valid JSON"))
		}
		return true
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		c.respondErr(protocol.UnknownID, protocol.Errorf(protocol.CodeInvalidRequest, "frame must be a JSON object"))
		return true
	}
	// encoding/json would fold invalid UTF-8 and lone surrogate escapes
	// into U+FFFD: an id answered would not be the id sent.
	if !protocol.ValidJSONText(data) {
		c.respondErr(protocol.UnknownID, protocol.Errorf(protocol.CodeInvalidRequest, "frame is not valid UTF-8 text"))
		return true
	}
	// The frame is valid JSON text (checked above), so it is split rather
	// than decoded: params, up to maxPayload bytes, is not scanned again.
	ms, err := protocol.SplitObject(data)
	var req protocol.Request
	if err == nil {
		req, err = protocol.DecodeRequest(ms)
	}
	if err != nil {
		c.respondErr(protocol.UnknownID, protocol.Errorf(protocol.CodeInvalidRequest, "frame could not be parsed"))
		return true
	}
	id := req.ID
	if id == "" || len(id) > maxIDBytes {
		id = protocol.UnknownID
	}
	switch req.Type {
	case protocol.FrameReq:
	case protocol.FrameEvent:
		if c.connected && c.role == protocol.RoleNode {
			return true // node events are accepted and ignored for now
		}
		c.respondErr(id, protocol.Errorf(protocol.CodeInvalidRequest, "only req frames are accepted"))
		return true
	default:
		c.respondErr(id, protocol.Errorf(protocol.CodeInvalidRequest, "only req frames are accepted"))
		return true
	}
	if id == protocol.UnknownID {
		c.respondErr(id, protocol.Errorf(protocol.CodeInvalidRequest, "request id is missing or malformed"))
		return true
	}
	if req.Method == "" || len(req.Method) > maxIDBytes {
		c.respondErr(id, protocol.Errorf(protocol.CodeInvalidRequest, "request method is missing or malformed"))
		return true
	}
	if !c.connected {
		if len(c.out) > maxPreConnectQueued {
			c.closeWith(websocket.ClosePolicyViolation, "answers before connect are not being read")
			return false
		}
		if req.Method != protocol.MethodConnect {
			c.respondErr(id, protocol.Errorf(protocol.CodeHandshakeRequired, "the first request must be connect"))
			return true
		}
		return c.handleConnect(id, req.Params)
	}
	if req.Method == protocol.MethodConnect {
		c.respondErr(id, protocol.Errorf(protocol.CodeAlreadyConnected, "this connection is already connected"))
		return true
	}
	if c.role == protocol.RoleOperator && c.op.limiter != nil && !c.op.limiter.Allow() {
		c.respondErr(id, protocol.DomainError(protocol.CodeRateLimited, protocol.DomainRateLimited,
			"operator request rate exceeded").WithRetry(true, false))
		return true
	}
	if c.role == protocol.RoleNode {
		// A node's results are never refused (the caller would wait for its
		// deadline and get TIMEOUT for work that was done): when every slot
		// is taken, the node's socket is not read further until one frees.
		select {
		case c.inflight <- struct{}{}:
		case <-c.done:
			return false
		}
	} else {
		select {
		case c.inflight <- struct{}{}:
		default:
			c.respondErr(id, protocol.DomainError(protocol.CodeRateLimited, protocol.DomainTooManyInflight,
				"too many requests in flight on this connection").WithRetry(true, false))
			return true
		}
	}
	go func() {
		defer func() { <-c.inflight }()
		if c.role == protocol.RoleOperator {
			t := c.beginRequest(id, req.Method)
			defer c.endRequest(id, t)
			if !c.admitAudit(id) {
				return
			}
		}
		// As net/http does for its handlers: a bug met by one request
		// must not end the controller for every node and operator. No
		// panic value or stack is logged: either may hold request content.
		defer func() {
			if r := recover(); r != nil {
				c.s.metrics.panics.Inc()
				c.s.log.Error("request handler panicked", "conn", c.id, "role", c.role, "method", c.s.methodLabel(req.Method))
				c.respondErr(id, protocol.Errorf(protocol.CodeInternal, "internal error"))
			}
		}()
		if c.role == protocol.RoleNode {
			c.handleNodeRequest(id, req.Method, req.Params, len(data))
		} else {
			c.handleOperatorRequest(id, req.Method, req.Params, req.ExecutionContext)
		}
	}()
	return true
}

// handleConnect runs the handshake. It answers hello-ok, or an error; an
// authentication failure closes the connection.
func (c *conn) handleConnect(id string, raw json.RawMessage) bool {
	var p protocol.ConnectParams
	if e := protocol.DecodeParams(raw, &p); e != nil {
		c.respondErr(id, e)
		return true
	}
	if len(p.Client.ID) > maxIDBytes || len(p.Client.Version) > 64 ||
		!utf8.ValidString(p.Client.ID) || !utf8.ValidString(p.Client.Version) {
		c.respondErr(id, protocol.InvalidParams("client", "client id or version is too long"))
		return true
	}
	if p.Role == protocol.RoleOperator || p.Role == protocol.RoleNode {
		// An address that failed too often is refused before its
		// credential is looked at: guessing stops, not just slows.
		if c.s.throttle.blocked(c.addr, c.s.now()) {
			c.s.log.Debug("connect refused: too many authentication failures", "conn", c.id, "addr", c.addr)
			c.s.metrics.connects.WithLabelValues(p.Role, protocol.CodeRateLimited).Inc()
			c.respondErr(id, protocol.DomainError(protocol.CodeRateLimited, protocol.DomainAuthRateLimited,
				"too many failed connects from this address; retry later").WithRetry(true, false))
			c.closeWith(websocket.ClosePolicyViolation, "too many authentication failures")
			return false
		}
	}
	switch p.Role {
	case protocol.RoleOperator:
		if p.Node != nil {
			c.respondErr(id, protocol.InvalidParams("node", "node is only for role node"))
			return true
		}
		op, e := c.s.auth.operator(p.Auth.Token)
		if e != nil {
			c.s.log.Info("operator connect refused", "conn", c.id, "addr", c.addr, "code", e.Code, "reason", e.DomainCode())
			c.s.metrics.connects.WithLabelValues(protocol.RoleOperator, e.Code).Inc()
			c.authFailed(e)
			c.respondErr(id, e)
			c.closeWith(websocket.ClosePolicyViolation, "unauthorized")
			return false
		}
		scopes, e := grantScopes(op.scopes, p.Scopes)
		if e != nil {
			c.respondErr(id, e)
			return true
		}
		c.op, c.role, c.scopes, c.clientID = op, protocol.RoleOperator, scopes, p.Client.ID
		c.connected = true
		c.authenticated()
		c.touch()
		c.sendJSON(c.s.hello(c, nil))
		c.s.log.Info("operator connected", "conn", c.id, "operator", op.name, "addr", c.addr)
		c.s.metrics.connects.WithLabelValues(protocol.RoleOperator, "ok").Inc()
		c.s.metrics.connections.WithLabelValues(protocol.RoleOperator).Inc()
		return true
	case protocol.RoleNode:
		ok := c.connectNode(id, &p)
		if c.connected {
			c.authenticated()
			c.s.metrics.connects.WithLabelValues(protocol.RoleNode, "ok").Inc()
			c.s.metrics.connections.WithLabelValues(protocol.RoleNode).Inc()
		}
		return ok
	default:
		c.respondErr(id, protocol.InvalidParams("role", `role must be "operator" or "node"`))
		return true
	}
}

// authenticated frees the socket's unauthenticated slot (see connGuard).
func (c *conn) authenticated() {
	if g := guardedOf(c.ws.NetConn()); g != nil {
		g.authenticated()
	}
}

// authFailed charges a failed connect to the peer's address when its
// token was missing or not recognized (a guess). A genuine credential
// refused for its state (session expired or revoked, identity mismatch)
// is not a guess and is not charged: a fleet behind one address whose
// sessions expired must not lock that address out.
func (c *conn) authFailed(e *protocol.Error) {
	if d := e.DomainCode(); d != protocol.DomainOperatorAuthMissing && d != protocol.DomainOperatorAuthInvalid {
		return
	}
	if c.s.throttle.failed(c.addr, c.s.now()) {
		c.s.log.Warn("authentication failures from one address; refusing its connects for a while", "conn", c.id)
	}
}

// hello builds the hello-ok frame for a connected peer.
func (s *Server) hello(c *conn, nodeID *string) any {
	h := protocol.HelloOK{
		Type:     protocol.FrameHelloOK,
		Protocol: protocol.ProtocolVersion,
		Server:   protocol.HelloServer{Version: s.cfg.Version, ConnID: c.id},
		Policy: protocol.HelloPolicy{
			MaxPayload:       s.cfg.MaxPayload,
			MaxBufferedBytes: s.cfg.MaxBufferedBytes,
			TickIntervalMs:   protocol.PingIntervalMs,
		},
		Auth: protocol.HelloAuth{Role: c.role, Scopes: c.scopes, ClientID: c.clientID},
	}
	if c.role == protocol.RoleNode {
		h.Features = protocol.HelloFeatures{
			Methods: []string{protocol.MethodInvokeResult, protocol.MethodModulesManifest, protocol.MethodModulesFetch},
			Events:  []string{protocol.EventInvokeRequest, protocol.EventInvokeCancel, protocol.EventModulesChanged},
		}
		h.Auth.NodeID = *nodeID
		nh := protocol.NodeHelloOK{HelloOK: h}
		if ms := s.modules.Load(); ms != nil {
			nh.ModuleSet = &protocol.ModuleSetRef{Digest: ms.Digest()}
		}
		return nh
	}
	h.Features = protocol.HelloFeatures{Methods: s.operatorMethods(), Events: []string{protocol.EventPairResolved,
		protocol.EventApprovalRequested, protocol.EventApprovalResolved, protocol.EventFanoutResult}}
	return h
}

// teardown runs once the connection has ended.
func (c *conn) teardown() {
	c.abandon()
	reason := ""
	if p := c.sentText.Load(); p != nil {
		reason = *p
	}
	reason = closeReason(reason, c.readErr)
	if c.connected {
		c.s.metrics.connections.WithLabelValues(c.role).Dec()
	}
	c.s.metrics.closes.WithLabelValues(c.roleLabel(), reason).Inc()
	if c.node != nil {
		c.s.reg.detach(c.node, c)
		if f := c.s.fed; f != nil {
			f.release(c.node.rec.ID, c)
		}
		c.s.log.Info("node disconnected", "conn", c.id, "node", c.node.rec.ID, "reason", reason)
	} else if c.connected {
		c.s.log.Info("operator disconnected", "conn", c.id, "operator", c.op.name, "reason", reason)
	} else {
		c.s.log.Debug("connection closed before connect", "conn", c.id, "addr", c.addr, "reason", reason)
	}
}

// logMethod is a method name fit for a log line: a registered or
// controller method as is, anything else (request content) as "other".
func logMethod(m string) string {
	if _, ok := protocol.LookupMethod(m); ok {
		return m
	}
	if _, ok := controllerMethods[m]; ok || nodeOnlyMethods[m] {
		return m
	}
	return "other"
}

// roleLabel is the connection's role, or "none" before connect.
func (c *conn) roleLabel() string {
	if !c.connected {
		return "none"
	}
	return c.role
}
