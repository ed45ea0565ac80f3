package controller

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"lemon/hostcalls/datadial"
	"lemon/protocol"
)

// Bulk data connections (docs/PROTOCOL.md, "Bulk data connections";
// docs/RATIONALE.md, "Bulk transfers take their own connection"). A
// transfer request (node.fs.transfer.get/.put) is routed like any node
// method. Before it is sent, the controller registers a rendezvous under
// the request's transferKey (the sha256 of a 32-byte secret only the
// caller knows) and adds a fresh one-time dataTicket for the node. The
// caller then opens <ws url>/data presenting the secret, the node opens it
// presenting the ticket, and the controller pipes the two sockets'
// messages to each other until either side closes or the request ends.
// Each side is its own TCP connection, so TCP's window is the flow
// control: a transfer never queues behind or in front of the node's
// control frames, and the relay holds two fixed buffers per transfer.

// dataBufferBytes is the read and write buffer of one data socket; the
// relay copies each message straight from one socket's read into the
// other's write buffer (gorilla's messageWriter.ReadFrom), so a transfer
// holds at most 4 × dataBufferBytes in the controller.
const dataBufferBytes = 256 << 10

type rendezvous struct {
	caller      chan *websocket.Conn // buffered 1: the caller's socket once attached
	callerTaken bool
	nodeTaken   bool
	done        chan struct{} // closed when the request ends
}

// transferHub holds the rendezvous of transfer requests in flight.
type transferHub struct {
	mu       sync.Mutex
	byKey    map[string]*rendezvous // transferKey (hex sha256 of the caller's secret)
	byTicket map[string]*rendezvous // hex sha256 of the node's ticket
	changed  chan struct{}          // closed and replaced on each registration
	waiting  int                    // caller sockets waiting for their request
	active   map[*websocket.Conn]struct{}
	closed   bool
	upgrader websocket.Upgrader
}

func newTransferHub() *transferHub {
	return &transferHub{byKey: map[string]*rendezvous{}, byTicket: map[string]*rendezvous{},
		changed: make(chan struct{}), active: map[*websocket.Conn]struct{}{},
		upgrader: websocket.Upgrader{ReadBufferSize: dataBufferBytes, WriteBufferSize: dataBufferBytes}}
}

func isTransferMethod(m string) bool {
	return m == protocol.MethodFSTransferGet || m == protocol.MethodFSTransferPut
}

func transferHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// open registers the rendezvous of a transfer request and returns its
// params with the node's dataTicket added, and the function that ends the
// rendezvous once the request is answered. A caller may not name the
// ticket itself, and one transferKey serves one request at a time.
func (th *transferHub) open(params json.RawMessage) (json.RawMessage, func(), *protocol.Error) {
	ms, err := protocol.SplitObject(params)
	if err != nil {
		return nil, nil, protocol.InvalidParams("", "params must be a JSON object")
	}
	if _, ok := protocol.LookupMember(ms, "dataTicket"); ok {
		return nil, nil, protocol.InvalidParams("dataTicket", "dataTicket is set by the controller")
	}
	var key string
	raw, ok := protocol.LookupMember(ms, "transferKey")
	if !ok || json.Unmarshal(raw, &key) != nil || !protocol.ValidTransferSecret(key) {
		return nil, nil, protocol.InvalidParams("transferKey", "transferKey must be 64 lowercase hex digits")
	}
	var b [32]byte
	rand.Read(b[:])
	ticket := hex.EncodeToString(b[:])
	rv := &rendezvous{caller: make(chan *websocket.Conn, 1), done: make(chan struct{})}
	th.mu.Lock()
	if _, dup := th.byKey[key]; dup || th.closed {
		th.mu.Unlock()
		return nil, nil, protocol.Errorf(protocol.CodeConflict, "a transfer with this transferKey is in flight")
	}
	th.byKey[key] = rv
	th.byTicket[transferHash(ticket)] = rv
	close(th.changed)
	th.changed = make(chan struct{})
	th.mu.Unlock()
	// params is a checked JSON object with at least transferKey: the
	// ticket goes in before its closing brace.
	out := make([]byte, 0, len(params)+80)
	t := trimJSON(params)
	out = append(out, t[:len(t)-1]...)
	out = append(out, `,"dataTicket":"`...)
	out = append(out, ticket...)
	out = append(out, `"}`...)
	end := func() {
		th.mu.Lock()
		delete(th.byKey, key)
		delete(th.byTicket, transferHash(ticket))
		th.mu.Unlock()
		close(rv.done)
		select {
		case ws := <-rv.caller: // attached, but the node never came
			ws.Close()
		default:
		}
	}
	return out, end, nil
}

func trimJSON(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\r' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

// claimCaller waits up to TransferCallerWaitMs for the request of key to be
// registered (the caller may dial before its request is routed) and claims
// its caller side. nil: no such request, or already claimed.
func (th *transferHub) claimCaller(ctx context.Context, key string) *rendezvous {
	th.mu.Lock()
	// A key whose request is already registered is claimed at once: only
	// a socket that has to wait counts against TransferMaxPending, so
	// sockets presenting unknown keys cannot lock out the callers of
	// requests in flight.
	if rv := th.byKey[key]; rv != nil {
		ok := !rv.callerTaken
		rv.callerTaken = true
		th.mu.Unlock()
		if !ok {
			return nil
		}
		return rv
	}
	if th.waiting >= protocol.TransferMaxPending {
		th.mu.Unlock()
		return nil
	}
	th.waiting++
	th.mu.Unlock()
	defer func() {
		th.mu.Lock()
		th.waiting--
		th.mu.Unlock()
	}()
	timer := time.NewTimer(protocol.TransferCallerWaitMs * time.Millisecond)
	defer timer.Stop()
	for {
		th.mu.Lock()
		rv, changed := th.byKey[key], th.changed
		if rv != nil {
			ok := !rv.callerTaken
			rv.callerTaken = true
			th.mu.Unlock()
			if !ok {
				return nil
			}
			return rv
		}
		th.mu.Unlock()
		select {
		case <-changed:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

func (th *transferHub) claimNode(ticket string) *rendezvous {
	th.mu.Lock()
	defer th.mu.Unlock()
	rv := th.byTicket[transferHash(ticket)]
	if rv == nil || rv.nodeTaken {
		return nil
	}
	rv.nodeTaken = true
	return rv
}

func (th *transferHub) track(ws *websocket.Conn) bool {
	th.mu.Lock()
	defer th.mu.Unlock()
	if th.closed {
		return false
	}
	th.active[ws] = struct{}{}
	return true
}

func (th *transferHub) untrack(ws *websocket.Conn) {
	th.mu.Lock()
	delete(th.active, ws)
	th.mu.Unlock()
}

// close ends every data connection (Server.Close).
func (th *transferHub) close() {
	th.mu.Lock()
	th.closed = true
	conns := th.active
	th.active = map[*websocket.Conn]struct{}{}
	th.mu.Unlock()
	for ws := range conns {
		ws.Close()
	}
}

// serveData is the data endpoint (<ws path>/data). A socket presents
// exactly one of the caller's secret (HeaderTransferKey) or the node's
// ticket (HeaderTransferTicket); anything else is refused before the
// upgrade, with no detail.
func (s *Server) serveData(w http.ResponseWriter, r *http.Request) {
	th := s.transfers
	key, ticket := r.Header.Get(protocol.HeaderTransferKey), r.Header.Get(protocol.HeaderTransferTicket)
	if (key == "") == (ticket == "") || key != "" && !protocol.ValidTransferSecret(key) ||
		ticket != "" && !protocol.ValidTransferSecret(ticket) {
		http.Error(w, "bad data connection request", http.StatusBadRequest)
		return
	}
	if key != "" {
		rv := th.claimCaller(r.Context(), transferHash(key))
		if rv == nil {
			http.Error(w, "no transfer waits for this key", http.StatusNotFound)
			return
		}
		ws, err := th.upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		released(ws)
		rv.caller <- ws // buffered 1, and the side was claimed once
		return
	}
	rv := th.claimNode(ticket)
	if rv == nil {
		http.Error(w, "no transfer waits for this ticket", http.StatusNotFound)
		return
	}
	ws, err := th.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	released(ws)
	defer ws.Close()
	timer := time.NewTimer(protocol.TransferWaitMs * time.Millisecond)
	defer timer.Stop()
	var cw *websocket.Conn
	select {
	case cw = <-rv.caller:
	case <-timer.C:
		return
	case <-rv.done:
		return
	}
	defer cw.Close()
	if !th.track(ws) || !th.track(cw) {
		return
	}
	defer th.untrack(ws)
	defer th.untrack(cw)
	relay(cw, ws, rv.done)
}

// released frees a data socket's unauthenticated slot (connGuard): its
// key or ticket matched a request in flight, which authenticates it, and
// a long transfer must not hold a slot meant for handshakes.
func released(ws *websocket.Conn) {
	if g := guardedOf(ws.NetConn()); g != nil {
		g.authenticated()
	}
}

// relay pipes messages both ways until one side ends (its close is
// forwarded), or TransferWaitMs after done closes; then both sockets are
// closed.
func relay(a, b *websocket.Conn, done <-chan struct{}) {
	errc := make(chan struct{}, 2)
	go func() { datadial.RunBulk(func() { pipe(b, a) }); errc <- struct{}{} }()
	go func() { datadial.RunBulk(func() { pipe(a, b) }); errc <- struct{}{} }()
	ended := 0
	select {
	case <-errc:
		ended++
	case <-done:
		// The request was answered, possibly before the relay drained
		// the node's last messages: let them through, for a while.
		t := time.NewTimer(protocol.TransferWaitMs * time.Millisecond)
		select {
		case <-errc:
			ended++
		case <-t.C:
		}
		t.Stop()
	}
	if ended == 1 {
		// One side closed and its close was forwarded: give the other side
		// a moment to answer it, so neither socket is closed with unread
		// data (which resets the connection and can drop what the peer has
		// not read yet).
		t := time.NewTimer(closeGrace)
		select {
		case <-errc:
			ended++
		case <-t.C:
		}
		t.Stop()
	}
	a.Close()
	b.Close()
	for ; ended < 2; ended++ {
		<-errc
	}
}

// closeGrace is how long the relay waits for the second side's close.
const closeGrace = 2 * time.Second

// pipe copies messages from src to dst, each straight from src's reader
// into dst's message writer, and forwards src's close.
func pipe(dst, src *websocket.Conn) {
	for {
		mt, r, err := src.NextReader()
		if err != nil {
			code, text := websocket.CloseAbnormalClosure, ""
			if ce, ok := err.(*websocket.CloseError); ok {
				code, text = ce.Code, ce.Text
			}
			if code != websocket.CloseAbnormalClosure && code != websocket.CloseNoStatusReceived {
				dst.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
			}
			return
		}
		w, err := dst.NextWriter(mt)
		if err != nil {
			return
		}
		if _, err := io.Copy(w, r); err != nil {
			w.Close()
			return
		}
		if err := w.Close(); err != nil {
			return
		}
		// A relayed message is up to 1 MiB: give the connection's other
		// goroutines (control frames of the same node) their turn.
		runtime.Gosched()
	}
}
