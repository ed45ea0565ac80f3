package controller

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"lemon/protocol"
)

// Federation (docs/CLUSTER.md): controllers share the registry through
// JetStream KV and reach each other's nodes by NATS request/reply.
//
// Holders. The controller that holds a node's socket owns key <nodeId> of
// bucket lemon_holders: {epoch, generation, holder}. Every connection of
// a node takes the key with a compare-and-swap on its revision, bumping
// epoch; the old holder is told at once (a "lost" request on its epoch's
// subject, answered once it has dropped its socket) and also learns from
// its watch. Only the holder of the current epoch subscribes to
// lemon.node.<nodeId>.<epoch>.{invoke,cancel,lost}, so a request
// addressed to one epoch reaches at most one socket.

// ClusterConfig makes a controller clustered (Config.Cluster).
type ClusterConfig struct {
	// Conn is the NATS connection (embedded or external); the caller owns
	// and closes it after Server.Close.
	Conn *nats.Conn
	// Name is this controller's unique name in the cluster.
	Name string
	// Replicas is the KV buckets' replica count (1..5; default 1).
	Replicas int
}

// holderRecord is the value of a node's key in lemon_holders.
type holderRecord struct {
	Epoch      uint64 `json:"epoch"`
	Generation uint64 `json:"generation"`
	Holder     string `json:"holder"`
}

// remoteInvoke is the request body on lemon.node.<id>.<epoch>.invoke.
type remoteInvoke struct {
	InvokeID         string          `json:"invokeId"`
	Method           string          `json:"method"`
	Args             json.RawMessage `json:"args"`
	ExecutionContext json.RawMessage `json:"executionContext,omitempty"`
}

// remoteReply is the holder's answer: exactly one of result and error.
type remoteReply struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *protocol.Error `json:"error,omitempty"`
}

// localHold is a node socket this controller holds.
type localHold struct {
	c     *conn
	epoch uint64
	rev   uint64
	sub   *nats.Subscription
}

// remoteWait is a call this controller sent to another holder.
type remoteWait struct {
	epoch uint64
	lost  chan struct{} // closed when the holder's epoch moved on
	once  sync.Once
}

type federation struct {
	s       *Server
	nc      *nats.Conn
	name    string
	be      *kvBackend
	holders jetstream.KeyValue

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// routed counts calls sent to other holders by outcome (metrics,
	// docs/CLUSTER.md, "Metrics").
	routed *prometheus.CounterVec

	mu      sync.Mutex
	local   map[string]*localHold               // nodeId → the socket held here
	remote  map[string]holderRecord             // nodeId → current holder (watch)
	waits   map[string]map[*remoteWait]struct{} // nodeId → calls in flight elsewhere
	cancels map[string]context.CancelFunc       // invokeId → remote call being served here
}

func nodeSubject(nodeID string, epoch uint64) string {
	return "lemon.node." + nodeID + "." + strconv.FormatUint(epoch, 10)
}

// remoteSlack is added to a call's deadline while waiting for the holder
// (which enforces the deadline itself) to answer.
const remoteSlack = 2 * time.Second

// lostWait bounds how long a new holder waits for the old one to drop
// its socket before it serves the node.
const lostWait = 2 * time.Second

func newFederation(s *Server, cc *ClusterConfig, be *kvBackend) *federation {
	f := &federation{s: s, nc: cc.Conn, name: cc.Name, be: be, holders: be.kv[kvHolders],
		local: map[string]*localHold{}, remote: map[string]holderRecord{},
		waits: map[string]map[*remoteWait]struct{}{}, cancels: map[string]context.CancelFunc{}}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.routed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lemon_controller_cluster_routed_calls_total",
		Help: "Calls sent to a node held by another controller, by outcome: ok, error (answered with an error), not_delivered (no holder received it), cut_off (handed over, then lost).",
	}, []string{"outcome"})
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lemon_controller_cluster_held_nodes",
		Help: "Node sockets this controller holds in the cluster (its lemon_holders keys).",
	}, func() float64 {
		f.mu.Lock()
		defer f.mu.Unlock()
		return float64(len(f.local))
	})
	s.metrics.reg.MustRegister(f.routed, held)
	return f
}

// start watches the buckets; the initial values of nodes, sessions and
// pairings were loaded by newRegistry.
func (f *federation) start() error {
	for _, b := range []string{bucketNodes, bucketSessions, bucketPairings} {
		// All values, then updates: what was written between the load and
		// now is not missed (reapplying a loaded record changes nothing).
		w, err := f.be.kv[b].WatchAll(f.ctx)
		if err != nil {
			return err
		}
		f.wg.Add(1)
		go f.watch(b, w)
	}
	w, err := f.holders.WatchAll(f.ctx)
	if err != nil {
		return err
	}
	f.wg.Add(1)
	go f.watch(kvHolders, w)
	return f.watchApprovals()
}

func (f *federation) stop() {
	f.cancel()
	f.mu.Lock()
	for _, h := range f.local {
		h.sub.Unsubscribe()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *federation) watch(bucket string, w jetstream.KeyWatcher) {
	defer f.wg.Done()
	defer w.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case ent, ok := <-w.Updates():
			if !ok {
				return
			}
			if ent == nil {
				continue
			}
			del := ent.Operation() != jetstream.KeyValuePut
			if bucket == kvHolders {
				var h holderRecord
				if !del && json.Unmarshal(ent.Value(), &h) != nil {
					continue
				}
				f.holderChanged(ent.Key(), h, del)
				continue
			}
			var env kvEnvelope
			if !del {
				if json.Unmarshal(ent.Value(), &env) != nil || env.Origin == f.name {
					continue
				}
			}
			if bucket == bucketNodes {
				// Another controller wrote the record: the next flush of
				// ours writes our advertise again (docs/CLUSTER.md, "State").
				f.be.forget(ent.Key())
			}
			f.s.reg.applyRemote(bucket, ent.Key(), env.Value, del)
		}
	}
}

// holderChanged applies a holders update: the cache, the node's online
// state, calls in flight to an older epoch (they fail as disconnected),
// and a socket held here for an older epoch (dropped as replaced).
func (f *federation) holderChanged(nodeID string, h holderRecord, del bool) {
	f.mu.Lock()
	if del {
		delete(f.remote, nodeID)
	} else if cur, ok := f.remote[nodeID]; !ok || h.Epoch >= cur.Epoch {
		f.remote[nodeID] = h
	}
	for w := range f.waits[nodeID] {
		if del || h.Epoch > w.epoch {
			w.once.Do(func() { close(w.lost) })
		}
	}
	var drop *localHold
	// A newer holder here is this controller's own claim: attach replaces
	// the old socket (connectNode), so it is not closed twice.
	if lh := f.local[nodeID]; lh != nil && !del && h.Epoch > lh.epoch && h.Holder != f.name {
		drop = lh
		delete(f.local, nodeID)
	}
	f.mu.Unlock()
	f.s.reg.setRemoteOnline(nodeID, !del && h.Holder != f.name)
	if drop != nil {
		drop.sub.Unsubscribe()
		drop.c.abandon()
		drop.c.closeWith(CloseSessionReplaced, "replaced by a newer connection of this node")
	}
}

// claim takes node nodeID's holder key for connection c (session
// generation gen) before c goes live: subscribe to the new epoch's
// subject, compare-and-swap the key, then have the old holder drop its
// socket. A paired session older than the holder's generation is refused.
func (f *federation) claim(c *conn, nodeID string, gen uint64, paired bool) *protocol.Error {
	unavailable := protocol.DomainError(protocol.CodeUnavailable, protocol.DomainNodeOffline,
		"the cluster state is unavailable; try again").WithRetry(true, false)
	ctx, cancel := context.WithTimeout(f.ctx, kvOpTimeout)
	defer cancel()
	revoked := protocol.DomainError(protocol.CodeUnauthorized, protocol.DomainSessionRevoked,
		"the node session was revoked by a newer pairing")
	if paired {
		// The node record in KV, not this controller's copy: a re-pairing
		// approved on another controller a moment ago may not have reached
		// this registry through the watch yet, and the holder record only
		// learns the new generation once the new session connects.
		ent, err := f.be.kv[bucketNodes].Get(ctx, nodeID)
		switch {
		case err == nil:
			var env kvEnvelope
			var nr struct {
				Generation uint64 `json:"generation"`
			}
			if json.Unmarshal(ent.Value(), &env) == nil && json.Unmarshal(env.Value, &nr) == nil && nr.Generation > gen {
				return revoked
			}
		case errors.Is(err, jetstream.ErrKeyNotFound):
		default:
			return unavailable
		}
	}
	for try := 0; try < 16; try++ {
		var cur holderRecord
		var rev uint64
		ent, err := f.holders.Get(ctx, nodeID)
		switch {
		case err == nil:
			if json.Unmarshal(ent.Value(), &cur) != nil {
				cur = holderRecord{}
			}
			rev = ent.Revision()
		case errors.Is(err, jetstream.ErrKeyNotFound):
		default:
			return unavailable
		}
		if paired && cur.Generation > gen {
			return revoked
		}
		next := holderRecord{Epoch: cur.Epoch + 1, Generation: gen, Holder: f.name}
		if !paired {
			next.Generation = max(cur.Generation, gen)
		}
		subj := nodeSubject(nodeID, next.Epoch)
		sub, err := f.nc.Subscribe(subj+".*", func(m *nats.Msg) { f.serve(nodeID, next.Epoch, m) })
		if err != nil {
			return unavailable
		}
		if err := f.nc.FlushWithContext(ctx); err != nil {
			sub.Unsubscribe()
			return unavailable
		}
		v, _ := json.Marshal(next)
		var nrev uint64
		if ent == nil {
			nrev, err = f.holders.Create(ctx, nodeID, v)
		} else {
			nrev, err = f.holders.Update(ctx, nodeID, v, rev)
		}
		if err != nil {
			sub.Unsubscribe()
			if ctx.Err() != nil {
				return unavailable
			}
			continue // another connection won the revision: read again
		}
		if cur.Epoch > 0 && cur.Holder != "" && cur.Holder != f.name {
			// Tell the old holder; no responders means it is gone.
			f.nc.Request(nodeSubject(nodeID, cur.Epoch)+".lost", nil, lostWait)
		}
		f.mu.Lock()
		old := f.local[nodeID]
		f.local[nodeID] = &localHold{c: c, epoch: next.Epoch, rev: nrev, sub: sub}
		if r, ok := f.remote[nodeID]; !ok || next.Epoch >= r.Epoch {
			f.remote[nodeID] = next
		}
		// Calls this controller sent to the old holder will not be
		// answered by this socket: they fail as disconnected.
		for w := range f.waits[nodeID] {
			if next.Epoch > w.epoch {
				w.once.Do(func() { close(w.lost) })
			}
		}
		f.mu.Unlock()
		if old != nil && old.epoch != next.Epoch {
			old.sub.Unsubscribe()
		}
		return nil
	}
	return unavailable
}

// release gives up the holder key when c, the socket held for nodeID,
// ends (only if no newer connection took it meanwhile).
func (f *federation) release(nodeID string, c *conn) {
	f.mu.Lock()
	lh := f.local[nodeID]
	if lh == nil || lh.c != c {
		f.mu.Unlock()
		return
	}
	delete(f.local, nodeID)
	f.mu.Unlock()
	lh.sub.Unsubscribe()
	ctx, cancel := context.WithTimeout(context.Background(), kvOpTimeout)
	defer cancel()
	f.holders.Delete(ctx, nodeID, jetstream.LastRevision(lh.rev))
}

// serve answers a message on a held node's subject.
func (f *federation) serve(nodeID string, epoch uint64, m *nats.Msg) {
	kind := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	switch kind {
	case "lost":
		f.mu.Lock()
		lh := f.local[nodeID]
		if lh != nil && lh.epoch == epoch {
			delete(f.local, nodeID)
		} else {
			lh = nil
		}
		f.mu.Unlock()
		if lh != nil {
			lh.sub.Unsubscribe()
			lh.c.abandon()
			lh.c.closeWith(CloseSessionReplaced, "replaced by a newer connection of this node")
		}
		m.Respond([]byte("{}"))
	case "cancel":
		var p protocol.InvokeCancel
		if json.Unmarshal(m.Data, &p) == nil {
			f.mu.Lock()
			cancel := f.cancels[p.InvokeID]
			f.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		}
	case "invoke":
		go f.serveInvoke(nodeID, epoch, m)
	}
}

func (f *federation) reply(m *nats.Msg, payload json.RawMessage, e *protocol.Error) {
	b, _ := json.Marshal(remoteReply{Result: payload, Error: e})
	m.Respond(b)
}

// serveInvoke delivers a request from another controller to the socket
// held here, with the same deadline, cancel and execution context.
func (f *federation) serveInvoke(nodeID string, epoch uint64, m *nats.Msg) {
	var req remoteInvoke
	if json.Unmarshal(m.Data, &req) != nil || !validRemoteID(req.InvokeID) {
		f.reply(m, nil, notDispatched())
		return
	}
	f.mu.Lock()
	lh := f.local[nodeID]
	f.mu.Unlock()
	if lh == nil || lh.epoch != epoch {
		f.reply(m, nil, notDispatched())
		return
	}
	spec, ok := f.s.routes()[req.Method]
	if !ok {
		f.reply(m, nil, protocol.Errorf(protocol.CodeMethodNotFound, "unknown method"))
		return
	}
	node, gen, e := f.s.reg.pin(nodeID, spec.MethodSpec)
	if e != nil {
		f.reply(m, nil, e)
		return
	}
	if node != lh.c {
		f.reply(m, nil, notDispatched())
		return
	}
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	f.mu.Lock()
	f.cancels[req.InvokeID] = cancel
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.cancels, req.InvokeID)
		f.mu.Unlock()
	}()
	payload, e, abandoned := f.s.deliver(ctx, node, gen, spec, nodeID, req.InvokeID, req.Args, req.ExecutionContext)
	if abandoned {
		// Cancelled by the caller's controller; it answers no one.
		return
	}
	f.reply(m, payload, e)
}

func validRemoteID(s string) bool { return len(s) == 32 && isHexString(s) }

func isHexString(s string) bool {
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !((b >= '0' && b <= '9') || (b >= 'a' && b <= 'f')) {
			return false
		}
	}
	return true
}

// refreshSession reads a node session token's session and node records
// straight from KV into the registry, for a node that connects here
// before this controller's watch has brought its pairing on another
// controller. It reports whether the session was found.
func (f *federation) refreshSession(token string) bool {
	if token == "" || len(token) > MaxTokenBytes {
		return false
	}
	h := HashToken(token)
	key := hex.EncodeToString(h[:])
	ctx, cancel := context.WithTimeout(f.ctx, kvOpTimeout)
	defer cancel()
	ent, err := f.be.kv[bucketSessions].Get(ctx, key)
	if err != nil {
		return false
	}
	var env kvEnvelope
	var sr sessionRecord
	if json.Unmarshal(ent.Value(), &env) != nil || json.Unmarshal(env.Value, &sr) != nil {
		return false
	}
	nent, err := f.be.kv[bucketNodes].Get(ctx, sr.NodeID)
	if err != nil {
		return false
	}
	var nenv kvEnvelope
	if json.Unmarshal(nent.Value(), &nenv) != nil {
		return false
	}
	f.s.reg.applyRemote(bucketNodes, sr.NodeID, nenv.Value, false)
	f.s.reg.applyRemote(bucketSessions, key, env.Value, false)
	return true
}

// holderName is the cluster name (--cluster-name) of the controller
// holding the node's socket, or "" when none is known.
func (f *federation) holderName(nodeID string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.remote[nodeID].Holder
}

// transferNotRouted is the refusal of a transfer to a node whose socket
// another controller holds (docs/CLUSTER.md, "Limits"), naming that
// controller by its cluster name when known. Nothing was sent: it is
// retry-safe, and there is nothing to resume.
func transferNotRouted(holder string) *protocol.Error {
	who := "another controller of the cluster"
	if holder != "" {
		who = fmt.Sprintf("controller %q of the cluster", holder)
	}
	return protocol.DomainError(protocol.CodeUnavailable, protocol.DomainTransferNotRouted,
		"this node's socket is held by "+who+": run the transfer through that controller").WithRetry(true, false)
}

// held reports whether some controller holds the node's socket (its
// record may not have reached this controller's registry yet).
func (f *federation) held(nodeID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.remote[nodeID]
	return ok
}

// invokeRemote sends a call for a node held by another controller and
// waits: the holder enforces the deadline and answers; without any
// answer by the deadline plus remoteSlack, or when the holder's epoch
// moves on (its controller died and the node reconnected elsewhere), the
// call fails with uncertain flags, since it was handed over. A request no
// holder received (no responders) is retry-safe. abandoned is true when
// ctx ended first; the holder is told to cancel.
func (f *federation) invokeRemote(ctx context.Context, spec routeSpec, nodeID, invokeID string, params, ctxJSON json.RawMessage) (payload json.RawMessage, e *protocol.Error, abandoned bool) {
	defer func() {
		switch {
		case abandoned:
			f.routed.WithLabelValues("cut_off").Inc()
		case e == nil:
			f.routed.WithLabelValues("ok").Inc()
		case e.DomainCode() == protocol.DomainNodeOffline:
			f.routed.WithLabelValues("not_delivered").Inc()
		case e.DomainCode() == protocol.DomainNodeDisconnected || e.Code == protocol.CodeTimeout:
			f.routed.WithLabelValues("cut_off").Inc()
		default:
			f.routed.WithLabelValues("error").Inc()
		}
	}()
	f.mu.Lock()
	h, ok := f.remote[nodeID]
	f.mu.Unlock()
	if !ok || h.Holder == f.name {
		return nil, protocol.DomainError(protocol.CodeUnavailable, protocol.DomainNodeOffline,
			"the node is offline").WithRetry(true, false), false
	}
	w := &remoteWait{epoch: h.Epoch, lost: make(chan struct{})}
	f.mu.Lock()
	if f.waits[nodeID] == nil {
		f.waits[nodeID] = map[*remoteWait]struct{}{}
	}
	f.waits[nodeID][w] = struct{}{}
	if cur := f.remote[nodeID]; cur.Epoch != h.Epoch {
		w.once.Do(func() { close(w.lost) })
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.waits[nodeID], w)
		if len(f.waits[nodeID]) == 0 {
			delete(f.waits, nodeID)
		}
		f.mu.Unlock()
	}()
	body, _ := json.Marshal(remoteInvoke{InvokeID: invokeID, Method: spec.Name, Args: params, ExecutionContext: ctxJSON})
	subj := nodeSubject(nodeID, h.Epoch)
	wait := spec.BrokerDeadline(params) + spec.CallerSlack + remoteSlack
	rctx, rcancel := context.WithTimeout(context.Background(), wait)
	defer rcancel()
	type answer struct {
		m   *nats.Msg
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		m, err := f.nc.RequestWithContext(rctx, subj+".invoke", body)
		ch <- answer{m, err}
	}()
	cancelHolder := func() {
		b, _ := json.Marshal(protocol.InvokeCancel{InvokeID: invokeID})
		f.nc.Publish(subj+".cancel", b)
	}
	select {
	case a := <-ch:
		if errors.Is(a.err, nats.ErrNoResponders) {
			return nil, notDispatched(), false
		}
		if a.err != nil {
			cancelHolder()
			return nil, uncertain(spec.Pure, protocol.Errorf(protocol.CodeTimeout, "the node did not answer before the deadline")), false
		}
		var r remoteReply
		if json.Unmarshal(a.m.Data, &r) != nil || (r.Error == nil) == (len(r.Result) == 0) {
			return nil, uncertain(spec.Pure, protocol.Errorf(protocol.CodeInternal, "the holding controller sent a malformed answer")), false
		}
		if r.Error != nil {
			return nil, sanitizeNodeError(r.Error), false
		}
		return r.Result, nil, false
	case <-w.lost:
		cancelHolder()
		return nil, disconnectError(spec.Pure), false
	case <-ctx.Done():
		cancelHolder()
		return nil, nil, true
	}
}

// applyRemote applies another controller's write to the registry's maps
// (raw is the record; del a deletion). A session revoked elsewhere closes
// the socket held here for it; a pairing decided elsewhere is announced
// (node.pair.resolved) to the connection here that asked for it.
func (r *registry) applyRemote(bucket, key string, raw json.RawMessage, del bool) {
	var closeRevoked *conn
	var notify *conn
	var resolved protocol.PairResolvedEvent
	r.mu.Lock()
	switch bucket {
	case bucketNodes:
		e := r.nodes[key]
		if del {
			if e != nil && e.live == nil {
				delete(r.nodes, key)
				if r.names[nameKey(e.rec.Name)] == key {
					delete(r.names, nameKey(e.rec.Name))
				}
			}
			break
		}
		var rec nodeRecord
		if json.Unmarshal(raw, &rec) != nil || rec.ID != key {
			break
		}
		if e == nil {
			e = &nodeEntry{}
			r.nodes[key] = e
		} else if r.names[nameKey(e.rec.Name)] == key {
			delete(r.names, nameKey(e.rec.Name))
		}
		if e.live != nil {
			// The socket held here is the fresher source of its advertise.
			rec.Methods, rec.ModuleSetDigest, rec.MaxPayload = e.rec.Methods, e.rec.ModuleSetDigest, e.rec.MaxPayload
			rec.Capabilities, rec.Client, rec.Modules = e.rec.Capabilities, e.rec.Client, e.rec.Modules
		}
		e.rec = rec
		r.names[nameKey(rec.Name)] = key
	case bucketSessions:
		if del {
			delete(r.sessions, key)
			break
		}
		var sr sessionRecord
		if json.Unmarshal(raw, &sr) != nil {
			break
		}
		r.sessions[key] = &sr
		if e := r.nodes[sr.NodeID]; sr.Revoked && e != nil && e.live != nil && e.live.session == key {
			closeRevoked = e.live
			e.live, e.liveGen, e.connectedAtMs = nil, 0, 0
		}
	case bucketPairings:
		old := r.pairings[key]
		if del {
			if old != nil {
				r.deletePairingLocked(old)
			}
			break
		}
		var p pairingRecord
		if json.Unmarshal(raw, &p) != nil || p.ID != key {
			break
		}
		if old != nil {
			p.askers = old.askers
			if old.Status == protocol.PairStatusPending && p.Status != protocol.PairStatusPending {
				notify = r.waiters[key]
				resolved = protocol.PairResolvedEvent{PairingID: p.ID, Status: p.Status, NodeID: p.NodeID}
			}
			delete(r.codes, codeKey(old.Code))
		}
		r.pairings[key] = &p
		r.codes[codeKey(p.Code)] = key
	}
	r.mu.Unlock()
	if closeRevoked != nil {
		closeRevoked.abandon()
		closeRevoked.closeWith(CloseSessionRevoked, "session revoked by a newer pairing")
	}
	if notify != nil {
		notify.sendEvent(protocol.EventPairResolved, resolved)
	}
}

// setRemoteOnline records whether another controller holds the node's
// socket (node.list and node.describe report it online).
func (r *registry) setRemoteOnline(nodeID string, on bool) {
	r.mu.Lock()
	if e := r.nodes[nodeID]; e != nil {
		e.remoteOnline = on
	}
	r.mu.Unlock()
}
