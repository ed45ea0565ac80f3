package controller

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"lemon/policies/authority"
	"lemon/protocol"
)

// Fan-out (docs/PROTOCOL.md, "Fan-out"): node.fanout runs one node method
// on many nodes. Each node's call is a sub-request of the fan-out on the
// same connection: it goes through routeNodeMethod exactly as a direct
// call would (params validation, an execution context of its own with
// its own invokeId as runId, Decide, pinning, deadlines, cancel on
// disconnect) and gets an audit record of its own. Its answer, instead of
// being written to the socket, is caught by the sub-request's sink (see
// subSink in respondErr and respondNodeResult) and sent as a
// node.fanout.result event. Events go through the connection's queue, so
// a caller that does not read them is cut as a slow consumer, which
// cancels the rest of the fan-out.

// subPrefix starts every sub-request id: a byte that is never valid
// UTF-8, so no id a peer sends (ids are UTF-8 text) can equal one.
const subPrefix = "\xff"

type subSinkFunc func(payload json.RawMessage, e *protocol.Error)

// subSink returns the sink of sub-request id, or nil for a peer's id.
func (c *conn) subSink(id string) subSinkFunc {
	if !strings.HasPrefix(id, subPrefix) {
		return nil
	}
	if v, ok := c.subs.Load(id); ok {
		return v.(subSinkFunc)
	}
	return nil
}

// fanoutTarget is one selected node.
type fanoutTarget struct{ id, name string }

// selectFanout resolves the fan-out's selection: the listed ids in order
// (names from the registry when known), or the registry's nodes that
// match the filter in nodeId order. More than max nodes → nil, false.
func (r *registry) selectFanout(p protocol.FanoutParams, max int) ([]fanoutTarget, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.NodeIDs != nil {
		out := make([]fanoutTarget, len(p.NodeIDs))
		for i, id := range p.NodeIDs {
			out[i].id = id
			if e, ok := r.nodes[id]; ok {
				out[i].name = e.rec.Name
			}
		}
		return out, true
	}
	prefix := strings.ToLower(p.Filter.NamePrefix)
	var out []fanoutTarget
	for _, e := range r.nodes {
		if p.Filter.Online != nil && e.online() != *p.Filter.Online {
			continue
		}
		if prefix != "" && !strings.HasPrefix(nameKey(e.rec.Name), prefix) {
			continue
		}
		if len(out) == max {
			return nil, false
		}
		out = append(out, fanoutTarget{id: e.rec.ID, name: e.rec.Name})
	}
	sortTargets(out)
	return out, true
}

// sortTargets puts ts in nodeId order, as a paged node.list.
func sortTargets(ts []fanoutTarget) {
	sort.Slice(ts, func(i, j int) bool { return ts[i].id < ts[j].id })
}

// handleFanout serves node.fanout. The caller holds operator.read (the
// controller method's scope); the inner method's scope is checked here.
func (c *conn) handleFanout(id string, params, ec json.RawMessage) {
	max := c.s.cfg.MaxFanoutNodes
	p, e := protocol.ValidateFanout(params, max)
	if e != nil {
		c.respondErr(id, e)
		return
	}
	spec, ok := c.s.routes()[p.Method]
	if !ok {
		c.respondErr(id, protocol.InvalidParams("method", "method is not a node method the pinned set declares"))
		return
	}
	if !c.requireScope(id, spec.Scope) {
		return
	}
	args, fields, e := argsObject(p.Args)
	if e != nil {
		c.respondErr(id, e)
		return
	}
	if _, has := fields["nodeId"]; has {
		c.respondErr(id, protocol.InvalidParams("args.nodeId", "args must not hold nodeId: the fan-out adds each node's"))
		return
	}
	// A fan-out does not wait for approvals: a method the operator's
	// policy holds (or denies) is refused as a whole, before any node is
	// called (docs/POLICY.md, "Approvals").
	m := methodOf(spec)
	ctx, e := c.requestContext("fanout-"+randomHex(8), m, ec)
	if e == nil {
		switch d := authority.Decide(ctx.Policy, m); d.Verdict {
		case authority.NeedsApproval:
			e = refuse(protocol.DomainFanoutNeedsApproval, "the operator's policy holds %s for approval; a fan-out cannot wait for approvals: call the nodes one by one", spec.Name)
		case authority.Deny:
			e = refuse(protocol.DomainPolicyDenied, "the operator's policy refuses %s (rule %s)", spec.Name, d.Rule)
		}
	}
	if e != nil {
		c.respondErr(id, e)
		return
	}
	targets, fits := c.s.reg.selectFanout(p, max)
	if !fits {
		fe := protocol.DomainError(protocol.CodeInvalidParams, protocol.DomainFanoutTooLarge,
			"the filter selects more nodes than one fan-out may reach: narrow it")
		fe.Details.Field = "filter"
		c.respondErr(id, fe.WithRetry(false, false))
		return
	}
	c.fmu.Lock()
	if c.fanouts >= c.s.cfg.MaxFanoutsPerConn {
		c.fmu.Unlock()
		c.respondErr(id, protocol.DomainError(protocol.CodeRateLimited, protocol.DomainTooManyFanouts,
			"this connection already runs the most fan-outs at once").WithRetry(true, false))
		return
	}
	c.fanouts++
	c.fmu.Unlock()
	defer func() {
		c.fmu.Lock()
		c.fanouts--
		c.fmu.Unlock()
	}()

	start := time.Now()
	fanoutID := "fan-" + randomHex(8)
	sum := protocol.FanoutSummary{FanoutID: fanoutID, Method: spec.Name, Total: len(targets)}
	var smu sync.Mutex
	sem := make(chan struct{}, p.Concurrency)
	var wg sync.WaitGroup
	budget := c.replyBudget()
	for i, t := range targets {
		select {
		case sem <- struct{}{}:
		case <-c.ctx.Done():
		}
		if c.ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			ev := c.fanoutOne(id, fanoutID, i, t, spec, args, ec)
			if _, fits := c.sendEventMax(protocol.EventFanoutResult, ev, budget); !fits {
				ev.Result = nil
				ev.OK = false
				ev.Error = uncertain(spec.Pure, protocol.DomainError(protocol.CodeInternal, protocol.DomainPayloadTooLarge,
					"the node's result does not fit the connection's maxPayload"))
				ev.RetrySafe, ev.MutationMayHaveApplied = spec.Pure, !spec.Pure
				c.sendEvent(protocol.EventFanoutResult, ev)
			}
			smu.Lock()
			if ev.OK {
				sum.OK++
			} else {
				sum.Failed++
			}
			smu.Unlock()
		}()
	}
	wg.Wait()
	if c.ctx.Err() != nil {
		return // the caller is gone: nobody reads the summary
	}
	sum.DurationMs = time.Since(start).Milliseconds()
	c.respond(id, sum)
}

// fanoutOne runs the fan-out's call on one node as a sub-request and
// returns its event.
func (c *conn) fanoutOne(reqID, fanoutID string, i int, t fanoutTarget, spec routeSpec, args json.RawMessage, ec json.RawMessage) protocol.FanoutResult {
	ev := protocol.FanoutResult{RequestID: reqID, FanoutID: fanoutID, NodeID: t.id, Name: t.name}
	sub := subPrefix + fanoutID + "/" + strconv.Itoa(i)
	var (
		payload  json.RawMessage
		err      *protocol.Error
		answered bool
	)
	c.subs.Store(sub, subSinkFunc(func(pl json.RawMessage, e *protocol.Error) {
		if !answered {
			payload, err, answered = pl, e, true
		}
	}))
	defer c.subs.Delete(sub)
	tr := c.beginRequest(sub, spec.Name)
	c.noteCall(sub, t.id, "") // the record names the node even when refused before dispatch
	c.routeNodeMethod(sub, spec, withNodeID(args, t.id), ec)
	tr.mu.Lock()
	dispatched := tr.invokeID != ""
	tr.mu.Unlock()
	c.endRequest(sub, tr)
	switch {
	case !answered:
		// The caller disconnected mid-call (its event will not be read).
		err = uncertain(spec.Pure, protocol.DomainError(protocol.CodeUnavailable, protocol.DomainNodeDisconnected,
			"the fan-out ended before the node answered"))
		if !dispatched {
			err = notDispatched()
		}
	case err == nil:
		ev.OK, ev.Result = true, payload
		ev.RetrySafe, ev.MutationMayHaveApplied = spec.Pure, !spec.Pure
		return ev
	}
	ev.Error = err
	switch {
	case err.Details != nil && err.Details.RetrySafe != nil && err.Details.MutationMayHaveApplied != nil:
		ev.RetrySafe, ev.MutationMayHaveApplied = *err.Details.RetrySafe, *err.Details.MutationMayHaveApplied
	case !dispatched:
		// Refused before anything was sent to the node.
		ev.RetrySafe = err.Details != nil && err.Details.RetrySafe != nil && *err.Details.RetrySafe
	default:
		ev.RetrySafe, ev.MutationMayHaveApplied = spec.Pure, !spec.Pure
	}
	return ev
}

// withNodeID prepends "nodeId":id to the JSON object args.
func withNodeID(args json.RawMessage, id string) json.RawMessage {
	nid, _ := json.Marshal(id)
	rest := bytes.TrimSpace(args[1:])
	b := make([]byte, 0, len(args)+len(nid)+12)
	b = append(b, `{"nodeId":`...)
	b = append(b, nid...)
	if len(rest) > 0 && rest[0] != '}' {
		b = append(b, ',')
	}
	return append(b, rest...)
}
