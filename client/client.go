// Package client is the Go client of the controller's /ws protocol
// (docs/PROTOCOL.md). One Conn is one WebSocket: Dial performs the connect /
// hello-ok handshake, then a single reader goroutine routes responses to
// their callers by request id and events to Options.OnEvent, and a single
// writer goroutine owns every write (frames, pings, the close frame), so
// any number of goroutines may Call concurrently on one socket.
//
// `lemon call`, the node worker (role node), tests and benchmarks all use it.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"lemon/protocol"
	"lemon/version"
)

// EnvelopeSlack is added to the peer's maxPayload for this side's read
// limit, in bytes: the peer's limit bounds a payload, and the frame around
// it (type, id, event name, seq) is a few dozen bytes more.
const EnvelopeSlack = 64 << 10

// MaxReadLimit caps the read limit Dial derives from the controller's
// maxPayload, in bytes: the largest maxPayload a controller policy allows
// (64 MiB) plus EnvelopeSlack. A hello-ok advertising more (or a value
// that would overflow) cannot make this side read unbounded frames.
const MaxReadLimit = 64<<20 + EnvelopeSlack

// readLimitFor is the read limit for a controller maxPayload in bytes.
func readLimitFor(maxPayload int) int64 {
	if maxPayload <= 0 || int64(maxPayload) > MaxReadLimit-EnvelopeSlack {
		return MaxReadLimit
	}
	return int64(maxPayload) + EnvelopeSlack
}

// Options configure Dial. Only Token is required.
type Options struct {
	// Role is protocol.RoleOperator (default) or protocol.RoleNode.
	Role string
	// Token is the bearer token sent in connect.auth.token. It is never
	// logged or included in an error.
	Token string
	// Scopes requested by an operator; empty asks for the token's scopes.
	Scopes []string
	// ClientID and ClientVersion identify the program (defaults
	// "lemon-client" and version.Version, the build's CalVer).
	ClientID      string
	ClientVersion string
	// Node is the advertisement of a node connection (role node only).
	Node *protocol.NodeAdvertise
	// OnEvent receives every event frame, in order, on the reader
	// goroutine. It must return quickly (start a goroutine for real work).
	OnEvent func(protocol.Event)
	// ExecutionContext, when set (a JSON object), is sent as the
	// executionContext member of every request: it narrows the context the
	// controller builds for each (docs/POLICY.md, "Narrowing a request's
	// context").
	ExecutionContext json.RawMessage
	// ReadLimit is the largest frame accepted from the controller, in
	// bytes. 0 means the controller's maxPayload plus EnvelopeSlack, at
	// most MaxReadLimit.
	ReadLimit int64
	// Dialer defaults to a websocket.Dialer with a 10 s handshake timeout.
	Dialer *websocket.Dialer
	// CAFile is a PEM bundle trusted for wss:// besides the system roots.
	// Empty means $LEMON_CA_FILE (EnvCAFile); when both are empty only the
	// system roots are trusted. It replaces the Dialer's RootCAs.
	CAFile string
	// Header is sent with the upgrade request.
	Header http.Header
	// HandshakeTimeout bounds dial plus connect/hello-ok (default 15 s).
	HandshakeTimeout time.Duration
	// WriteTimeout bounds one frame write (default 10 s).
	WriteTimeout time.Duration
	// PingInterval sends a WebSocket ping this often; 0 sends none.
	PingInterval time.Duration
	// IdleTimeout closes the connection when nothing (frame, ping or pong)
	// arrives for this long; 0 disables it.
	IdleTimeout time.Duration
}

// Conn is one connected, handshaken socket. All methods are safe for
// concurrent use.
type Conn struct {
	ws       *websocket.Conn
	hello    protocol.HelloOK
	helloRaw json.RawMessage
	opts     Options

	nextID atomic.Uint64

	mu      sync.Mutex
	pending map[string]chan protocol.Response
	err     error // why the connection ended; set once

	out        chan outFrame
	closing    chan struct{} // closed by Close
	done       chan struct{} // closed when both loops have finished
	once       sync.Once
	readerDone chan struct{}
}

type outFrame struct {
	data []byte
	sent chan error // optional, buffered 1
}

// ErrClosed is returned (wrapped) once the connection has ended.
var ErrClosed = errors.New("client: connection closed")

// Dial connects to url (ws:// or wss://), sends connect and waits for
// hello-ok. A refused handshake returns the controller's *protocol.Error
// (use errors.As); a transport failure returns a *DialError whose message
// is safe to print.
func Dial(ctx context.Context, url string, opts Options) (*Conn, error) {
	if opts.Role == "" {
		opts.Role = protocol.RoleOperator
	}
	if opts.ClientID == "" {
		opts.ClientID = "lemon-client"
	}
	if opts.ClientVersion == "" {
		opts.ClientVersion = version.Version
	}
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = 15 * time.Second
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	d := opts.Dialer
	if d == nil {
		d = &websocket.Dialer{HandshakeTimeout: 10 * time.Second, Proxy: http.ProxyFromEnvironment}
	}
	d, err := withCA(d, url, opts.CAFile)
	if err != nil {
		return nil, &DialError{URL: redactURL(url), Reason: err.Error(), Err: err}
	}
	hctx, cancel := context.WithTimeout(ctx, opts.HandshakeTimeout)
	defer cancel()

	ws, resp, err := d.DialContext(hctx, url, opts.Header)
	var dialErr *DialError
	if err != nil {
		dialErr = newDialError(url, resp, err)
	}
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, dialErr
	}
	// Make the handshake honour ctx and the handshake timeout.
	stop := context.AfterFunc(hctx, func() { ws.SetReadDeadline(time.Unix(1, 0)) })
	hello, helloRaw, err := handshake(ws, opts)
	if stopped := stop(); err != nil || !stopped {
		ws.Close()
		var pe *protocol.Error
		if hctx.Err() != nil && !errors.As(err, &pe) {
			reason := "handshake timed out"
			if errors.Is(hctx.Err(), context.Canceled) {
				reason = "handshake cancelled"
			}
			err = &DialError{URL: redactURL(url), Reason: reason, Err: hctx.Err()}
		}
		if de, ok := err.(*DialError); ok && de.URL == "" {
			de.URL = redactURL(url)
		}
		return nil, err
	}
	ws.SetReadDeadline(time.Time{})

	c := &Conn{
		ws:         ws,
		hello:      hello,
		helloRaw:   helloRaw,
		opts:       opts,
		pending:    map[string]chan protocol.Response{},
		out:        make(chan outFrame),
		closing:    make(chan struct{}),
		done:       make(chan struct{}),
		readerDone: make(chan struct{}),
	}
	c.nextID.Store(1) // "r1" was connect
	limit := opts.ReadLimit
	if limit <= 0 {
		limit = readLimitFor(c.MaxPayload())
	}
	ws.SetReadLimit(limit)
	if opts.IdleTimeout > 0 {
		extend := func() { ws.SetReadDeadline(time.Now().Add(opts.IdleTimeout)) }
		extend()
		ws.SetPongHandler(func(string) error { extend(); return nil })
		ws.SetPingHandler(func(data string) error {
			extend()
			err := ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(opts.WriteTimeout))
			if err != nil && !errors.Is(err, websocket.ErrCloseSent) {
				return err
			}
			return nil
		})
	}
	writerDone := make(chan struct{})
	go c.writeLoop(writerDone)
	go c.readLoop()
	go func() {
		<-c.readerDone
		<-writerDone
		close(c.done)
	}()
	return c, nil
}

// handshake sends connect as request r1 and reads frames until hello-ok
// or the connect response. Events before hello-ok are ignored.
func handshake(ws *websocket.Conn, opts Options) (protocol.HelloOK, json.RawMessage, error) {
	var hello protocol.HelloOK
	params, err := json.Marshal(protocol.ConnectParams{
		Role:   opts.Role,
		Auth:   protocol.ConnectAuth{Token: opts.Token},
		Scopes: opts.Scopes,
		Client: protocol.ConnectClient{ID: opts.ClientID, Version: opts.ClientVersion},
		Node:   opts.Node,
	})
	if err != nil {
		return hello, nil, err
	}
	frame, _ := json.Marshal(protocol.Request{Type: protocol.FrameReq, ID: "r1", Method: "connect", Params: params})
	ws.SetWriteDeadline(time.Now().Add(opts.WriteTimeout))
	if err := ws.WriteMessage(websocket.TextMessage, frame); err != nil {
		return hello, nil, &DialError{Reason: "connection lost during handshake", Err: err}
	}
	ws.SetWriteDeadline(time.Time{})
	ws.SetReadLimit(protocol.DefaultMaxPayload + EnvelopeSlack)
	for {
		mt, data, err := ws.ReadMessage()
		if err != nil {
			return hello, nil, &DialError{Reason: "connection lost during handshake", Err: err}
		}
		if mt != websocket.TextMessage {
			return hello, nil, &DialError{Reason: "controller sent a binary frame"}
		}
		var env protocol.Envelope
		if json.Unmarshal(data, &env) != nil {
			return hello, nil, &DialError{Reason: "controller sent a malformed frame"}
		}
		switch env.Type {
		case protocol.FrameHelloOK:
			if err := json.Unmarshal(data, &hello); err != nil {
				return hello, nil, &DialError{Reason: "controller sent a malformed hello-ok"}
			}
			return hello, data, nil
		case protocol.FrameRes:
			var res protocol.Response
			if err := json.Unmarshal(data, &res); err != nil {
				return hello, nil, &DialError{Reason: "controller sent a malformed response"}
			}
			if !res.OK {
				if res.Error == nil {
					return hello, nil, protocol.Errorf(protocol.CodeInternal, "connect refused without an error")
				}
				return hello, nil, res.Error
			}
			// Some servers wrap hello-ok in the connect response.
			if len(res.Payload) > 0 && json.Unmarshal(res.Payload, &hello) == nil && hello.Protocol != 0 {
				return hello, res.Payload, nil
			}
		}
	}
}

// Hello returns the controller's hello-ok frame.
func (c *Conn) Hello() protocol.HelloOK { return c.hello }

// HelloRaw returns the hello-ok frame as received, for fields beyond
// protocol.HelloOK (a node decodes protocol.NodeHelloOK from it).
func (c *Conn) HelloRaw() json.RawMessage { return c.helloRaw }

// MaxPayload is the largest frame, in bytes, the controller accepts
// (hello-ok policy.maxPayload; protocol.DefaultMaxPayload if it sent none).
func (c *Conn) MaxPayload() int {
	if c.hello.Policy.MaxPayload > 0 {
		return c.hello.Policy.MaxPayload
	}
	return protocol.DefaultMaxPayload
}

// Done is closed once the connection has ended and both loops stopped.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err reports why the connection ended (nil while it is open, ErrClosed
// after Close). When the controller sent a close frame, the error is a
// *DialError whose message names the code and reason (e.g. 1008 "slow
// consumer: ..."), and errors.As finds the *websocket.CloseError.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close sends a close frame, closes the socket and fails every pending
// call. It is idempotent and returns once both loops have stopped.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	<-c.done
	return nil
}

// fail records the first reason, fails pending calls and starts shutdown.
func (c *Conn) fail(reason error) {
	c.once.Do(func() {
		c.mu.Lock()
		c.err = reason
		pending := c.pending
		c.pending = nil
		c.mu.Unlock()
		for _, ch := range pending {
			close(ch)
		}
		close(c.closing)
	})
}

// CheckedJSON is params already known to be one valid JSON value (checked
// by protocol.CheckJSONLimits, or built from checked values by the
// protocol package's Append functions). Call appends it to the frame
// without checking it again; anything else is the caller's bug.
type CheckedJSON []byte

// Call sends request method with params and waits for its response. params
// may be nil, a json.RawMessage, a CheckedJSON, or any value json.Marshal
// accepts. It
// returns the response payload, or the error: the controller's, or a local
// one (UNAVAILABLE when the connection is lost, TIMEOUT when ctx ends,
// INVALID_PARAMS payload_too_large when the frame would exceed
// MaxPayload, in which case nothing was sent).
func (c *Conn) Call(ctx context.Context, method string, params any) (json.RawMessage, *protocol.Error) {
	var raw json.RawMessage
	marshalled := false
	switch p := params.(type) {
	case nil:
	case json.RawMessage:
		raw = p
	case []byte:
		raw = p
	case CheckedJSON:
		raw, marshalled = json.RawMessage(p), true
	default:
		b, err := json.Marshal(p)
		if err != nil {
			return nil, protocol.InvalidParams("", "params cannot be encoded as JSON")
		}
		raw, marshalled = b, true
	}
	id := "r" + strconv.FormatUint(c.nextID.Add(1), 10)
	frame, err := requestFrame(id, method, raw, marshalled)
	if err == nil && len(c.opts.ExecutionContext) > 0 {
		frame, err = json.Marshal(protocol.Request{Type: protocol.FrameReq, ID: id, Method: method, Params: raw,
			ExecutionContext: c.opts.ExecutionContext})
	}
	if err != nil {
		return nil, protocol.InvalidParams("", "params are not valid JSON")
	}
	if len(frame) > c.MaxPayload() {
		return nil, protocol.DomainError(protocol.CodeInvalidParams, protocol.DomainPayloadTooLarge,
			"request exceeds the controller's maxPayload")
	}
	ch := make(chan protocol.Response, 1)
	c.mu.Lock()
	if c.pending == nil {
		c.mu.Unlock()
		return nil, c.lostError()
	}
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		if c.pending != nil {
			delete(c.pending, id)
		}
		c.mu.Unlock()
	}

	select {
	case c.out <- outFrame{data: frame}:
	case <-c.closing:
		return nil, c.lostError()
	case <-ctx.Done():
		forget()
		return nil, ctxError(ctx)
	}
	select {
	case res, ok := <-ch:
		if !ok {
			return nil, c.lostError()
		}
		if !res.OK {
			if res.Error == nil {
				return nil, protocol.Errorf(protocol.CodeInternal, "error response without an error object")
			}
			return nil, res.Error
		}
		if res.Payload == nil {
			return json.RawMessage("null"), nil
		}
		return res.Payload, nil
	case <-ctx.Done():
		forget()
		return nil, ctxError(ctx)
	}
}

func connLost() *protocol.Error {
	e := protocol.DomainError(protocol.CodeUnavailable, "connection_lost", "connection to the controller was lost")
	return e
}

// lostError is connLost with, when the controller closed the socket with
// a close frame, its code and reason in the message (for example
// "... (closed by the controller: 1008 slow consumer: ...)").
func (c *Conn) lostError() *protocol.Error {
	e := connLost()
	var ce *websocket.CloseError
	if err := c.Err(); err != nil && errors.As(err, &ce) {
		e.Message += " (" + closeReason(ce) + ")"
	}
	return e
}

// closeReason describes a close frame: "closed by the controller: CODE
// REASON", the reason (at most 123 bytes by the WebSocket protocol) with
// anything but printable ASCII replaced by '?', so it is safe to print.
func closeReason(ce *websocket.CloseError) string {
	text := []byte(ce.Text)
	if len(text) > 123 {
		text = text[:123]
	}
	for i, b := range text {
		if b < 0x20 || b > 0x7e {
			text[i] = '?'
		}
	}
	r := "closed by the controller: " + strconv.Itoa(ce.Code)
	if len(text) > 0 {
		r += " " + string(text)
	}
	return r
}

func ctxError(ctx context.Context) *protocol.Error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return protocol.Errorf(protocol.CodeTimeout, "request timed out waiting for the controller")
	}
	return protocol.Errorf(protocol.CodeUnavailable, "request cancelled")
}

func (c *Conn) writeLoop(done chan struct{}) {
	defer close(done)
	var tick <-chan time.Time
	if c.opts.PingInterval > 0 {
		t := time.NewTicker(c.opts.PingInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case f := <-c.out:
			c.ws.SetWriteDeadline(time.Now().Add(c.opts.WriteTimeout))
			err := c.ws.WriteMessage(websocket.TextMessage, f.data)
			if f.sent != nil {
				f.sent <- err
			}
			if err != nil {
				c.fail(&DialError{Reason: "write to controller failed", Err: err})
				c.ws.Close()
				<-c.readerDone
				return
			}
		case <-tick:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.opts.WriteTimeout)); err != nil {
				c.fail(&DialError{Reason: "ping to controller failed", Err: err})
				c.ws.Close()
				<-c.readerDone
				return
			}
		case <-c.closing:
			msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
			c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
			c.ws.Close()
			<-c.readerDone
			return
		}
	}
}

func (c *Conn) readLoop() {
	defer close(c.readerDone)
	for {
		mt, data, err := c.ws.ReadMessage()
		if err != nil {
			reason := "connection to controller lost"
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				reason = "connection " + closeReason(ce)
			}
			c.fail(&DialError{Reason: reason, Err: err})
			return
		}
		if c.opts.IdleTimeout > 0 {
			c.ws.SetReadDeadline(time.Now().Add(c.opts.IdleTimeout))
		}
		if mt != websocket.TextMessage {
			c.fail(&DialError{Reason: "controller sent a binary frame"})
			return
		}
		kind, res, ev, ok := decodeFrame(data)
		if !ok {
			continue
		}
		switch kind {
		case protocol.FrameRes:
			c.mu.Lock()
			ch, ok := c.pending[res.ID]
			if ok {
				delete(c.pending, res.ID)
			}
			c.mu.Unlock()
			if ok {
				ch <- res
			}
		case protocol.FrameEvent:
			if c.opts.OnEvent == nil {
				continue
			}
			c.opts.OnEvent(ev)
		}
	}
}

// requestFrame builds the frame json.Marshal(protocol.Request{...}) would,
// with the same error for params that are not valid JSON. Params that
// pass protocol.CheckJSONLimits (or come from json.Marshal, marshalled)
// are appended rather than compacted again: a 1 MiB chunk is scanned once.
func requestFrame(id, method string, params json.RawMessage, marshalled bool) ([]byte, error) {
	if len(params) > 0 && !marshalled && protocol.CheckJSONLimits(params) != nil {
		return json.Marshal(protocol.Request{Type: protocol.FrameReq, ID: id, Method: method, Params: params})
	}
	return protocol.AppendRequest(nil, id, method, params)
}

// decodeFrame reads a frame as json.Unmarshal into protocol.Envelope and
// then into protocol.Response (kind "res") or protocol.Event (kind
// "event") would; ok is false where either would fail. A frame within the
// protocol's JSON limits is split instead (protocol.SplitObject): the
// payload is not scanned again and aliases data. Any other frame, which
// the controller never sends, takes encoding/json as before.
func decodeFrame(data []byte) (kind string, res protocol.Response, ev protocol.Event, ok bool) {
	if protocol.CheckJSONLimits(data) != nil {
		var env protocol.Envelope
		if json.Unmarshal(data, &env) != nil {
			return "", res, ev, false
		}
		ok = true
		switch env.Type {
		case protocol.FrameRes:
			ok = json.Unmarshal(data, &res) == nil
		case protocol.FrameEvent:
			ok = json.Unmarshal(data, &ev) == nil
		}
		return env.Type, res, ev, ok
	}
	ms, err := protocol.SplitObject(data)
	if err != nil {
		return "", res, ev, false // a JSON value that is not an object
	}
	env, err := protocol.DecodeEnvelope(ms)
	if err != nil {
		return "", res, ev, false
	}
	switch env.Type {
	case protocol.FrameRes:
		res, err = protocol.DecodeResponse(ms)
	case protocol.FrameEvent:
		ev, err = protocol.DecodeEvent(ms)
	}
	return env.Type, res, ev, err == nil
}
