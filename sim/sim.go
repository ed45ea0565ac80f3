// Package sim is a node simulator: lean fake nodes that speak the real
// controller protocol (docs/PROTOCOL.md) for benchmarks and tests. Each
// node pairs once through the controller (Pair, with a token holding
// operator.admin, so the pairing is approved at once) and then connects
// with its session token as role "node", answers node.invoke.request
// events with canned results, keeps its socket alive with pings and
// reconnects with full-jitter backoff (the worker's schedule,
// worker/backoff.go). A node is one goroutine and one WebSocket with
// small buffers (no wazero, no module set), so one process holds
// thousands. Nodes spread their sockets over several loopback source
// addresses (127.0.0.x) to get past the ephemeral-port limit of one
// address. Each node can be told to be slow, to hang (stay connected and
// never answer), to flap (disconnect and reconnect) or to vanish (drop
// its socket and stay away).
//
// Use Pair to enrol nodes, Start to run them, Fleet.Wait to wait until
// they are online and Fleet.Close to stop. See docs/SCALE.md.
package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"lemon/client"
	"lemon/protocol"
)

// Credential is one paired simulated node: its durable id, name and the
// session token it connects with. It is secret material: keep it out of
// logs.
type Credential struct {
	NodeID       string `json:"nodeId"`
	Name         string `json:"name"`
	SessionToken string `json:"sessionToken"`
}

// DefaultMethods is what a simulated node advertises by default.
var DefaultMethods = map[string]int{"node.host.info": 1}

// Options configure Pair and Start. URL (ws://host:port/ws) or URLs is
// required.
type Options struct {
	URL string
	// URLs, when set, are several controllers' URLs: node i first dials
	// URLs[i % len], and moves to the next URL after each failed attempt
	// or lost connection (failover). Pair uses URLs[0] when URL is empty.
	URLs []string
	// AdminToken is an operator token holding operator.admin (Pair only).
	AdminToken string
	// SourceAddrs are local IPs the nodes' sockets are bound to, node i
	// using SourceAddrs[i % len]. Empty: the system chooses (one address).
	// LoopbackSources(k) gives 127.0.0.1..127.0.0.k.
	SourceAddrs []net.IP
	// Methods advertised (default DefaultMethods).
	Methods map[string]int
	// Results maps a method to its canned JSON result; a method without
	// one answers HostInfo-like {"hostname":NAME,"os":"linux","sim":true}.
	Results map[string]json.RawMessage
	// Parallel bounds concurrent pairings and initial connects (default 64).
	Parallel int
	// BackoffInitial and BackoffMax shape reconnects (defaults 500 ms and
	// 30 s, as the worker).
	BackoffInitial, BackoffMax time.Duration
	// PingInterval (default 25 s, the controller's tick).
	PingInterval time.Duration
	// OnInvoke, when set, is called with every invocation a node receives
	// (before it answers), from the node's read goroutine: a benchmark
	// counts deliveries per invokeId with it.
	OnInvoke func(n *Node, invokeID string)
}

func (o *Options) defaults() {
	if o.URL == "" && len(o.URLs) > 0 {
		o.URL = o.URLs[0]
	}
	if o.Methods == nil {
		o.Methods = DefaultMethods
	}
	if o.Parallel <= 0 {
		o.Parallel = 64
	}
	if o.BackoffInitial <= 0 {
		o.BackoffInitial = 500 * time.Millisecond
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 30 * time.Second
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 25 * time.Second
	}
}

// LoopbackSources returns 127.0.0.1 .. 127.0.0.k (k in 1..254).
func LoopbackSources(k int) []net.IP {
	k = max(1, min(k, 254))
	out := make([]net.IP, k)
	for i := range out {
		out[i] = net.IPv4(127, 0, 0, byte(i+1))
	}
	return out
}

// bufPool is shared by every simulated socket's writer.
var bufPool = &sync.Pool{}

func (o *Options) dialer(i int) *websocket.Dialer {
	d := &websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 1024,
		WriteBufferSize: 1024, WriteBufferPool: bufPool}
	if len(o.SourceAddrs) > 0 {
		nd := &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: o.SourceAddrs[i%len(o.SourceAddrs)]}}
		d.NetDialContext = nd.DialContext
	}
	return d
}

// Pair enrols len(names) nodes through node.pair.request (approved at
// once for an admin credential) and connect.challenge, Parallel at a
// time over one operator connection, and returns their credentials in
// the order of names. It stops at the first failure.
func Pair(ctx context.Context, o Options, names []string) ([]Credential, error) {
	o.defaults()
	op, err := client.Dial(ctx, o.URL, client.Options{Token: o.AdminToken, ClientID: "lemon-sim", Dialer: o.dialer(0)})
	if err != nil {
		return nil, fmt.Errorf("sim: operator connect: %w", err)
	}
	defer op.Close()
	out := make([]Credential, len(names))
	sem := make(chan struct{}, min(o.Parallel, 16)) // a credential holds at most 32 live pairings
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		ferr error
	)
	for i, name := range names {
		sem <- struct{}{}
		mu.Lock()
		stop := ferr != nil
		mu.Unlock()
		if stop {
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			c, err := pairOne(ctx, op, name, o.Methods)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && ferr == nil {
				ferr = fmt.Errorf("sim: pairing %q: %w", name, err)
			}
			out[i] = c
		}()
	}
	wg.Wait()
	if ferr != nil {
		return nil, ferr
	}
	return out, nil
}

func pairOne(ctx context.Context, op *client.Conn, name string, methods map[string]int) (Credential, error) {
	raw, perr := op.Call(ctx, protocol.MethodPairRequest, protocol.PairRequestParams{
		Name: name, NodeType: protocol.NodeTypeExecution, Methods: methods})
	if perr != nil {
		return Credential{}, perr
	}
	var pr protocol.PairRequestResult
	if err := json.Unmarshal(raw, &pr); err != nil {
		return Credential{}, err
	}
	if pr.Challenge == "" {
		return Credential{}, errors.New("pairing not approved at once (the token needs operator.admin)")
	}
	raw, perr = op.Call(ctx, protocol.MethodConnectChallenge, protocol.ConnectChallengeParams{
		PairingID: pr.PairingID, Challenge: pr.Challenge})
	if perr != nil {
		return Credential{}, perr
	}
	var cr protocol.ConnectChallengeResult
	if err := json.Unmarshal(raw, &cr); err != nil {
		return Credential{}, err
	}
	return Credential{NodeID: cr.NodeID, Name: cr.Name, SessionToken: cr.SessionToken}, nil
}

// Fleet is a set of running simulated nodes.
type Fleet struct {
	o      Options
	nodes  []*Node
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	online atomic.Int64
}

// Node is one simulated node. Its methods are safe for concurrent use.
type Node struct {
	f    *Fleet
	i    int
	cred Credential

	slow     atomic.Int64 // ns to wait before answering
	hang     atomic.Bool  // never answer
	vanished atomic.Bool
	refused  atomic.Pointer[protocol.Error]
	calls    atomic.Int64 // invocations received
	online   atomic.Bool

	mu   sync.Mutex // guards ws writes and ws
	ws   *websocket.Conn
	wake chan struct{} // cap 1: reconnect now (flap, revive)
	url  int           // index into Options.URLs of the next dial
	// connectedURL is the URL of the live (or last) connection.
	connectedURL atomic.Pointer[string]
}

// Start runs one node per credential and returns at once; nodes connect
// Parallel at a time and then keep reconnecting until Close.
func Start(ctx context.Context, o Options, creds []Credential) *Fleet {
	o.defaults()
	f := &Fleet{o: o, nodes: make([]*Node, len(creds))}
	f.ctx, f.cancel = context.WithCancel(ctx)
	gate := make(chan struct{}, o.Parallel)
	for i, c := range creds {
		n := &Node{f: f, i: i, cred: c, wake: make(chan struct{}, 1)}
		if len(o.URLs) > 0 {
			n.url = i % len(o.URLs)
		}
		f.nodes[i] = n
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			n.run(gate)
		}()
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		f.pinger()
	}()
	return f
}

// Nodes returns the fleet's nodes, in credential order.
func (f *Fleet) Nodes() []*Node { return f.nodes }

// Online is the number of nodes whose connect was answered hello-ok and
// whose socket is still up.
func (f *Fleet) Online() int { return int(f.online.Load()) }

// Wait polls until at least n nodes are online; false when ctx ends first.
func (f *Fleet) Wait(ctx context.Context, n int) bool {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for f.Online() < n {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// Close stops every node and waits for their goroutines.
func (f *Fleet) Close() {
	f.cancel()
	for _, n := range f.nodes {
		n.drop()
	}
	f.wg.Wait()
}

// pinger sends every live socket a WebSocket ping each PingInterval,
// spread over the interval.
func (f *Fleet) pinger() {
	t := time.NewTicker(f.o.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-t.C:
		}
		for _, n := range f.nodes {
			n.mu.Lock()
			ws := n.ws
			n.mu.Unlock()
			if ws != nil {
				ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(5*time.Second))
			}
		}
	}
}

// Credential returns the node's credential.
func (n *Node) Credential() Credential { return n.cred }

// URL is the controller URL the node dialed last (that of its live
// connection while Online), or "".
func (n *Node) URL() string {
	if p := n.connectedURL.Load(); p != nil {
		return *p
	}
	return ""
}

// Online reports whether the node is connected now.
func (n *Node) Online() bool { return n.online.Load() }

// Calls is the number of invocations the node received.
func (n *Node) Calls() int64 { return n.calls.Load() }

// Refused is the error that made the node stop reconnecting (a refused
// connect: session revoked or expired), or nil.
func (n *Node) Refused() *protocol.Error { return n.refused.Load() }

// SetSlow makes the node wait d before each answer (0: answer at once).
func (n *Node) SetSlow(d time.Duration) { n.slow.Store(int64(d)) }

// SetHang makes the node stay connected and never answer (true) or answer
// again (false; calls received meanwhile stay unanswered).
func (n *Node) SetHang(h bool) { n.hang.Store(h) }

// Flap drops the node's socket without a close frame; it reconnects at
// once (then with backoff if the controller refuses).
func (n *Node) Flap() {
	n.drop()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// Vanish drops the node's socket without a close frame and keeps it away
// until Revive.
func (n *Node) Vanish() {
	n.vanished.Store(true)
	n.drop()
}

// Revive lets a vanished node reconnect.
func (n *Node) Revive() {
	n.vanished.Store(false)
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *Node) drop() {
	n.mu.Lock()
	ws := n.ws
	n.mu.Unlock()
	if ws != nil {
		ws.NetConn().Close()
	}
}

func (n *Node) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-n.f.ctx.Done():
		return false
	case <-n.wake:
		return true
	case <-t.C:
		return true
	}
}

// run connects, serves, and reconnects with full-jitter backoff until the
// fleet closes or the controller refuses the credential.
func (n *Node) run(gate chan struct{}) {
	rnd := rand.New(rand.NewPCG(uint64(n.i), uint64(time.Now().UnixNano())))
	first := true
	attempt := 0
	for n.f.ctx.Err() == nil {
		if n.vanished.Load() {
			if !n.sleep(time.Hour) {
				return
			}
			continue
		}
		if first {
			select {
			case gate <- struct{}{}:
			case <-n.f.ctx.Done():
				return
			}
		}
		ws, err := n.connect()
		if first {
			<-gate
			first = false
		}
		if err != nil {
			var pe *protocol.Error
			if errors.As(err, &pe) && pe.Code == protocol.CodeUnauthorized {
				n.refused.Store(pe)
				return
			}
			c := n.f.o.BackoffInitial
			for k := 0; k < attempt && c < n.f.o.BackoffMax; k++ {
				c *= 2
			}
			c = min(c, n.f.o.BackoffMax)
			attempt++
			if !n.sleep(time.Duration(rnd.Int64N(int64(c) + 1))) {
				return
			}
			continue
		}
		attempt = 0
		n.serve(ws)
		// A lost connection reconnects after a short jittered pause, as a
		// worker's first attempt does.
		if !n.sleep(time.Duration(rnd.Int64N(int64(n.f.o.BackoffInitial) + 1))) {
			return
		}
	}
}

type frame struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	OK      bool            `json:"ok"`
	Event   string          `json:"event"`
	Payload json.RawMessage `json:"payload"`
	Error   *protocol.Error `json:"error"`
}

// connect dials and handshakes; the error is a *protocol.Error when the
// controller answered the connect with one.
func (n *Node) connect() (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(n.f.ctx, 15*time.Second)
	defer cancel()
	url := n.f.o.URL
	if len(n.f.o.URLs) > 0 {
		// Each attempt moves on to the next URL, so a lost controller's
		// nodes fail over to the others.
		url = n.f.o.URLs[n.url%len(n.f.o.URLs)]
		n.url++
	}
	n.connectedURL.Store(&url)
	ws, resp, err := n.f.o.dialer(n.i).DialContext(ctx, url, nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(int64(protocol.DefaultMaxPayload) + 64<<10)
	req, _ := json.Marshal(protocol.Request{Type: protocol.FrameReq, ID: "c1", Method: protocol.MethodConnect,
		Params: mustJSON(protocol.ConnectParams{Role: protocol.RoleNode, Auth: protocol.ConnectAuth{Token: n.cred.SessionToken},
			Client: protocol.ConnectClient{ID: "lemon-sim", Version: "sim"},
			Node: &protocol.NodeAdvertise{NodeID: n.cred.NodeID, Methods: n.f.o.Methods,
				MaxPayload: protocol.DefaultMaxPayload, Capabilities: []string{"all"}}})})
	ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := ws.WriteMessage(websocket.TextMessage, req); err != nil {
		ws.Close()
		return nil, err
	}
	ws.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			ws.Close()
			return nil, err
		}
		var f frame
		if json.Unmarshal(data, &f) != nil {
			continue
		}
		if f.Type == protocol.FrameHelloOK {
			break
		}
		if f.Type == protocol.FrameRes && f.ID == "c1" && !f.OK {
			ws.Close()
			if f.Error == nil {
				return nil, errors.New("connect refused")
			}
			return nil, f.Error
		}
	}
	ws.SetReadDeadline(time.Time{})
	ws.SetWriteDeadline(time.Time{})
	n.mu.Lock()
	n.ws = ws
	n.mu.Unlock()
	return ws, nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// serve reads the socket until it fails, answering invocations.
func (n *Node) serve(ws *websocket.Conn) {
	n.online.Store(true)
	n.f.online.Add(1)
	defer func() {
		n.online.Store(false)
		n.f.online.Add(-1)
		n.mu.Lock()
		if n.ws == ws {
			n.ws = nil
		}
		n.mu.Unlock()
		ws.Close()
	}()
	stop := context.AfterFunc(n.f.ctx, func() { ws.NetConn().Close() })
	defer stop()
	var seq atomic.Uint64
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var f frame
		if json.Unmarshal(data, &f) != nil || f.Type != protocol.FrameEvent || f.Event != protocol.EventInvokeRequest {
			continue // acks, cancels, module-set changes
		}
		var in protocol.InvokeRequest
		if json.Unmarshal(f.Payload, &in) != nil {
			continue
		}
		n.calls.Add(1)
		if on := n.f.o.OnInvoke; on != nil {
			on(n, in.InvokeID)
		}
		if n.hang.Load() {
			continue
		}
		out := protocol.InvokeResult{InvokeID: in.InvokeID}
		if r, ok := n.f.o.Results[in.Method]; ok {
			out.Result = r
		} else if _, ok := n.f.o.Methods[in.Method]; ok {
			out.Result = mustJSON(map[string]any{"hostname": n.cred.Name, "os": "linux", "arch": "amd64", "sim": true})
		} else {
			out.Error = protocol.Errorf(protocol.CodeMethodNotFound, "unknown method")
		}
		frameID := fmt.Sprintf("r%d", seq.Add(1))
		b, _ := json.Marshal(protocol.Request{Type: protocol.FrameReq, ID: frameID, Method: protocol.MethodInvokeResult, Params: mustJSON(out)})
		if d := time.Duration(n.slow.Load()); d > 0 {
			time.AfterFunc(d, func() { n.write(ws, b) })
			continue
		}
		n.write(ws, b)
	}
}

func (n *Node) write(ws *websocket.Conn, b []byte) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ws != ws {
		return
	}
	ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if ws.WriteMessage(websocket.TextMessage, b) != nil {
		ws.NetConn().Close()
	}
}
