package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"time"
	"unicode/utf8"

	"lemon/protocol"
)

// call is one node invocation in flight, registered on the node's pinned
// connection until its result, timeout, cancel or a disconnect.
type call struct {
	invokeID string
	method   string
	pure     bool             // a declared pure read (retry class)
	result   chan callOutcome // buffered 1; receives exactly one outcome
}

type callOutcome struct {
	payload json.RawMessage
	err     *protocol.Error
}

func newCall(method string, pure bool) *call {
	return newCallID(randomHex(16), method, pure)
}

func newCallID(invokeID, method string, pure bool) *call {
	return &call{invokeID: invokeID, method: method, pure: pure, result: make(chan callOutcome, 1)}
}

// finish delivers the outcome; only the first outcome counts.
func (cl *call) finish(o callOutcome) {
	select {
	case cl.result <- o:
	default:
	}
}

// uncertain returns err with the retry classification of a call whose
// outcome is unknown: methods declared pure reads are retry-safe and
// cannot have mutated anything; every other method may have applied.
func uncertain(pure bool, err *protocol.Error) *protocol.Error {
	if pure {
		return err.WithRetry(true, false)
	}
	return err.WithRetry(false, true)
}

func disconnectError(pure bool) *protocol.Error {
	return uncertain(pure, protocol.DomainError(protocol.CodeUnavailable, protocol.DomainNodeDisconnected,
		"the node disconnected before answering"))
}

func notDispatched() *protocol.Error {
	return protocol.DomainError(protocol.CodeUnavailable, protocol.DomainNodeOffline,
		"the node went offline before the request was delivered").WithRetry(true, false)
}

// addPending registers cl on a node connection; false once it is gone.
func (c *conn) addPending(cl *call) bool {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.gone {
		return false
	}
	c.pending[cl.invokeID] = cl
	return true
}

// takePending removes and returns the call of invokeID, or nil.
func (c *conn) takePending(invokeID string) *call {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	cl := c.pending[invokeID]
	delete(c.pending, invokeID)
	return cl
}

func (c *conn) isGone() bool {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	return c.gone
}

// abandon fails every call in flight on a node connection that is being
// replaced or revoked, before its socket finishes closing.
func (c *conn) abandon() {
	c.pmu.Lock()
	c.gone = true
	pend := c.pending
	c.pending = map[string]*call{}
	c.pmu.Unlock()
	for _, cl := range pend {
		cl.finish(callOutcome{err: disconnectError(cl.pure)})
	}
}

// routeNodeMethod validates params against the declared schema and then
// the protocol's own validator (for the spec's methods), resolves and pins
// the node, delivers node.invoke.request and answers the caller with the
// node's result (docs/PROTOCOL.md). Scope was checked by the caller; the
// operator's authority is checked here (authorizeNode), after the params
// and before the node is pinned, and the invocation carries the request's
// execution context. ec is the caller's executionContext, or nil.
func (c *conn) routeNodeMethod(id string, spec routeSpec, params, ec json.RawMessage) {
	if len(bytes.TrimSpace(params)) == 0 || string(bytes.TrimSpace(params)) == "null" {
		params = json.RawMessage("{}")
	}
	if t := bytes.TrimSpace(params); t[0] != '{' {
		c.respondErr(id, protocol.InvalidParams("", "params must be a JSON object"))
		return
	}
	// The spec's own validator first, so its methods keep the spec's error
	// shapes; then the declared schema (params are part of a frame that
	// passed CheckJSONLimits and ValidJSONText on arrival).
	if spec.Validate != nil {
		if e := spec.Validate(params); e != nil {
			c.respondErr(id, e)
			return
		}
	}
	if spec.Params != nil {
		if e := spec.Params.ValidateChecked(params); e != nil {
			c.respondErr(id, e)
			return
		}
	}
	// params are valid JSON (a part of a checked frame, or built from
	// one): nodeId is found by splitting, as encoding/json would read it.
	ms, err := protocol.SplitObject(params)
	if err != nil {
		c.respondErr(id, protocol.InvalidParams("", "params must be a JSON object"))
		return
	}
	var nodeID string
	if raw, ok := protocol.LookupMember(ms, "nodeId"); ok && json.Unmarshal(raw, &nodeID) != nil {
		c.respondErr(id, protocol.InvalidParams("nodeId", "nodeId must be a string"))
		return
	}
	if e := protocol.RequireNodeID(nodeID); e != nil {
		c.respondErr(id, e)
		return
	}
	invokeID := randomHex(16)
	ctxJSON, ok := c.authorizeNode(id, spec, nodeID, invokeID, params, ec)
	if !ok {
		return
	}
	node, gen, e := c.s.reg.pin(nodeID, spec.MethodSpec)
	if e != nil && c.s.fed != nil && (e.DomainCode() == protocol.DomainNodeOffline ||
		(e.Code == protocol.CodeNotFound && c.s.fed.held(nodeID))) {
		// Clustered: the node's socket may be held by another controller
		// (docs/CLUSTER.md, "Routing").
		if isTransferMethod(spec.Name) {
			// A transfer's data connections meet at the controller holding
			// the node's socket (docs/CLUSTER.md, "Limits").
			c.respondErr(id, transferNotRouted(c.s.fed.holderName(nodeID)))
			return
		}
		c.noteCall(id, nodeID, invokeID)
		payload, e, abandoned := c.s.fed.invokeRemote(c.ctx, spec, nodeID, invokeID, params, ctxJSON)
		if abandoned {
			return
		}
		if e != nil {
			c.respondErr(id, e)
			return
		}
		c.respondNodeResult(id, spec.Pure, payload)
		return
	}
	if e != nil {
		c.respondErr(id, e)
		return
	}
	if isTransferMethod(spec.Name) {
		withTicket, end, e := c.s.transfers.open(params)
		if e != nil {
			c.respondErr(id, e)
			return
		}
		defer end()
		params = withTicket
	}
	c.noteCall(id, nodeID, invokeID)
	payload, e, abandoned := c.s.deliver(c.ctx, node, gen, spec, nodeID, invokeID, params, ctxJSON)
	if abandoned {
		return
	}
	if e != nil {
		c.respondErr(id, e)
		return
	}
	c.respondNodeResult(id, spec.Pure, payload)
}

// deliver hands one invocation to the node connection it was pinned to
// (generation gen) and waits for its outcome: the node's result payload,
// or an error carrying truthful outcome flags (not delivered: retry-safe;
// delivered and lost, timed out or cut off: uncertain). abandoned is true
// when ctx ended first (the caller is gone): the node was told to cancel
// and nobody is to be answered. params are valid JSON; ctxJSON is the
// execution context, passed unchanged.
func (s *Server) deliver(ctx context.Context, node *conn, gen uint64, spec routeSpec, nodeID, invokeID string, params, ctxJSON json.RawMessage) (json.RawMessage, *protocol.Error, bool) {
	broker := spec.BrokerDeadline(params)
	cl := newCallID(invokeID, spec.Name, spec.Pure)
	if !node.addPending(cl) {
		return nil, notDispatched(), false
	}
	ev, err := protocol.AppendInvokeRequest(nil, &protocol.InvokeRequest{
		InvokeID:          cl.invokeID,
		NodeID:            nodeID,
		Method:            spec.Name,
		Args:              params,
		TimeoutMs:         broker.Milliseconds(),
		SessionGeneration: gen,
		ExecutionContext:  ctxJSON,
	})
	if err != nil { // not reached: params are valid JSON
		node.takePending(cl.invokeID)
		return nil, notDispatched(), false
	}
	// The node accepts frames up to the maxPayload it advertised; a larger
	// one would cost it its connection and every other call on it.
	if queued, fits := node.sendEventRaw(protocol.EventInvokeRequest, ev, node.peerMax); !queued {
		node.takePending(cl.invokeID)
		if !fits {
			return nil, protocol.DomainError(protocol.CodeInvalidParams, protocol.DomainPayloadTooLarge,
				"the request does not fit the maxPayload the node advertised").WithRetry(false, false), false
		}
		return nil, notDispatched(), false
	}
	timer := time.NewTimer(broker + spec.CallerSlack)
	defer timer.Stop()
	var o callOutcome
	select {
	case o = <-cl.result:
	case <-timer.C:
		if node.takePending(cl.invokeID) == nil {
			// The node's result (or a disconnect) took the call just
			// before the deadline; its outcome is on the way, and the node
			// was told its result was accepted.
			o = <-cl.result
			break
		}
		node.sendEvent(protocol.EventInvokeCancel, protocol.InvokeCancel{InvokeID: cl.invokeID})
		return nil, uncertain(spec.Pure, protocol.Errorf(protocol.CodeTimeout, "the node did not answer before the deadline")), false
	case <-ctx.Done():
		// The caller disconnected: cancel the node's work.
		if node.takePending(cl.invokeID) != nil {
			node.sendEvent(protocol.EventInvokeCancel, protocol.InvokeCancel{InvokeID: cl.invokeID})
		}
		return nil, nil, true
	}
	if o.err != nil {
		return nil, o.err, false
	}
	if h := s.hookAfterResult.Load(); h != nil {
		(*h)()
	}
	if spec.RecheckSession != nil && spec.RecheckSession(params) && !s.reg.stillServes(nodeID, node, gen) {
		return nil, protocol.DomainError(protocol.CodeConflict, protocol.DomainPrivateProofAckChanged,
			"the node's session changed before the acknowledgement was confirmed").WithRetry(false, true), false
	}
	return o.payload, nil, false
}

// respondNodeResult answers the caller with a node's result. One that
// would make the response exceed the caller's maxPayload becomes
// INTERNAL_ERROR payload_too_large with the method's outcome flags: the
// node did the work, so a pure read may be retried and a mutation may
// have applied.
func (c *conn) respondNodeResult(id string, pure bool, payload json.RawMessage) {
	if sink := c.subSink(id); sink != nil { // a fan-out's node call (fanout.go)
		c.noteAnswer(id, nil)
		sink(payload, nil)
		return
	}
	b, err := protocol.AppendOKResponse(nil, id, payload)
	if err == nil && len(b) <= c.s.cfg.MaxPayload {
		c.noteAnswer(id, nil)
		c.send(b)
		return
	}
	e := protocol.DomainError(protocol.CodeInternal, protocol.DomainPayloadTooLarge,
		"the result does not fit the connection's maxPayload")
	if err != nil {
		e = protocol.Errorf(protocol.CodeInternal, "internal error")
	}
	c.respondErr(id, uncertain(pure, e))
}

// handleInvokeResult takes a node's node.invoke.result. Only the
// connection the call was pinned to can answer it.
func (c *conn) handleInvokeResult(id string, params json.RawMessage, frameLen int) {
	p, e := protocol.DecodeInvokeResult(params)
	if e != nil {
		// Still fail the call if its id is readable, so the caller is not left waiting.
		var idOnly struct {
			InvokeID string `json:"invokeId"`
		}
		if json.Unmarshal(params, &idOnly) == nil && idOnly.InvokeID != "" {
			if cl := c.takePending(idOnly.InvokeID); cl != nil {
				cl.finish(callOutcome{err: uncertain(cl.pure, protocol.Errorf(protocol.CodeInternal, "the node sent a malformed result"))})
			}
		}
		c.respondErr(id, e)
		return
	}
	cl := c.takePending(p.InvokeID)
	if cl == nil {
		c.respondErr(id, protocol.Errorf(protocol.CodeNotFound, "no invocation in flight has this invokeId on this connection"))
		return
	}
	if h := c.s.hookAfterTake.Load(); h != nil {
		(*h)()
	}
	if frameLen > c.peerMax {
		cl.finish(callOutcome{err: uncertain(cl.pure, protocol.DomainError(protocol.CodeInternal,
			protocol.DomainPayloadTooLarge, "the node's result exceeds the maxPayload it advertised"))})
		c.respondErr(id, protocol.DomainError(protocol.CodeInvalidRequest, protocol.DomainPayloadTooLarge,
			"result exceeds the maxPayload this node advertised"))
		return
	}
	hasResult := len(p.Result) > 0 && string(bytes.TrimSpace(p.Result)) != "null"
	if hasResult == (p.Error != nil) {
		cl.finish(callOutcome{err: uncertain(cl.pure, protocol.Errorf(protocol.CodeInternal, "the node sent a malformed result"))})
		c.respondErr(id, protocol.InvalidParams("result", "exactly one of result and error is required"))
		return
	}
	if p.Error != nil {
		cl.finish(callOutcome{err: sanitizeNodeError(p.Error)})
	} else {
		cl.finish(callOutcome{payload: p.Result})
	}
	c.respond(id, protocol.NodeInvokeResultAck{Accepted: true})
}

var protocolCodes = map[string]bool{
	protocol.CodeInvalidRequest: true, protocol.CodeInvalidParams: true, protocol.CodeMethodNotFound: true,
	protocol.CodeUnauthorized: true, protocol.CodeForbidden: true, protocol.CodeNotFound: true,
	protocol.CodeConflict: true, protocol.CodeRateLimited: true, protocol.CodeTimeout: true,
	protocol.CodeInternal: true, protocol.CodeNotImplemented: true, protocol.CodeUnavailable: true,
}

// sanitizeNodeError bounds what a node's error may carry to the caller:
// a known protocol code, a short printable UTF-8 message (no control
// characters: an operator's terminal prints it), a domain code of
// [a-z0-9_], a field name, and the retry classification.
func sanitizeNodeError(e *protocol.Error) *protocol.Error {
	out := &protocol.Error{Code: e.Code, Message: e.Message}
	if !protocolCodes[out.Code] {
		out.Code = protocol.CodeInternal
	}
	if len(out.Message) > 1024 || !printable(out.Message) || out.Message == "" {
		out.Message = "the node reported an error"
	}
	if d := e.Details; d != nil {
		nd := &protocol.ErrorDetails{RetrySafe: d.RetrySafe, MutationMayHaveApplied: d.MutationMayHaveApplied}
		if isDomainCode(d.Code) {
			nd.Code = d.Code
		}
		if len(d.Field) <= 64 && printable(d.Field) {
			nd.Field = d.Field
		}
		out.Details = nd
	}
	return out
}

func isDomainCode(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b == '_' || (b >= 'a' && b <= 'z') || (b >= '0' && b <= '9')) {
			return false
		}
	}
	return true
}

// printable reports whether s is valid UTF-8 without C0 or C1 control
// characters (escape sequences, newlines, DEL).
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r < 0xa0) {
			return false
		}
	}
	return true
}
