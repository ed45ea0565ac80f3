package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/gorilla/websocket"

	"lemon/protocol"
)

// WebSocket close codes the controller uses beyond RFC 6455's.
const (
	// CloseSessionReplaced: a newer connection of the same node took over.
	CloseSessionReplaced = 4001
	// CloseSessionRevoked: the node re-paired; this session is revoked.
	CloseSessionRevoked = 4002
)

// nodeRecord is the durable part of a node. A flush marshals a shallow
// copy without the registry lock, so its map, slice and pointer fields
// (Methods, Capabilities, Client) are only ever replaced, never changed in
// place.
type nodeRecord struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Identity    string `json:"identity"` // protocol.NodeIdentityToken / NodeIdentityPaired
	CreatedAtMs int64  `json:"createdAtMs"`
	// Generation is the node's session generation: for a paired node that of
	// its newest session (connect.challenge increments it); for a token
	// node it increments at every connect.
	Generation uint64 `json:"generation"`
	// RecoveryHash is hex sha256 of the recovery credential (paired nodes).
	RecoveryHash string `json:"recoveryHash,omitempty"`
	LastSeenAtMs int64  `json:"lastSeenAtMs,omitempty"`
	// The last connection's advertise, for node.describe of an offline node.
	Methods         map[string]int          `json:"methods,omitempty"`
	ModuleSetDigest string                  `json:"moduleSetDigest,omitempty"`
	MaxPayload      int                     `json:"maxPayload,omitempty"`
	Capabilities    []string                `json:"capabilities,omitempty"`
	Client          *protocol.ConnectClient `json:"client,omitempty"`
	// Modules is the last connection's per-module status.
	Modules []protocol.ModuleStatus `json:"modules,omitempty"`
	// WriteSeq is the store's write stamp of this stored copy (set by the
	// store, see store.seq); a flush never replaces a higher one.
	WriteSeq uint64 `json:"writeSeq,omitempty"`
}

// nodeEntry is a node in memory: its record and its live connection.
type nodeEntry struct {
	rec           nodeRecord
	live          *conn
	liveGen       uint64
	connectedAtMs int64
	// unserved maps the pinned methods the live connection does not serve
	// for a reason the controller can tell: its module was reported
	// refused, or its capability is outside the ceiling the node
	// advertised. A call to one is answered without a round trip.
	unserved map[string]unservedMethod
	// remoteOnline: another controller of the cluster holds the node's
	// socket (federation.go).
	remoteOnline bool
}

// unservedMethod says why a node does not serve a pinned method: family
// and reason of a refused module, or denied (outside the ceiling).
type unservedMethod struct {
	family, reason string
	denied         bool
}

// registry holds nodes, sessions and pairings. Node creation, renames,
// pairings and sessions are written through to the store under mu before
// they take effect; advertise and last-seen data are marked dirty and
// written by flush, which holds mu only while it copies them. One mutex
// guards the maps.
type registry struct {
	s  *Server
	st *store

	// flushMu makes flushes run one at a time (janitor and Close); it is
	// never taken while mu is held.
	flushMu sync.Mutex

	mu       sync.Mutex
	nodes    map[string]*nodeEntry     // nodeId →
	names    map[string]string         // lower-case name → nodeId
	sessions map[string]*sessionRecord // hex sha256(token) →
	pairings map[string]*pairingRecord // pairingId →
	codes    map[string]string         // pairing code → pairingId
	waiters  map[string]*conn          // pairingId → the connection that asked (events)
	dirty    map[string]bool           // nodeIds whose non-critical fields await flush

	// testHookBeforeHello, when set (tests only, before Serve), runs in
	// connectNode after attach, without r.mu, before hello-ok is queued.
	testHookBeforeHello func(*conn)
}

func newRegistry(s *Server, st *store) (*registry, error) {
	r := &registry{
		s: s, st: st,
		nodes:    map[string]*nodeEntry{},
		names:    map[string]string{},
		sessions: map[string]*sessionRecord{},
		pairings: map[string]*pairingRecord{},
		codes:    map[string]string{},
		waiters:  map[string]*conn{},
		dirty:    map[string]bool{},
	}
	err := st.load(bucketNodes, func(k string, v []byte) error {
		var rec nodeRecord
		if err := json.Unmarshal(v, &rec); err != nil || rec.ID != k {
			return fmt.Errorf("controller: corrupt node record in the durable store")
		}
		r.nodes[rec.ID] = &nodeEntry{rec: rec}
		r.names[nameKey(rec.Name)] = rec.ID
		st.observeSeq(rec.WriteSeq)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := r.loadPairingState(); err != nil {
		return nil, err
	}
	return r, nil
}

// nameKey is the uniqueness key of a node name: names are unique
// case-insensitively after trimming.
func nameKey(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

func (r *registry) nowMs() int64 { return r.s.now().UnixMilli() }

// tokenNodeID derives the durable ID of an interim token node from its
// name, so it survives restarts without a state directory.
func tokenNodeID(name string) string {
	h := sha256.Sum256([]byte("lemon interim node\x00" + nameKey(name)))
	return "node-" + hex.EncodeToString(h[:16])
}

// ensureTokenNode registers the node of an interim node token (offline).
func (r *registry) ensureTokenNode(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id, ok := r.names[nameKey(name)]; ok {
		if r.nodes[id].rec.Identity != protocol.NodeIdentityToken {
			return fmt.Errorf("controller: node token name %q is held by a paired node", name)
		}
		return nil
	}
	rec := nodeRecord{ID: tokenNodeID(name), Name: name, Identity: protocol.NodeIdentityToken, CreatedAtMs: r.nowMs()}
	if err := r.st.apply(op{bucketNodes, rec.ID, rec}); err != nil {
		return fmt.Errorf("controller: durable store write failed: %w", err)
	}
	r.nodes[rec.ID] = &nodeEntry{rec: rec}
	r.names[nameKey(name)] = rec.ID
	return nil
}

// nodeAuth is the outcome of authenticating a node connection.
type nodeAuth struct {
	entry      *nodeEntry
	generation uint64
	session    string // hex session hash, "" for an interim token
}

// authenticateNode checks a node's token (interim token first, then a
// paired session), and its claimed identity. The caller holds no lock.
func (r *registry) authenticateNode(token string, adv *protocol.NodeAdvertise) (nodeAuth, *protocol.Error) {
	unauthorized := protocol.DomainError(protocol.CodeUnauthorized, protocol.DomainOperatorAuthInvalid,
		"the node token was not accepted")
	if token == "" {
		return nodeAuth{}, protocol.DomainError(protocol.CodeUnauthorized, protocol.DomainOperatorAuthMissing,
			"a node token is required")
	}
	if len(token) > MaxTokenBytes {
		return nodeAuth{}, unauthorized
	}
	h := HashToken(token)
	r.mu.Lock()
	defer r.mu.Unlock()
	var e *nodeEntry
	var a nodeAuth
	if cred, ok := r.s.auth.nodeToken(h); ok {
		e = r.nodes[r.names[nameKey(cred.Name)]]
		if e == nil {
			return nodeAuth{}, unauthorized
		}
		a = nodeAuth{entry: e, generation: e.rec.Generation + 1}
	} else {
		key := hex.EncodeToString(h[:])
		sess, ok := r.sessions[key]
		if !ok {
			return nodeAuth{}, unauthorized
		}
		if sess.ExpiresAtMs <= r.nowMs() {
			return nodeAuth{}, protocol.DomainError(protocol.CodeUnauthorized, protocol.DomainSessionExpired,
				"the node session has expired; pair again with the recovery credential")
		}
		e = r.nodes[sess.NodeID]
		if e == nil || sess.Revoked || sess.Generation != e.rec.Generation {
			return nodeAuth{}, protocol.DomainError(protocol.CodeUnauthorized, protocol.DomainSessionRevoked,
				"the node session was revoked by a newer pairing")
		}
		a = nodeAuth{entry: e, generation: sess.Generation, session: key}
	}
	if adv.NodeID != "" && adv.NodeID != e.rec.ID {
		return nodeAuth{}, protocol.DomainError(protocol.CodeUnauthorized, protocol.DomainNodeIdentityMismatch,
			"the node token belongs to another node")
	}
	if e.rec.Identity == protocol.NodeIdentityToken && adv.Name != "" && nameKey(adv.Name) != nameKey(e.rec.Name) {
		return nodeAuth{}, protocol.DomainError(protocol.CodeUnauthorized, protocol.DomainNodeIdentityMismatch,
			"the node token is bound to another node name")
	}
	return a, nil
}

// attach makes c the live connection of a.entry and returns the
// connection it replaced, if any. It fails if the node was removed or its
// session revoked meanwhile. beforeLive runs under r.mu just before c
// goes live; it must neither block nor send. attach itself sends nothing:
// the caller queues hello-ok after it returns, holding c.eventMu across
// both (see connectNode), so no peer can stall the registry lock.
func (r *registry) attach(a nodeAuth, c *conn, adv *protocol.NodeAdvertise, client protocol.ConnectClient, beforeLive func()) (*conn, *protocol.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := a.entry
	if r.nodes[e.rec.ID] != e {
		return nil, protocol.DomainError(protocol.CodeUnauthorized, protocol.DomainSessionRevoked, "the node is no longer registered")
	}
	if a.session != "" {
		if s, ok := r.sessions[a.session]; !ok || s.Revoked || s.Generation != e.rec.Generation {
			return nil, protocol.DomainError(protocol.CodeUnauthorized, protocol.DomainSessionRevoked,
				"the node session was revoked by a newer pairing")
		}
	} else {
		e.rec.Generation = a.generation
	}
	now := r.nowMs()
	e.rec.Methods = adv.Methods
	e.rec.ModuleSetDigest = adv.ModuleSetDigest
	e.rec.MaxPayload = c.peerMax
	e.rec.Capabilities = adv.Capabilities
	e.rec.Modules = adv.Modules
	e.unserved = r.unservedMethods(adv)
	cl := client
	e.rec.Client = &cl
	e.rec.LastSeenAtMs = now
	// Advertise and last-seen data are not critical: flushed in batches,
	// so a thousand nodes reconnecting at once cost a few transactions.
	r.dirty[e.rec.ID] = true
	c.session = a.session
	beforeLive()
	old := e.live
	e.live, e.liveGen, e.connectedAtMs = c, a.generation, now
	return old, nil
}

// unservedMethods tells, from the pinned set's declarations, why a node
// does not serve some of them: each method of a module it reported
// refused (matched by sha256) maps to that module's family and reason;
// when it runs the pinned set, each method whose declared capability is
// outside the ceiling it advertised (not "all") is denied.
func (r *registry) unservedMethods(adv *protocol.NodeAdvertise) map[string]unservedMethod {
	ms := r.s.modules.Load()
	if ms == nil {
		return nil
	}
	out := map[string]unservedMethod{}
	if adv.ModuleSetDigest == ms.digest && len(adv.Capabilities) > 0 {
		ceiling := map[string]bool{}
		for _, c := range adv.Capabilities {
			ceiling[c] = true
		}
		if !ceiling["all"] {
			for name, cp := range ms.methodCap {
				if _, served := adv.Methods[name]; !served && !ceiling[cp] {
					out[name] = unservedMethod{denied: true}
				}
			}
		}
	}
	for _, m := range adv.Modules {
		if m.State != protocol.ModuleRefused {
			continue
		}
		for _, name := range ms.methodsBySHA[m.SHA256] {
			out[name] = unservedMethod{family: m.Family, reason: m.Reason}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// modulesStatus answers node.modules.status from the registry: the
// pinned set and each node's reported state, sorted by name, cut so the
// marshalled nodes stay within budget bytes.
func (r *registry) modulesStatus(budget int) protocol.ModulesStatusResult {
	out := protocol.ModulesStatusResult{Nodes: []protocol.NodeModules{}}
	pinned := ""
	if ms := r.s.modules.Load(); ms != nil {
		out.Pinned = ms.Pinned()
		pinned = out.Pinned.Digest
		if b, err := json.Marshal(out.Pinned); err == nil {
			budget -= len(b)
		}
	}
	r.mu.Lock()
	nodes := make([]protocol.NodeModules, 0, len(r.nodes))
	for _, e := range r.nodes {
		nm := protocol.NodeModules{NodeID: e.rec.ID, Name: e.rec.Name, Online: e.live != nil,
			ModuleSetDigest: e.rec.ModuleSetDigest, Refused: []protocol.ModuleStatus{}}
		nm.Current = pinned != "" && nm.ModuleSetDigest == pinned
		for _, m := range e.rec.Modules {
			if m.State == protocol.ModuleRefused {
				nm.Refused = append(nm.Refused, m)
			}
		}
		nodes = append(nodes, nm)
	}
	r.mu.Unlock()
	sort.Slice(nodes, func(i, j int) bool {
		a, b := nameKey(nodes[i].Name), nameKey(nodes[j].Name)
		if a != b {
			return a < b
		}
		return nodes[i].NodeID < nodes[j].NodeID
	})
	for _, nm := range nodes {
		b, _ := json.Marshal(nm)
		if budget -= len(b) + 1; budget < 0 {
			out.Truncated = true
			break
		}
		out.Nodes = append(out.Nodes, nm)
	}
	return out
}

// detach marks the node offline if c is still its live connection.
func (r *registry) detach(e *nodeEntry, c *conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.live != c {
		return
	}
	e.live, e.liveGen, e.connectedAtMs = nil, 0, 0
	e.rec.LastSeenAtMs = r.nowMs()
	if r.nodes[e.rec.ID] == e {
		r.dirty[e.rec.ID] = true
	}
}

// flush writes the node records marked dirty (advertise and last-seen
// data) in one transaction. It holds mu only to copy them and take a
// write stamp; the write and its fsync run without it, so connects,
// calls and listings go on meanwhile. A record that an immediate write
// (rename, re-pairing) stored after the copy carries a higher stamp and
// is not overwritten. If the write fails the records are marked dirty
// again for the next flush.
func (r *registry) flush() {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.mu.Lock()
	if len(r.dirty) == 0 {
		r.mu.Unlock()
		return
	}
	recs := make([]nodeRecord, 0, len(r.dirty))
	for id := range r.dirty {
		if e, ok := r.nodes[id]; ok {
			recs = append(recs, e.rec)
		}
	}
	clear(r.dirty)
	seq := r.st.nextSeq()
	r.mu.Unlock()
	if err := r.st.writeSnapshots(seq, recs); err != nil {
		r.s.storeFailed(err)
		r.mu.Lock()
		for _, rec := range recs {
			if _, ok := r.nodes[rec.ID]; ok {
				r.dirty[rec.ID] = true
			}
		}
		r.mu.Unlock()
	}
}

// nodeNotFoundMessage is the NOT_FOUND message for an unknown nodeId. The
// CLI turns a node name into its nodeId first and sends an unknown word
// as it is, so the message names both.
const nodeNotFoundMessage = "no node has this name or nodeId ('lemon nodes' lists them)"

// errUnknownNode answers a call for a nodeId the controller does not know.
func errUnknownNode() *protocol.Error {
	return protocol.Errorf(protocol.CodeNotFound, nodeNotFoundMessage)
}

// known reports whether nodeID is a node the controller knows (online or
// offline).
func (r *registry) known(nodeID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.nodes[nodeID]
	return ok
}

// pin resolves nodeID to its live connection and session generation for
// a call of spec: NOT_FOUND for an unknown node, UNAVAILABLE node_offline
// when it has no live connection, UNAVAILABLE node_method_unavailable when
// it did not advertise the method at spec.Version.
func (r *registry) pin(nodeID string, spec protocol.MethodSpec) (*conn, uint64, *protocol.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.nodes[nodeID]
	if !ok {
		return nil, 0, errUnknownNode()
	}
	if e.live == nil {
		return nil, 0, protocol.DomainError(protocol.CodeUnavailable, protocol.DomainNodeOffline,
			"the node is offline").WithRetry(true, false)
	}
	if v, ok := e.rec.Methods[spec.Name]; !ok || v != spec.Version {
		if um, known := e.unserved[spec.Name]; known && !ok {
			if um.denied {
				return nil, 0, protocol.DomainError(protocol.CodeForbidden, protocol.DomainCapabilityDenied,
					"the node's capabilities do not allow this method")
			}
			return nil, 0, protocol.DomainError(protocol.CodeUnavailable, protocol.DomainModuleRefused,
				"module "+um.family+" was refused by the node: "+um.reason).WithRetry(true, false)
		}
		return nil, 0, protocol.DomainError(protocol.CodeUnavailable, protocol.DomainNodeMethodUnavailable,
			"the node does not serve this method at the required version").WithRetry(true, false)
	}
	return e.live, e.liveGen, nil
}

// stillServes reports whether c with generation gen is still the node's
// live connection and session generation.
func (r *registry) stillServes(nodeID string, c *conn, gen uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.nodes[nodeID]
	return ok && e.live == c && e.liveGen == gen && e.rec.Generation == gen && !c.isGone()
}

// online reports whether the node has a live socket here or, clustered,
// on another controller.
func (e *nodeEntry) online() bool { return e.live != nil || e.remoteOnline }

// summary is the node's list entry. A node another controller of the
// cluster holds has no connect time here: its LastSeenAtMs, which the
// holder stamped when the node connected (and replicated), stands for it.
func (e *nodeEntry) summary() protocol.NodeSummary {
	connected := e.connectedAtMs
	if e.live == nil && e.remoteOnline {
		connected = e.rec.LastSeenAtMs
	}
	return protocol.NodeSummary{
		NodeID:        e.rec.ID,
		Name:          e.rec.Name,
		Online:        e.online(),
		Identity:      e.rec.Identity,
		ConnectedAtMs: connected,
		LastSeenAtMs:  e.rec.LastSeenAtMs,
	}
}

func (r *registry) list() protocol.NodeListResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := protocol.NodeListResult{Nodes: make([]protocol.NodeSummary, 0, len(r.nodes))}
	for _, e := range r.nodes {
		out.Nodes = append(out.Nodes, e.summary())
	}
	sort.Slice(out.Nodes, func(i, j int) bool {
		a, b := nameKey(out.Nodes[i].Name), nameKey(out.Nodes[j].Name)
		if a != b {
			return a < b
		}
		return out.Nodes[i].NodeID < out.Nodes[j].NodeID
	})
	return out
}

func (r *registry) describe(nodeID string) (protocol.NodeDescription, *protocol.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.nodes[nodeID]
	if !ok {
		return protocol.NodeDescription{}, protocol.Errorf(protocol.CodeNotFound, nodeNotFoundMessage)
	}
	d := protocol.NodeDescription{
		NodeSummary:     e.summary(),
		Methods:         e.rec.Methods,
		ModuleSetDigest: e.rec.ModuleSetDigest,
		MaxPayload:      e.rec.MaxPayload,
		Capabilities:    e.rec.Capabilities,
		Client:          e.rec.Client,
		Modules:         e.rec.Modules,
	}
	if d.Methods == nil {
		d.Methods = map[string]int{}
	}
	return d, nil
}

// connectNode runs the node side of the handshake.
func (c *conn) connectNode(id string, p *protocol.ConnectParams) bool {
	adv := p.Node
	if adv == nil {
		c.respondErr(id, protocol.InvalidParams("node", "node is required for role node"))
		return true
	}
	if len(p.Scopes) > 0 {
		c.respondErr(id, protocol.InvalidParams("scopes", "a node session holds fixed scopes"))
		return true
	}
	if e := validateAdvertise(adv); e != nil {
		c.respondErr(id, e)
		return true
	}
	a, e := c.s.reg.authenticateNode(p.Auth.Token, adv)
	if e != nil && c.s.fed != nil && e.Code == protocol.CodeUnauthorized && c.s.fed.refreshSession(p.Auth.Token) {
		// Clustered: paired on another controller a moment ago.
		a, e = c.s.reg.authenticateNode(p.Auth.Token, adv)
	}
	if e != nil {
		c.s.log.Info("node connect refused", "conn", c.id, "addr", c.addr, "code", e.Code, "reason", e.DomainCode())
		c.s.metrics.connects.WithLabelValues(protocol.RoleNode, e.Code).Inc()
		c.authFailed(e)
		c.respondErr(id, e)
		c.closeWith(websocket.ClosePolicyViolation, "unauthorized")
		return false
	}
	c.peerMax = c.s.cfg.MaxPayload
	if adv.MaxPayload > 0 && adv.MaxPayload < c.peerMax {
		c.peerMax = adv.MaxPayload
	}
	c.role, c.scopes, c.clientID = protocol.RoleNode, []string{protocol.ScopeNodeInvoke, protocol.ScopeNodeEvent}, p.Client.ID
	c.node, c.generation = a.entry, a.generation
	nodeID := a.entry.rec.ID
	// Every event (node.invoke.request, node.invoke.cancel, ...) is
	// queued under c.eventMu. Holding it from before c goes live until
	// hello-ok is queued keeps hello-ok the first frame after connect,
	// while the hello-ok itself is queued without the registry lock: a
	// node that stops reading then delays only calls routed to it, never
	// node.list, node.describe or other nodes' connects. Lock order:
	// c.eventMu, then r.mu (nothing sends under r.mu).
	if f := c.s.fed; f != nil {
		// Clustered: take the node's holder key first, so no other
		// controller still serves it once it goes live here.
		if e := f.claim(c, nodeID, a.generation, a.session != ""); e != nil {
			c.node = nil
			c.respondErr(id, e)
			c.closeWith(websocket.ClosePolicyViolation, "unauthorized")
			return false
		}
	}
	c.eventMu.Lock()
	old, e := c.s.reg.attach(a, c, adv, p.Client, func() {
		c.connected = true
		c.touch()
	})
	if e != nil {
		c.eventMu.Unlock()
		c.connected = false
		c.node = nil
		if f := c.s.fed; f != nil {
			f.release(nodeID, c)
		}
		c.respondErr(id, e)
		c.closeWith(websocket.ClosePolicyViolation, "unauthorized")
		return false
	}
	// The replaced connection is closed first, so its calls fail at once
	// even if this node is slow to take its hello-ok.
	if old != nil {
		old.abandon()
		old.closeWith(CloseSessionReplaced, "replaced by a newer connection of this node")
	}
	if hook := c.s.reg.testHookBeforeHello; hook != nil {
		hook(c)
	}
	// If a newer connection of this node (or a re-pairing) took over
	// meanwhile, it has closed c: c's close frame is queued ahead (the
	// writer stops there, so the node never reads this hello-ok), or c's
	// socket is already shut (the send fails). A takeover after this send
	// closes c right behind its hello-ok.
	c.sendJSON(c.s.hello(c, &nodeID))
	c.eventMu.Unlock()
	c.s.log.Info("node connected", "conn", c.id, "node", nodeID, "addr", c.addr)
	return true
}

// validateAdvertise bounds what a node declares in connect.
func validateAdvertise(adv *protocol.NodeAdvertise) *protocol.Error {
	if adv.Name != "" {
		if _, e := protocol.NormalizeNodeName("node.name", adv.Name); e != nil {
			return e
		}
	}
	if adv.NodeID != "" {
		if e := protocol.RequireNodeID(adv.NodeID); e != nil {
			return protocol.InvalidParams("node.nodeId", "node.nodeId is malformed")
		}
	}
	if e := protocol.ValidateAdvertisedMethods("node.methods", adv.Methods); e != nil {
		return e
	}
	if len(adv.ModuleSetDigest) > 128 {
		return protocol.InvalidParams("node.moduleSetDigest", "node.moduleSetDigest is too long")
	}
	if adv.MaxPayload < 0 || (adv.MaxPayload > 0 && adv.MaxPayload < 1024) {
		return protocol.InvalidParams("node.maxPayload", "node.maxPayload must be at least 1024 bytes")
	}
	if e := validateModuleStatuses(adv.Modules); e != nil {
		return e
	}
	if len(adv.Capabilities) > 64 {
		return protocol.InvalidParams("node.capabilities", "too many capabilities")
	}
	for _, cp := range adv.Capabilities {
		if cp != "all" && !capabilityRE.MatchString(cp) {
			return protocol.InvalidParams("node.capabilities", "malformed capability")
		}
	}
	return nil
}

// capabilityRE is a capability name as nodes and modules may use it
// (docs/POLICY.md, "Capabilities"); "all" is the unrestricted ceiling.
var capabilityRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// plainText reports whether s is printable ASCII only: what a node's
// module report may carry, since operators read it in a terminal
// (no control, bidi, line-separator or zero-width characters).
func plainText(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// validateModuleStatuses bounds a node's per-module report: at most
// protocol.MaxAdvertisedModules entries; family and version short and
// printable, sha256 64 lowercase hex digits, state loaded or refused, a
// reason of at most protocol.MaxModuleReasonBytes printable bytes and
// only on a refused module.
func validateModuleStatuses(st []protocol.ModuleStatus) *protocol.Error {
	if len(st) > protocol.MaxAdvertisedModules {
		return protocol.InvalidParams("node.modules", "too many module statuses")
	}
	for _, m := range st {
		bad := m.Family == "" || len(m.Family) > 64 || !plainText(m.Family) ||
			len(m.Version) > 64 || !plainText(m.Version) || !isHex64(m.SHA256) ||
			(m.State != protocol.ModuleLoaded && m.State != protocol.ModuleRefused) ||
			len(m.Reason) > protocol.MaxModuleReasonBytes || !plainText(m.Reason) ||
			(m.State == protocol.ModuleLoaded && m.Reason != "")
		if bad {
			return protocol.InvalidParams("node.modules", "malformed module status")
		}
	}
	return nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// liveConns returns every node's live connection.
func (r *registry) liveConns() []*conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*conn
	for _, e := range r.nodes {
		if e.live != nil {
			out = append(out, e.live)
		}
	}
	return out
}
