package worker

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"
	"unicode/utf8"

	"lemon/client"
	"lemon/host/moduleset"
	"lemon/hostcalls/datadial"
	"lemon/protocol"
)

// DomainModuleSetSwitching: the node has installed a new module set and
// is finishing the calls in flight before it reconnects serving it; the
// call was not run (retrySafe:true).
const DomainModuleSetSwitching = "module_set_switching"

// MaxInvokeTimeout caps the deadline a node accepts from the controller
// (node.process.run may ask for long runs; anything beyond a day is a
// malformed request).
const MaxInvokeTimeout = 24 * time.Hour

// resultFrameOverhead is the size of a node.invoke.result request frame
// around its params, with the longest request id the client issues.
var resultFrameOverhead = len(`{"type":"req","id":"r18446744073709551615","method":"` +
	protocol.MethodInvokeResult + `","params":}`)

// session is one authenticated connection and the invocations it carries.
// Every invocation runs in its own goroutine under a context derived from
// ctx (cancelled when the connection ends) with the broker deadline.
type session struct {
	w       *Worker
	conn    *client.Conn
	disp    Dispatcher
	nodeID  string
	limit   int // result frames must not exceed this many bytes
	readyCh chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	sem    chan struct{}
	wg     sync.WaitGroup

	// decl holds the declarations of the set this session serves (nil
	// without one): retry classes and params schemas by method name.
	decl map[string]moduleset.Method

	// changed receives the digest of each node.modules.changed event
	// (the newest replaces one not yet taken).
	changed chan string

	inflightMu sync.Mutex
	inflight   map[string]context.CancelFunc
	// draining is set once a new module set is installed: new invocations
	// are refused (retry-safe) and drained is closed when active reaches 0.
	draining bool
	active   int
	drained  chan struct{}
}

// pureRead reports whether method is a pure read: as the pinned set
// declares it, else (no set, or a dispatcher given directly) as protocol
// classifies the spec's methods.
func (s *session) pureRead(method string) bool {
	if d, ok := s.decl[method]; ok {
		return d.Retry == protocol.RetryRead
	}
	return protocol.PureRead(method)
}

// startDrain refuses new invocations from now on and returns a channel
// closed once every invocation in flight has sent its result.
func (s *session) startDrain() <-chan struct{} {
	s.inflightMu.Lock()
	defer s.inflightMu.Unlock()
	if !s.draining {
		s.draining = true
		s.drained = make(chan struct{})
		if s.active == 0 {
			close(s.drained)
		}
	}
	return s.drained
}

// done marks one invocation finished (its result sent or dropped).
func (s *session) done() {
	s.inflightMu.Lock()
	defer s.inflightMu.Unlock()
	s.active--
	if s.draining && s.active == 0 {
		select {
		case <-s.drained:
			return // closed already; a late refusal
		default:
		}
		close(s.drained)
	}
}

// onEvent runs on the connection's reader goroutine: it only decodes,
// registers and starts goroutines, so a slow method never holds up other
// traffic.
func (s *session) onEvent(ev protocol.Event) {
	switch ev.Event {
	case protocol.EventInvokeRequest:
		// The payload is valid JSON (the client checked the frame): it is
		// split, not decoded, so args are not scanned again here.
		req, err := protocol.ParseInvokeRequest(ev.Payload)
		if err != nil || !validInvokeID(req.InvokeID) {
			s.w.log.Warn("malformed invoke request dropped", "seq", ev.Seq)
			return
		}
		s.start(req)
	case protocol.EventModulesChanged:
		var ref protocol.ModuleSetRef
		if json.Unmarshal(ev.Payload, &ref) != nil || ref.Digest == "" {
			return
		}
		for {
			select {
			case s.changed <- ref.Digest:
				return
			default:
			}
			select {
			case <-s.changed: // keep only the newest
			default:
			}
		}
	case protocol.EventInvokeCancel:
		var c protocol.InvokeCancel
		if json.Unmarshal(ev.Payload, &c) != nil {
			return
		}
		s.inflightMu.Lock()
		cancel := s.inflight[c.InvokeID]
		s.inflightMu.Unlock()
		if cancel != nil {
			cancel()
		}
	}
}

func validInvokeID(id string) bool {
	return id != "" && len(id) <= 256 && utf8.ValidString(id)
}

func (s *session) start(req protocol.InvokeRequest) {
	timeout := time.Duration(req.TimeoutMs) * time.Millisecond
	if req.TimeoutMs <= 0 {
		timeout = protocol.DefaultTimeoutMs * time.Millisecond
	}
	timeout = min(timeout, MaxInvokeTimeout)

	s.inflightMu.Lock()
	if s.ctx.Err() != nil {
		s.inflightMu.Unlock()
		return
	}
	if _, dup := s.inflight[req.InvokeID]; dup {
		s.inflightMu.Unlock()
		s.w.log.Warn("duplicate invokeId ignored")
		return
	}
	if s.draining {
		// A new module set is installed; this connection only finishes
		// what it has in flight before the node reconnects serving it.
		// Counted as active, so the connection stays up until the
		// refusal is sent.
		s.active++
		s.inflightMu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.done()
			s.reply(req.InvokeID, req.Method, nil, protocol.DomainError(protocol.CodeUnavailable, DomainModuleSetSwitching,
				"the node is switching to a new module set; retry").WithRetry(true, false), false)
		}()
		return
	}
	select {
	case s.sem <- struct{}{}:
	default:
		s.inflightMu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.reply(req.InvokeID, req.Method, nil, protocol.DomainError(protocol.CodeUnavailable, "node_busy",
				"node has too many invocations in flight").WithRetry(true, false), false)
		}()
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	s.inflight[req.InvokeID] = cancel
	s.active++
	s.wg.Add(1)
	s.inflightMu.Unlock()

	go func() {
		defer s.wg.Done()
		defer s.done()
		req.Outcome = &protocol.InvokeOutcome{}
		payload, perr := s.invoke(ctx, req)
		// The slot is free before the result is sent: once the controller
		// has a result, the node can take another invocation.
		s.inflightMu.Lock()
		delete(s.inflight, req.InvokeID)
		s.inflightMu.Unlock()
		cancel()
		<-s.sem
		s.reply(req.InvokeID, req.Method, payload, perr, req.Outcome.Applied())
	}()
}

// invoke checks the request against this node and runs the dispatcher,
// turning a panic into INTERNAL_ERROR.
func (s *session) invoke(ctx context.Context, req protocol.InvokeRequest) (payload json.RawMessage, perr *protocol.Error) {
	select {
	case <-s.readyCh:
	case <-ctx.Done():
		return nil, protocol.Errorf(protocol.CodeUnavailable, "connection closed")
	}
	// s.limit is set once readyCh is closed.
	req.MaxResultBytes = maxResultBytes(req.InvokeID, s.limit)
	if s.nodeID != "" && req.NodeID != "" && req.NodeID != s.nodeID {
		return nil, protocol.DomainError(protocol.CodeForbidden, protocol.DomainNodeIdentityMismatch,
			"invocation addressed to another node")
	}
	if s.disp == nil {
		return nil, protocol.DomainError(protocol.CodeUnavailable, protocol.DomainModuleSetUnavailable,
			"node has not loaded its module set")
	}
	if _, ok := s.disp.Methods()[req.Method]; !ok {
		if mr, ok := s.disp.(ModuleReporter); ok {
			if perr, refused := mr.NotServed(req.Method); refused {
				return nil, perr
			}
		}
		return nil, protocol.Errorf(protocol.CodeMethodNotFound, "method not served by this node")
	}
	// This goroutine has no other recover: a panic in the validator or the
	// dispatcher would end the whole node process.
	defer func() {
		if r := recover(); r != nil {
			// No stack or panic value: either may hold request content.
			s.w.log.Error("dispatcher panicked", "method", req.Method)
			payload, perr = nil, protocol.Errorf(protocol.CodeInternal, "internal error")
		}
	}()
	if spec, ok := protocol.LookupMethod(req.Method); ok && spec.Validate != nil {
		if perr := spec.Validate(req.Args); perr != nil {
			return nil, perr
		}
	}
	// The node checks the declared schema too: it does not rely on the
	// controller having done so.
	if d, ok := s.decl[req.Method]; ok && d.Params != nil {
		if perr := d.Params.Validate(req.Args); perr != nil {
			return nil, perr
		}
	}
	payload, perr = s.disp.Invoke(datadial.WithDataDialer(ctx, s.w.dataDialer()), req)
	if perr == nil && ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded) && payload == nil {
		perr = protocol.Errorf(protocol.CodeTimeout, "deadline exceeded on the node")
	}
	return payload, perr
}

// maxResultBytes is the largest success payload, in bytes, whose
// node.invoke.result request frame for invokeID fits limit bytes
// (protocol.InvokeRequest.MaxResultBytes).
func maxResultBytes(invokeID string, limit int) int {
	envelope := len(`{"invokeId":,"result":}`) + len(protocol.AppendString(nil, invokeID))
	return max(limit-resultFrameOverhead-envelope, 0)
}

// reply sends node.invoke.result unless the connection has ended (the
// controller pins invocations to the connection, so a result for a closed
// one has nowhere to go). A result that would exceed the negotiated
// maxPayload, or the shared depth and item limits, becomes an error.
// applied says the invocation has had an effect (see encodeResult).
func (s *session) reply(invokeID, method string, payload json.RawMessage, perr *protocol.Error, applied bool) {
	select {
	case <-s.readyCh:
	case <-s.ctx.Done():
		return
	}
	if s.ctx.Err() != nil {
		return
	}
	params := encodeResult(invokeID, s.pureRead(method), payload, perr, s.limit, applied)
	ctx, cancel := context.WithTimeout(s.ctx, s.w.cfg.ResultTimeout)
	defer cancel()
	if _, err := s.conn.Call(ctx, protocol.MethodInvokeResult, client.CheckedJSON(params)); err != nil {
		s.w.log.Debug("result not delivered", "code", err.Code)
	}
}

// encodeResult builds node.invoke.result params whose request frame fits
// limit bytes; they are valid JSON within the protocol limits (a payload
// is checked here, and the client sends them without checking again). A
// payload that does not fit, or breaks the shared depth and item limits,
// or is not JSON, becomes an INTERNAL_ERROR result.
//
// This is where every error a node sends for an invocation is framed, so
// this is where outcome flags are made truthful. When applied (the host saw
// an effect on node state), the error, whether the dispatcher's or one made
// here, says retrySafe:false and mutationMayHaveApplied:true. A result that
// cannot be delivered without an effect is retrySafe:true for a pure read
// (pure: the method's declared retry class is read; the same read may be
// asked again, say with a smaller range) and retrySafe:false otherwise;
// mutationMayHaveApplied is false for both.
func encodeResult(invokeID string, pure bool, payload json.RawMessage, perr *protocol.Error, limit int, applied bool) json.RawMessage {
	undeliverable := func(e *protocol.Error) *protocol.Error {
		switch {
		case applied:
			return e.WithRetry(false, true)
		case pure:
			return e.WithRetry(true, false)
		}
		return e.WithRetry(false, false)
	}
	if perr == nil {
		if len(payload) == 0 {
			payload = json.RawMessage("null")
		}
		switch err := protocol.CheckJSONLimits(payload); {
		case errors.Is(err, protocol.ErrTooDeep), errors.Is(err, protocol.ErrTooManyItems):
			perr = undeliverable(protocol.DomainError(protocol.CodeInternal, protocol.DomainPayloadTooLarge,
				"result exceeds the JSON depth or item limits"))
		case err != nil:
			perr = undeliverable(protocol.Errorf(protocol.CodeInternal, "node produced an invalid result"))
		default:
			// payload passed CheckJSONLimits: it is appended, not compacted again.
			b, err := protocol.AppendInvokeResult(nil, invokeID, payload)
			if err == nil && len(b)+resultFrameOverhead <= limit {
				return b
			}
			perr = undeliverable(protocol.DomainError(protocol.CodeInternal, protocol.DomainPayloadTooLarge,
				"result exceeds the negotiated maxPayload"))
		}
	}
	if applied {
		perr = protocol.AfterEffect(perr)
	}
	b, _ := json.Marshal(protocol.InvokeResult{InvokeID: invokeID, Error: perr})
	if len(b)+resultFrameOverhead > limit {
		// Only an unusually long error message can get here. Its outcome
		// flags are kept; without any, the outcome is not known.
		short := protocol.DomainError(protocol.CodeInternal, protocol.DomainPayloadTooLarge, "result too large")
		if d := perr.Details; d != nil && d.RetrySafe != nil && d.MutationMayHaveApplied != nil {
			short = short.WithRetry(*d.RetrySafe, *d.MutationMayHaveApplied)
		} else {
			short = undeliverable(short)
		}
		b, _ = json.Marshal(protocol.InvokeResult{InvokeID: invokeID, Error: short})
	}
	return b
}
