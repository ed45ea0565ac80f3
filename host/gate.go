package host

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"lemon/audit"
	"lemon/hostcalls"
	"lemon/protocol"
)

// RateRule is one token bucket: PerSecond tokens a second up to Burst.
// Module "" matches every module; HostCall "" matches every host call of
// the matched modules. Every (rule, module) pair gets its own bucket, and
// a host call takes a token from every bucket whose rule matches it, or
// from none (docs/POLICY.md, "Rate limits").
type RateRule struct {
	Module    string
	HostCall  string
	PerSecond float64
	Burst     int
}

// Matches reports whether the rule applies to a host call of a module.
func (r RateRule) Matches(module, hostcall string) bool {
	return (r.Module == "" || r.Module == module) && (r.HostCall == "" || r.HostCall == hostcall)
}

// Gate is the single checkpoint every host call passes (docs/ABI.md): the
// capability check, the rate limit, the call under the request deadline,
// then telemetry (counters, latency and a content-free audit event).
type Gate struct {
	ceiling    map[string]bool
	ceilingAll bool // the ceiling is hostcalls.CapAll
	rules      []RateRule
	logger     *slog.Logger

	mu       sync.Mutex
	limiters map[string]*rate.Limiter

	metrics *hostMetrics
	sink    *audit.Sink
}

func newGate(ceiling []string, rules []RateRule, logger *slog.Logger, reg prometheus.Registerer, sink *audit.Sink) *Gate {
	g := &Gate{
		ceiling:  map[string]bool{},
		rules:    rules,
		logger:   logger,
		limiters: map[string]*rate.Limiter{},
		metrics:  newHostMetrics(reg),
		sink:     sink,
	}
	for _, c := range ceiling {
		g.ceiling[c] = true
		if c == hostcalls.CapAll {
			g.ceilingAll = true
		}
	}
	return g
}

// effectiveCaps is module-declared ∩ node ceiling ∩ the request's
// execution context (when it carries one) ∩ the served method's
// {capability} ∪ uses (docs/POLICY.md, "Node enforcement").
func (g *Gate) effectiveCaps(declared []string, ctxCaps []string, ctxRestricts bool, method map[string]bool) map[string]bool {
	allowed := map[string]bool{}
	var fromCtx map[string]bool
	if ctxRestricts {
		fromCtx = map[string]bool{}
		for _, c := range ctxCaps {
			fromCtx[c] = true
		}
	}
	for _, c := range declared {
		if g.withinCeiling(c) && (fromCtx == nil || fromCtx[c]) && method[c] {
			allowed[c] = true
		}
	}
	return allowed
}

// withinCeiling reports whether the node's ceiling allows capability c.
func (g *Gate) withinCeiling(c string) bool {
	return g.ceilingAll || (c != hostcalls.CapAll && g.ceiling[c])
}

// allow takes one token from every bucket whose rule matches the host
// call, or, if any of them is empty, from none and returns false. The
// check and the take happen under g.mu, so concurrent calls never leave a
// bucket charged for a call another bucket refused. A call of capability
// none (own is true: the module's own store, settings, log and invocation
// blobs, touching nothing of the node) is charged only by a rule that
// names it, so a module-wide rule counts the module's node operations
// however much bookkeeping it does (docs/POLICY.md, "Rate limits").
func (g *Gate) allow(module, hostcall string, own bool) bool {
	if len(g.rules) == 0 {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var matched []*rate.Limiter
	for i, r := range g.rules {
		if !r.Matches(module, hostcall) || (own && r.HostCall == "") {
			continue
		}
		key := strconv.Itoa(i) + "|" + module
		l, ok := g.limiters[key]
		if !ok {
			l = rate.NewLimiter(rate.Limit(r.PerSecond), max(r.Burst, 1))
			g.limiters[key] = l
		}
		matched = append(matched, l)
	}
	now := time.Now()
	for _, l := range matched {
		if l.TokensAt(now) < 1 {
			return false
		}
	}
	for _, l := range matched {
		l.AllowN(now, 1)
	}
	return true
}

var errForbiddenCap = protocol.DomainError(protocol.CodeForbidden, protocol.DomainCapabilityDenied,
	"the node's capabilities do not allow this operation")

// admitMethod is the gate's method-level capability check, done before a
// module runs.
func (g *Gate) admitMethod(inv *invocation, capability string) *protocol.Error {
	if !inv.caps[capability] {
		g.metrics.observe(inv.mod.family, "", "capability_denied", 0)
		g.audit(inv, "", "capability_denied", 0)
		return errForbiddenCap
	}
	return nil
}

// call passes one host call through the gate.
func (g *Gate) call(ctx context.Context, inv *invocation, hc *hostcalls.HostCall, args []byte) ([]byte, *protocol.Error) {
	module := inv.mod.family
	if hc.Capability != hostcalls.CapNone && !inv.caps[hc.Capability] {
		g.record(inv, hc.Name, "capability_denied", 0)
		return nil, errForbiddenCap
	}
	if hc.Effect() {
		// A read_only workspace refuses every effect; a read-class method
		// makes none, whatever module serves it (a rogue module pinned as
		// hostinfo calling fs.mkdir).
		if inv.readOnly {
			g.record(inv, hc.Name, protocol.DomainWorkspaceReadOnly, 0)
			return nil, errReadOnlyEffect
		}
		if inv.readOnlyMethod {
			g.record(inv, hc.Name, protocol.DomainReadMethodEffect, 0)
			return nil, errReadMethodEffect
		}
	}
	// Rate limits never turn a done effect into "nothing was done"
	// (docs/POLICY.md, "Rate limits"). Once an effect of this invocation
	// has succeeded, its later non-effect host calls (collecting a
	// receipt, reading back what was written) are neither charged nor
	// refused; a further effect is still charged, and its refusal says
	// the earlier effect stands.
	if applied := inv.applied(); (!applied || hc.Effect()) && !g.allow(module, hc.Name, hc.Capability == hostcalls.CapNone) {
		g.record(inv, hc.Name, "rate_limited", 0)
		if applied {
			return nil, protocol.DomainError(protocol.CodeRateLimited, protocol.DomainRateLimited,
				"host-call rate limit reached after this request's first effect").WithRetry(false, true)
		}
		return nil, protocol.DomainError(protocol.CodeRateLimited, protocol.DomainRateLimited,
			"host-call rate limit reached; nothing was done").WithRetry(true, false)
	}
	if err := ctx.Err(); err != nil {
		g.record(inv, hc.Name, "timeout", 0)
		return nil, protocol.Errorf(protocol.CodeTimeout, "request deadline passed before the host call")
	}
	start := time.Now()
	out, err := hc.Func(ctx, gatedCall{inv, hc.SecretBlobs}, args)
	elapsed := time.Since(start)
	if err != nil {
		pe := protocol.AsError(err)
		if d := pe.Details; d != nil && d.MutationMayHaveApplied != nil && *d.MutationMayHaveApplied {
			inv.markApplied() // the call itself says its effect may have happened
		}
		g.record(inv, hc.Name, outcomeOf(pe), elapsed)
		return nil, pe
	}
	if hc.Effect() {
		inv.markApplied()
	}
	inv.mod.callMetrics(hc).observeOK(elapsed)
	g.audit(inv, hc.Name, "ok", elapsed)
	if out == nil {
		out = []byte("{}")
	}
	return out, nil
}

// outcomeOf is a bounded, content-free classification of an error.
func outcomeOf(e *protocol.Error) string {
	if d := e.DomainCode(); d != "" {
		return d
	}
	return strings.ToLower(e.Code)
}

func (g *Gate) record(inv *invocation, hostcall, outcome string, d time.Duration) {
	g.metrics.observe(inv.mod.family, hostcall, outcome, d)
	g.audit(inv, hostcall, outcome, d)
}
