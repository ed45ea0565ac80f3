// Package fakecontrol is a small in-process stand-in for the controller's
// /ws endpoint, for tests of the client and the node worker (after
// Tailscale's testcontrol). It speaks the real frames of docs/PROTOCOL.md:
// connect with a token check, hello-ok with policy.maxPayload and an
// optional pinned module set, responses, and events with per-connection
// seq. Tests drive node connections directly (SendEvent) and see what
// nodes answer (Results).
//
// It is test support, not a controller: no scopes, routing or registry.
package fakecontrol

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"lemon/protocol"
)

// Handler answers one request of a connected peer.
type Handler func(c *Conn, req protocol.Request) (any, *protocol.Error)

// Options configure a Server.
type Options struct {
	// OperatorToken and NodeToken are accepted for their roles; empty
	// refuses the role.
	OperatorToken string
	NodeToken     string
	// MaxPayload is advertised in hello-ok and is the read limit (default
	// protocol.DefaultMaxPayload).
	MaxPayload int
	// ModuleSet, when set, is sent in a node's hello-ok.
	ModuleSet *protocol.ModuleSetRef
	// Handle answers requests other than connect and node.invoke.result.
	Handle Handler
	// AuthNodeID, when set, is the nodeId hello-ok reports for every node
	// (default: the advertised one).
	AuthNodeID string
	// ConnectHook may refuse a connect after the token check.
	ConnectHook func(p protocol.ConnectParams) *protocol.Error
	// TLS, when set, serves wss:// with this configuration.
	TLS *tls.Config
}

// Server is a running fake controller on 127.0.0.1.
type Server struct {
	URL  string // ws://127.0.0.1:PORT/ws (wss:// with Options.TLS)
	opts Options
	hs   *httptest.Server

	// Nodes receives every node connection after its hello-ok.
	Nodes chan *Conn
	// Results receives every node.invoke.result request's params.
	Results chan protocol.InvokeResult

	connects atomic.Int64
	mu       sync.Mutex
	conns    map[*Conn]bool
}

// New starts a server; Close stops it.
func New(opts Options) *Server {
	if opts.MaxPayload <= 0 {
		opts.MaxPayload = protocol.DefaultMaxPayload
	}
	s := &Server{
		opts:    opts,
		Nodes:   make(chan *Conn, 64),
		Results: make(chan protocol.InvokeResult, 1024),
		conns:   map[*Conn]bool{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", s.serveWS)
	s.hs = httptest.NewUnstartedServer(mux)
	if opts.TLS != nil {
		s.hs.TLS = opts.TLS
		s.hs.StartTLS()
	} else {
		s.hs.Start()
	}
	s.URL = "ws" + strings.TrimPrefix(s.hs.URL, "http") + "/ws"
	return s
}

// Connects counts connect attempts (accepted or not).
func (s *Server) Connects() int64 { return s.connects.Load() }

// Close closes every connection and stops the listener.
func (s *Server) Close() {
	s.DropAll()
	s.hs.Close()
}

// DropAll closes every live connection abruptly, like a controller crash.
func (s *Server) DropAll() {
	s.mu.Lock()
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.ws.Close()
	}
}

// Conn is one accepted connection.
type Conn struct {
	Connect protocol.ConnectParams
	ws      *websocket.Conn
	wmu     sync.Mutex
	seq     uint64
	// Done is closed when the connection ends.
	Done chan struct{}
}

// SendEvent writes an event frame with the next seq.
func (c *Conn) SendEvent(event string, payload any) error {
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.seq++
	return c.ws.WriteJSON(protocol.Event{Type: protocol.FrameEvent, Event: event, Seq: c.seq, Payload: b})
}

// SendRaw writes one text frame as is.
func (c *Conn) SendRaw(data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ws.WriteMessage(websocket.TextMessage, data)
}

// Close closes the socket.
func (c *Conn) Close() { c.ws.Close() }

// CloseWith sends a close frame with code and reason, then closes the socket.
func (c *Conn) CloseWith(code int, reason string) {
	c.wmu.Lock()
	c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(5*time.Second))
	c.wmu.Unlock()
	c.ws.Close()
}

func (c *Conn) write(v any) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteJSON(v)
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &Conn{ws: ws, Done: make(chan struct{})}
	s.mu.Lock()
	s.conns[c] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		ws.Close()
		close(c.Done)
	}()
	ws.SetReadLimit(int64(s.opts.MaxPayload))
	connected := false
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		req, err := parseRequest(data)
		if err != nil || req.Type != protocol.FrameReq {
			c.write(protocol.ErrResponse(protocol.UnknownID, protocol.Errorf(protocol.CodeInvalidRequest, "malformed frame")))
			continue
		}
		if !connected {
			if req.Method != protocol.MethodConnect {
				c.write(protocol.ErrResponse(req.ID, protocol.Errorf(protocol.CodeHandshakeRequired, "connect first")))
				continue
			}
			s.connects.Add(1)
			hello, perr := s.connect(c, req.Params)
			if perr != nil {
				c.write(protocol.ErrResponse(req.ID, perr))
				return
			}
			c.write(hello)
			connected = true
			if c.Connect.Role == protocol.RoleNode {
				s.Nodes <- c
			}
			continue
		}
		go s.answer(c, req)
	}
}

func (s *Server) connect(c *Conn, params json.RawMessage) (any, *protocol.Error) {
	if perr := protocol.DecodeParams(params, &c.Connect); perr != nil {
		return nil, perr
	}
	want := s.opts.OperatorToken
	if c.Connect.Role == protocol.RoleNode {
		want = s.opts.NodeToken
	}
	if want == "" || c.Connect.Auth.Token != want {
		return nil, protocol.Errorf(protocol.CodeUnauthorized, "authentication failed")
	}
	if s.opts.ConnectHook != nil {
		if perr := s.opts.ConnectHook(c.Connect); perr != nil {
			return nil, perr
		}
	}
	hello := protocol.NodeHelloOK{HelloOK: protocol.HelloOK{
		Type:     protocol.FrameHelloOK,
		Protocol: protocol.ProtocolVersion,
		Server:   protocol.HelloServer{Version: "fake", ConnID: "c" + strconv.FormatInt(s.connects.Load(), 10)},
		Policy:   protocol.HelloPolicy{MaxPayload: s.opts.MaxPayload, TickIntervalMs: 15000},
		Auth:     protocol.HelloAuth{Role: c.Connect.Role, Scopes: c.Connect.Scopes, ClientID: c.Connect.Client.ID},
	}}
	if c.Connect.Role == protocol.RoleNode {
		hello.ModuleSet = s.opts.ModuleSet
		if c.Connect.Node != nil {
			hello.Auth.NodeID = c.Connect.Node.NodeID
		}
		if s.opts.AuthNodeID != "" {
			hello.Auth.NodeID = s.opts.AuthNodeID
		}
	}
	return hello, nil
}

func (s *Server) answer(c *Conn, req protocol.Request) {
	var (
		payload any
		perr    *protocol.Error
	)
	switch {
	case req.Method == protocol.MethodInvokeResult:
		var r protocol.InvokeResult
		if perr = protocol.DecodeParams(req.Params, &r); perr == nil {
			s.Results <- r
			payload = protocol.NodeInvokeResultAck{Accepted: true}
		}
	case s.opts.Handle != nil:
		payload, perr = s.opts.Handle(c, req)
	default:
		perr = protocol.Errorf(protocol.CodeMethodNotFound, "unknown method")
	}
	if perr != nil {
		c.write(protocol.ErrResponse(req.ID, perr))
		return
	}
	b, err := json.Marshal(payload)
	if err == nil {
		b, err = protocol.AppendOKResponse(nil, req.ID, b)
	}
	if err != nil {
		c.write(protocol.ErrResponse(req.ID, protocol.Errorf(protocol.CodeInternal, "encode")))
		return
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	c.ws.WriteMessage(websocket.TextMessage, b)
}

// parseRequest reads a frame as json.Unmarshal into protocol.Request
// would; a frame within the protocol's JSON limits is split instead, so a
// benchmark's 1 MiB chunks are not scanned twice here.
func parseRequest(data []byte) (protocol.Request, error) {
	var req protocol.Request
	if protocol.CheckJSONLimits(data) != nil {
		err := json.Unmarshal(data, &req)
		return req, err
	}
	ms, err := protocol.SplitObject(data)
	if err != nil {
		return req, err
	}
	return protocol.DecodeRequest(ms)
}

// NextNode waits for the next node connection.
func (s *Server) NextNode(ctx context.Context) (*Conn, error) {
	select {
	case c := <-s.Nodes:
		return c, nil
	case <-ctx.Done():
		return nil, errors.New("fakecontrol: no node connected")
	}
}

// NextResult waits for the next node.invoke.result.
func (s *Server) NextResult(ctx context.Context) (protocol.InvokeResult, error) {
	select {
	case r := <-s.Results:
		return r, nil
	case <-ctx.Done():
		return protocol.InvokeResult{}, errors.New("fakecontrol: no result")
	}
}
