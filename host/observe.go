package host

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lemon/audit"
	"lemon/protocol"
)

// This file is the host's observability (docs/OPERATIONS.md): metrics on
// Config.Registry, one audit record per host call on Config.Audit, and
// the content-free log event. Labels and records hold only module, host
// call and method names of the loaded set, outcome classes and ids the
// controller made: never a path, argv, secret name or value.

// hostMetrics are the host's collectors. Hosts built one after another on
// the same registry (a node re-pinning its module set) share them.
type hostMetrics struct {
	calls       *prometheus.CounterVec   // module, hostcall, outcome
	latency     *prometheus.HistogramVec // module, hostcall
	invocations *prometheus.CounterVec   // method, outcome
	vault       *prometheus.CounterVec   // operation, outcome
	receipts    *prometheus.CounterVec   // hostcall
}

func newHostMetrics(reg prometheus.Registerer) *hostMetrics {
	return &hostMetrics{
		calls: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lemon_hostcall_total",
			Help: "Host calls by module, host call and outcome (ok or a bounded refusal or error class).",
		}, []string{"module", "hostcall", "outcome"})),
		latency: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lemon_hostcall_duration_seconds",
			Help:    "Host-call latency in seconds, by module and host call.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 12),
		}, []string{"module", "hostcall"})),
		invocations: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lemon_node_invocations_total",
			Help: "Invocations by method (\"other\" when this node does not serve it) and outcome (ok or the protocol code).",
		}, []string{"method", "outcome"})),
		vault: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lemon_node_vault_operations_total",
			Help: "Vault host calls by operation (set, list, list_payload, delete, receipt) and outcome.",
		}, []string{"operation", "outcome"})),
		receipts: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lemon_node_receipts_total",
			Help: "Secret operation receipts read from the vault (vault.receipt), by host call; the process module keeps its receipts in its own store.",
		}, []string{"hostcall"})),
	}
}

// register registers c, or returns the collector already registered
// under the same description.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if old, ok := are.ExistingCollector.(C); ok {
				return old
			}
		}
		panic("host: metrics: " + err.Error())
	}
	return c
}

// receiptCalls are the host calls whose success returns a receipt (the
// process module keeps its receipts itself: docs/PROCESS.md).
var receiptCalls = map[string]bool{
	"vault.receipt": true,
}

// callMetrics are one module's collectors for one host call's success,
// resolved once (Module.okMetrics) instead of by label values per call.
type callMetrics struct {
	ok      prometheus.Counter  // lemon_hostcall_total{module, hostcall, "ok"}
	latency prometheus.Observer // lemon_hostcall_duration_seconds{module, hostcall}
	vault   prometheus.Counter  // lemon_node_vault_operations_total{op, "ok"} for vault.*, else nil
	receipt prometheus.Counter  // lemon_node_receipts_total{hostcall} for receiptCalls, else nil
}

func (m *hostMetrics) forCall(module, hostcall string) *callMetrics {
	c := &callMetrics{ok: m.calls.WithLabelValues(module, hostcall, "ok"), latency: m.latency.WithLabelValues(module, hostcall)}
	if op, ok := strings.CutPrefix(hostcall, "vault."); ok {
		c.vault = m.vault.WithLabelValues(op, "ok")
	}
	if receiptCalls[hostcall] {
		c.receipt = m.receipts.WithLabelValues(hostcall)
	}
	return c
}

// observeOK counts one successful host call: what observe(module,
// hostcall, "ok", d) counts.
func (c *callMetrics) observeOK(d time.Duration) {
	c.ok.Inc()
	if d > 0 {
		c.latency.Observe(d.Seconds())
	}
	if c.vault != nil {
		c.vault.Inc()
	}
	if c.receipt != nil {
		c.receipt.Inc()
	}
}

// observe counts one host call.
func (m *hostMetrics) observe(module, hostcall, outcome string, d time.Duration) {
	m.calls.WithLabelValues(module, hostcall, outcome).Inc()
	if d > 0 {
		m.latency.WithLabelValues(module, hostcall).Observe(d.Seconds())
	}
	if op, ok := strings.CutPrefix(hostcall, "vault."); ok {
		m.vault.WithLabelValues(op, outcome).Inc()
	}
	if outcome == "ok" && receiptCalls[hostcall] {
		m.receipts.WithLabelValues(hostcall).Inc()
	}
}

// audit emits the content-free host-I/O event and, with an audit sink,
// the host call's audit record: method, module, host call, outcome,
// invokeId and principal. No path, byte, argv, secret name or value.
func (g *Gate) audit(inv *invocation, hostcall, outcome string, d time.Duration) {
	if g.sink != nil {
		rec := audit.Record{Time: time.Now(), Source: "node", Principal: inv.Principal(), Method: inv.method,
			NodeID: inv.info.NodeID, InvokeID: inv.info.InvokeID, Module: inv.mod.family, HostCall: hostcall,
			Outcome: outcome, DurationMs: float64(d.Microseconds()) / 1000}
		if err := g.sink.Write(&rec); err != nil && g.logger != nil {
			g.logger.Error("audit record not written", "module", inv.mod.family, "hostcall", hostcall, "reason", "audit_write_failed")
		}
	}
	if g.logger == nil {
		return
	}
	g.logger.LogAttrs(context.Background(), slog.LevelInfo, "execution_node.host_io",
		slog.String("method", inv.method),
		slog.String("module", inv.mod.family),
		slog.String("hostcall", hostcall),
		slog.String("outcome", outcome),
		slog.String("invokeId", inv.info.InvokeID),
		slog.Int("count", 1))
}

// invocationOutcome is the bounded outcome label of an invocation: ok,
// a protocol code, or "other" for any other code a module returned.
func invocationOutcome(e *protocol.Error) string {
	if e == nil {
		return "ok"
	}
	if protocolCodes[e.Code] {
		return e.Code
	}
	return "other"
}

var protocolCodes = map[string]bool{
	protocol.CodeInvalidRequest: true, protocol.CodeInvalidParams: true, protocol.CodeMethodNotFound: true,
	protocol.CodeUnauthorized: true, protocol.CodeForbidden: true, protocol.CodeNotFound: true,
	protocol.CodeConflict: true, protocol.CodeRateLimited: true, protocol.CodeTimeout: true,
	protocol.CodeInternal: true, protocol.CodeNotImplemented: true, protocol.CodeUnavailable: true,
}

// PoolInstances returns the live instances of each loaded module's pool,
// by family.
func (h *Host) PoolInstances() map[string]int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make(map[string]int, len(h.modules))
	for fam, m := range h.modules {
		m.pool.mu.Lock()
		out[fam] = m.pool.created - m.pool.discarded
		m.pool.mu.Unlock()
	}
	return out
}

// methodLabel is the method as a metric label: a method this host serves
// or refused by name, anything else "other".
func (h *Host) methodLabel(m string) string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if _, ok := h.methods[m]; ok {
		return m
	}
	if _, ok := h.refused[m]; ok {
		return m
	}
	return "other"
}
