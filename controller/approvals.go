package controller

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"lemon/policies/authority"
	"lemon/protocol"
)

// Approvals (docs/POLICY.md, "Approvals"): a node request whose method the
// operator's policy holds (require_approval, approvals) waits here until
// another operator entry holding operator.approvals approves or denies
// it, or approval_timeout_ms passes. The record is content-free: method,
// node, principal, times and SHA-256 digests of the params (and of argv
// and cwd for runs). A "once" approval is a grant that lets identical
// calls of the same principal in the same context through without asking
// again; a run's processId is not part of the identity.

// maxOnceGrants bounds the once-grants kept; the oldest is forgotten
// first (its call then asks again).
const maxOnceGrants = 1024

type approvalBook struct {
	s *Server
	// timeout is the wait in ns (Config.ApprovalTimeout; tests shorten it).
	timeout    atomic.Int64
	mu         sync.Mutex
	pending    map[string]*heldRequest
	grants     map[string]bool
	grantOrder []string
}

type heldRequest struct {
	info      protocol.ApprovalInfo
	requester *conn
	done      chan string // buffered 1: the final status
	rev       uint64      // its lemon_approvals revision (clustered)
}

func newApprovalBook(s *Server) *approvalBook {
	b := &approvalBook{s: s, pending: map[string]*heldRequest{}, grants: map[string]bool{}}
	b.timeout.Store(int64(s.cfg.ApprovalTimeout))
	return b
}

// grantKey identifies a call for a once-grant: principal, method, node,
// the params (without a run's processId) and the context (without its
// runId).
func grantKey(ctx authority.ExecutionContext, method, nodeID string, params json.RawMessage) string {
	ctx.RunID = "grant"
	enc, _ := json.Marshal(ctx)
	p := params
	if method == protocol.MethodProcessRun {
		var m map[string]json.RawMessage
		if json.Unmarshal(params, &m) == nil {
			delete(m, "processId")
			p, _ = json.Marshal(m) // sorted keys: a stable form
		}
	}
	b, _ := json.Marshal([]string{ctx.Principal, method, nodeID, sha256Hex(p), sha256Hex(enc)})
	return sha256Hex(b)
}

// info builds the content-free record of a held call.
func approvalInfo(ctx authority.ExecutionContext, mode, method, nodeID string, params json.RawMessage, now time.Time, ttl time.Duration) protocol.ApprovalInfo {
	info := protocol.ApprovalInfo{ApprovalID: "appr-" + randomHex(12), Status: protocol.ApprovalPending, Method: method,
		NodeID: nodeID, Principal: ctx.Principal, Mode: mode, RequestedAtMs: now.UnixMilli(),
		ExpiresAtMs: now.Add(ttl).UnixMilli(), ParamsSHA256: sha256Hex(params)}
	if method == protocol.MethodProcessRun {
		var p struct {
			Argv []string `json:"argv"`
			Cwd  string   `json:"cwd"`
		}
		if json.Unmarshal(params, &p) == nil {
			argv, _ := json.Marshal(p.Argv)
			info.ArgvSHA256 = sha256Hex(argv)
			info.CwdSHA256 = sha256Hex([]byte(p.Cwd))
		}
	}
	return info
}

// hold waits for a decision on c's call. nil means approved (or covered
// by a once-grant); otherwise the error to answer: denied, expired, or too
// many held. Nothing was sent to the node in any case.
func (b *approvalBook) hold(c *conn, ctx authority.ExecutionContext, mode, method, nodeID string, params json.RawMessage) *protocol.Error {
	key := grantKey(ctx, method, nodeID, params)
	cfg := b.s.cfg
	ttl := time.Duration(b.timeout.Load())
	b.mu.Lock()
	if mode == authority.ModeOnce && b.grants[key] {
		b.mu.Unlock()
		return nil
	}
	mine := 0
	for _, h := range b.pending {
		if h.info.Principal == ctx.Principal {
			mine++
		}
	}
	if len(b.pending) >= cfg.MaxPendingApprovals || mine >= cfg.MaxPendingApprovalsPerPrincipal {
		b.mu.Unlock()
		return protocol.DomainError(protocol.CodeRateLimited, protocol.DomainTooManyApprovals,
			"too many requests are waiting for approval").WithRetry(true, false)
	}
	h := &heldRequest{info: approvalInfo(ctx, mode, method, nodeID, params, b.s.now(), ttl),
		requester: c, done: make(chan string, 1)}
	b.pending[h.info.ApprovalID] = h
	b.mu.Unlock()
	f := b.s.fed
	if f != nil {
		// Shared with the cluster (approvals_cluster.go); the call still
		// waits here, where its caller is.
		rev, err := f.putApproval(h.info)
		if err != nil {
			b.remove(h.info.ApprovalID)
			return clusterUnavailable()
		}
		h.rev = rev
		defer f.forgetApproval(h.info.ApprovalID)
	}

	b.s.log.Info("approval requested", "approval", h.info.ApprovalID, "method", logMethod(method), "principal", ctx.Principal)
	c.sendEvent(protocol.EventApprovalRequested, h.info)

	timer := time.NewTimer(ttl)
	defer timer.Stop()
	var status string
	select {
	case status = <-h.done:
	case <-timer.C:
		status = protocol.ApprovalExpired
		if f != nil {
			if decided := f.withdrawApproval(h.info.ApprovalID, h.rev); decided != "" {
				b.release(h.info.ApprovalID, decided) // an approver won the swap
			}
		}
		if !b.remove(h.info.ApprovalID) {
			status = <-h.done // decided just now
		}
	case <-c.ctx.Done():
		if f != nil {
			if decided := f.withdrawApproval(h.info.ApprovalID, h.rev); decided != "" {
				b.release(h.info.ApprovalID, decided)
			}
		}
		if b.remove(h.info.ApprovalID) {
			return protocol.Errorf(protocol.CodeUnavailable, "the caller disconnected")
		}
		status = <-h.done
		if status == protocol.ApprovalApproved {
			// Approved as the caller left: nothing will be sent.
			return protocol.Errorf(protocol.CodeUnavailable, "the caller disconnected")
		}
	}
	c.sendEvent(protocol.EventApprovalResolved, protocol.ApprovalResolvedEvent{ApprovalID: h.info.ApprovalID, Status: status})
	switch status {
	case protocol.ApprovalApproved:
		if mode == authority.ModeOnce {
			b.grant(key)
			if f != nil {
				f.putGrant(key, h.info.ApprovalID)
			}
		}
		return nil
	case protocol.ApprovalDenied:
		return refuse(protocol.DomainApprovalDenied, "an approver denied the request")
	}
	b.s.log.Info("approval expired", "approval", h.info.ApprovalID, "method", logMethod(method), "principal", ctx.Principal)
	return protocol.DomainError(protocol.CodeTimeout, protocol.DomainApprovalTimeout,
		"no approver decided before the approval timeout").WithRetry(true, false)
}

// release hands a decision to a call held here, once: the first of the
// local decision and the cluster watch wins; later ones find nothing.
func (b *approvalBook) release(id, status string) bool {
	b.mu.Lock()
	h, ok := b.pending[id]
	if ok {
		delete(b.pending, id)
	}
	b.mu.Unlock()
	if ok {
		h.done <- status
	}
	return ok
}

// remove takes a held request out unless a decision took it first.
func (b *approvalBook) remove(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.pending[id]; !ok {
		return false
	}
	delete(b.pending, id)
	return true
}

func (b *approvalBook) grant(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.grants[key] {
		return
	}
	if len(b.grantOrder) >= maxOnceGrants {
		delete(b.grants, b.grantOrder[0])
		b.grantOrder = b.grantOrder[1:]
	}
	b.grants[key] = true
	b.grantOrder = append(b.grantOrder, key)
}

// list returns the held requests, oldest first (of the whole cluster
// when clustered).
func (b *approvalBook) list() (protocol.ApprovalListResult, *protocol.Error) {
	if f := b.s.fed; f != nil {
		return f.listApprovals()
	}
	b.mu.Lock()
	out := make([]protocol.ApprovalInfo, 0, len(b.pending))
	for _, h := range b.pending {
		out = append(out, h.info)
	}
	b.mu.Unlock()
	sortApprovals(out)
	return protocol.ApprovalListResult{Approvals: out}, nil
}

// decide approves or denies a held request for approver c (its scope and
// policy were checked by the caller). An approver may not decide a request
// of its own principal.
func (b *approvalBook) decide(c *conn, p protocol.ApprovalDecideParams) (protocol.ApprovalDecideResult, *protocol.Error) {
	var status string
	switch p.Decision {
	case protocol.DecisionApprove:
		status = protocol.ApprovalApproved
	case protocol.DecisionDeny:
		status = protocol.ApprovalDenied
	default:
		return protocol.ApprovalDecideResult{}, protocol.InvalidParams("decision", `decision must be "approve" or "deny"`)
	}
	if p.ApprovalID == "" || len(p.ApprovalID) > 64 {
		return protocol.ApprovalDecideResult{}, protocol.InvalidParams("approvalId", "approvalId is required (at most 64 bytes)")
	}
	if f := b.s.fed; f != nil {
		rec, e := f.decideApproval(c, p.ApprovalID, status)
		if e != nil {
			return protocol.ApprovalDecideResult{}, e
		}
		if rec.Holder == f.name {
			b.release(p.ApprovalID, status) // else the holder's watch does
		}
		b.s.log.Info("approval decided", "approval", p.ApprovalID, "method", logMethod(rec.Info.Method),
			"principal", rec.Info.Principal, "approver", c.op.name, "status", status, "holder", rec.Holder)
		return protocol.ApprovalDecideResult{ApprovalID: p.ApprovalID, Status: status}, nil
	}
	b.mu.Lock()
	h, ok := b.pending[p.ApprovalID]
	if !ok {
		b.mu.Unlock()
		return protocol.ApprovalDecideResult{}, protocol.DomainError(protocol.CodeNotFound, protocol.DomainApprovalNotFound,
			"no request waiting for approval has this approvalId")
	}
	if h.info.Principal == c.op.name {
		b.mu.Unlock()
		return protocol.ApprovalDecideResult{}, refuse(protocol.DomainSelfApproval,
			"an operator entry cannot decide its own requests; another entry holding operator.approvals must")
	}
	delete(b.pending, p.ApprovalID)
	b.mu.Unlock()
	h.done <- status
	b.s.log.Info("approval decided", "approval", p.ApprovalID, "method", logMethod(h.info.Method),
		"principal", h.info.Principal, "approver", c.op.name, "status", status)
	return protocol.ApprovalDecideResult{ApprovalID: p.ApprovalID, Status: status}, nil
}
