package controller

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"lemon/audit"
	"lemon/protocol"
)

// This file is the controller's observability (docs/OPERATIONS.md): the
// Prometheus metrics, the audit record of every operator request, the
// /readyz checks and the bounded reasons its log lines carry. Nothing here
// reads request or result content: labels and records hold method names
// from the route table (anything else is "other"), protocol codes, roles
// and ids the controller made.

// metrics are the controller's collectors, registered on its own registry
// (served at /metrics) and, when Config.Registerer is set, there too.
type metrics struct {
	reg           *prometheus.Registry
	connects      *prometheus.CounterVec   // role, outcome
	connections   *prometheus.GaugeVec     // role
	requests      *prometheus.CounterVec   // method, outcome, code
	latency       *prometheus.HistogramVec // method
	storeFailures prometheus.Counter
	panics        prometheus.Counter
	slowConsumers prometheus.Counter
	auditFailures prometheus.Counter
	auditRefusals prometheus.Counter
	closes        *prometheus.CounterVec // role, reason
	nodesDesc     *prometheus.Desc
	pairingsDesc  *prometheus.Desc
	inflightDesc  *prometheus.Desc
	queuedDesc    *prometheus.Desc
	pinnedDesc    *prometheus.Desc
	moduleSetDesc *prometheus.Desc
	s             *Server
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		s:   s,
		connects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lemon_controller_connects_total",
			Help: "Connect handshakes by role (operator, node) and outcome (ok or the refusal's protocol code).",
		}, []string{"role", "outcome"}),
		connections: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lemon_controller_connections",
			Help: "Connected WebSockets by role (operator, node).",
		}, []string{"role"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lemon_controller_requests_total",
			Help: "Operator requests by method (\"other\" outside the route table), outcome (ok, error, no_answer) and protocol error code.",
		}, []string{"method", "outcome", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lemon_controller_request_duration_seconds",
			Help:    "Operator request latency in seconds, by method.",
			Buckets: prometheus.ExponentialBuckets(100e-6, 4, 10),
		}, []string{"method"}),
		storeFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lemon_controller_store_failures_total",
			Help: "Durable store writes that failed.",
		}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lemon_controller_handler_panics_total",
			Help: "Request handler panics recovered.",
		}),
		slowConsumers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lemon_controller_slow_consumer_closes_total",
			Help: "Connections closed because their full write queue made no progress.",
		}),
		auditFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lemon_controller_audit_write_failures_total",
			Help: "Audit records that could not be written.",
		}),
		auditRefusals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lemon_controller_audit_refusals_total",
			Help: "Requests refused because the fail-closed audit sink could not write.",
		}),
		closes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lemon_controller_connection_closes_total",
			Help: "Connection closes by role (operator, node, none before connect) and bounded reason.",
		}, []string{"role", "reason"}),
		nodesDesc: prometheus.NewDesc("lemon_controller_nodes",
			"Known nodes by state (online, offline).", []string{"state"}, nil),
		pairingsDesc: prometheus.NewDesc("lemon_controller_pairings_pending",
			"Pairings waiting for a decision or a challenge exchange.", nil, nil),
		inflightDesc: prometheus.NewDesc("lemon_controller_calls_inflight",
			"Node invocations sent and not yet answered.", nil, nil),
		queuedDesc: prometheus.NewDesc("lemon_controller_queued_bytes",
			"Bytes queued for writing across all connections.", nil, nil),
		pinnedDesc: prometheus.NewDesc("lemon_controller_module_set_pinned",
			"1 when a module set is pinned, else 0.", nil, nil),
		moduleSetDesc: prometheus.NewDesc("lemon_controller_nodes_module_set",
			"Known nodes by module-set status: current (runs the pinned set), stale (another or none), refused (a module of the set refused).",
			[]string{"status"}, nil),
	}
	m.reg.MustRegister(m.connects, m.connections, m.requests, m.latency, m.storeFailures, m.panics,
		m.slowConsumers, m.auditFailures, m.auditRefusals, m.closes, m,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Describe and Collect make metrics a collector of the gauges read from
// the registry and the connections at scrape time.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.nodesDesc
	ch <- m.pairingsDesc
	ch <- m.inflightDesc
	ch <- m.queuedDesc
	ch <- m.pinnedDesc
	ch <- m.moduleSetDesc
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	s := m.s
	pinned := ""
	if ms := s.modules.Load(); ms != nil {
		pinned = ms.Digest()
	}
	r := s.reg
	now := r.nowMs()
	var online, offline, pairings, current, stale, refused float64
	r.mu.Lock()
	for _, e := range r.nodes {
		if e.live != nil {
			online++
		} else {
			offline++
		}
		if pinned != "" && e.rec.ModuleSetDigest == pinned {
			current++
		} else {
			stale++
		}
		for _, st := range e.rec.Modules {
			if st.State == protocol.ModuleRefused {
				refused++
				break
			}
		}
	}
	for _, p := range r.pairings {
		if p.ExpiresAtMs > now {
			pairings++
		}
	}
	r.mu.Unlock()
	var inflight float64
	for _, c := range r.liveConns() {
		c.pmu.Lock()
		inflight += float64(len(c.pending))
		c.pmu.Unlock()
	}
	var queued float64
	s.mu.Lock()
	for c := range s.conns {
		queued += float64(c.budget.queued())
	}
	s.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(m.nodesDesc, prometheus.GaugeValue, online, "online")
	ch <- prometheus.MustNewConstMetric(m.nodesDesc, prometheus.GaugeValue, offline, "offline")
	ch <- prometheus.MustNewConstMetric(m.pairingsDesc, prometheus.GaugeValue, pairings)
	ch <- prometheus.MustNewConstMetric(m.inflightDesc, prometheus.GaugeValue, inflight)
	ch <- prometheus.MustNewConstMetric(m.queuedDesc, prometheus.GaugeValue, queued)
	p := 0.0
	if pinned != "" {
		p = 1
	}
	ch <- prometheus.MustNewConstMetric(m.pinnedDesc, prometheus.GaugeValue, p)
	ch <- prometheus.MustNewConstMetric(m.moduleSetDesc, prometheus.GaugeValue, current, "current")
	ch <- prometheus.MustNewConstMetric(m.moduleSetDesc, prometheus.GaugeValue, stale, "stale")
	ch <- prometheus.MustNewConstMetric(m.moduleSetDesc, prometheus.GaugeValue, refused, "refused")
}

// methodLabel is a method name fit for a metric label, log line or audit
// record: a name of the route table, a controller or node-only method as
// is, anything else (request content) as "other".
func (s *Server) methodLabel(m string) string {
	if l := logMethod(m); l != "other" {
		return l
	}
	if _, ok := s.routes()[m]; ok {
		return m
	}
	return "other"
}

// opRequest follows one operator request from arrival to its answer, for
// its audit record and metrics. respondErr, respondRaw and
// respondNodeResult note the outcome by request id; routeNodeMethod notes
// the node and invokeId.
type opRequest struct {
	method string
	start  time.Time

	mu       sync.Mutex
	answered bool // the record is written
	nodeID   string
	invokeID string
}

// beginRequest registers an operator request under its id. A second
// request reusing the id of one still in flight is not registered: its
// record says outcome "no_answer" unless the answer is attributed to the
// first (docs/OPERATIONS.md, "Audit").
func (c *conn) beginRequest(id, method string) *opRequest {
	t := &opRequest{method: c.s.methodLabel(method), start: time.Now()}
	c.rmu.Lock()
	if c.reqs == nil {
		c.reqs = map[string]*opRequest{}
	}
	if _, dup := c.reqs[id]; !dup {
		c.reqs[id] = t
	}
	c.rmu.Unlock()
	return t
}

func (c *conn) tracked(id string) *opRequest {
	if c.role != protocol.RoleOperator {
		return nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return c.reqs[id]
}

// noteAnswer records the first answer to request id (e nil: success)
// and writes its audit record and metrics, before the answer is queued:
// a caller that has its answer finds its record written.
func (c *conn) noteAnswer(id string, e *protocol.Error) {
	t := c.tracked(id)
	if t == nil {
		return
	}
	t.mu.Lock()
	if t.answered {
		t.mu.Unlock()
		return
	}
	t.answered = true
	outcome, code, domain := "ok", "", ""
	if e != nil {
		outcome, code, domain = "error", e.Code, e.DomainCode()
	}
	nodeID, invokeID := t.nodeID, t.invokeID
	t.mu.Unlock()
	c.record(t, outcome, code, domain, nodeID, invokeID)
}

// noteCall records the node and invokeId request id was routed to.
func (c *conn) noteCall(id, nodeID, invokeID string) {
	if t := c.tracked(id); t != nil {
		t.mu.Lock()
		t.nodeID, t.invokeID = nodeID, invokeID
		t.mu.Unlock()
	}
}

// endRequest unregisters the request; one that got no answer (its caller
// left, or the connection closed) is recorded with outcome "no_answer".
func (c *conn) endRequest(id string, t *opRequest) {
	c.rmu.Lock()
	if c.reqs[id] == t {
		delete(c.reqs, id)
	}
	c.rmu.Unlock()
	t.mu.Lock()
	answered := t.answered
	t.answered = true
	nodeID, invokeID := t.nodeID, t.invokeID
	t.mu.Unlock()
	if !answered {
		c.record(t, "no_answer", "", "", nodeID, invokeID)
	}
}

// record writes one request's audit record and metrics.
func (c *conn) record(t *opRequest, outcome, code, domain, nodeID, invokeID string) {
	d := time.Since(t.start)
	m := c.s.metrics
	m.requests.WithLabelValues(t.method, outcome, code).Inc()
	m.latency.WithLabelValues(t.method).Observe(d.Seconds())
	rec := audit.Record{Time: t.start.Add(d), Source: "controller", Principal: c.op.name, Scopes: c.scopes,
		Method: t.method, NodeID: nodeID, InvokeID: invokeID, Outcome: outcome, Code: code,
		Domain: domain, DurationMs: float64(d.Microseconds()) / 1000}
	if c.s.ui != nil {
		c.s.ui.ring.add(rec) // the console's recent records (docs/CONSOLE.md)
	}
	if c.s.audit == nil {
		return
	}
	if err := c.s.audit.Write(&rec); err != nil {
		m.auditFailures.Inc()
		c.s.log.Error("audit record not written", "method", t.method, "reason", "audit_write_failed")
	}
}

// admitAudit refuses a request while a fail-closed audit sink cannot
// write (UNAVAILABLE audit_unavailable, retry-safe: nothing was done).
func (c *conn) admitAudit(id string) bool {
	if c.s.audit.Admit() == nil {
		return true
	}
	c.s.metrics.auditRefusals.Inc()
	c.respondErr(id, protocol.DomainError(protocol.CodeUnavailable, DomainAuditUnavailable,
		"the audit log cannot be written; requests are refused until it can").WithRetry(true, false))
	return false
}

// DomainAuditUnavailable is the domain code of a request refused while
// a fail-closed audit sink cannot write.
const DomainAuditUnavailable = "audit_unavailable"

// storeFailed logs and counts a failed durable store write with a
// bounded reason (never the error text, which may hold a path).
func (s *Server) storeFailed(err error) {
	if s.metrics != nil { // nil only in tests that build a bare Server
		s.metrics.storeFailures.Inc()
	}
	s.log.Error("durable store write failed", "reason", ioReason(err))
}

// ioReason classifies an I/O error into a bounded, content-free reason.
func ioReason(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "no_space"
	case errors.Is(err, os.ErrPermission):
		return "permission_denied"
	case errors.Is(err, syscall.EROFS):
		return "read_only_fs"
	case errors.Is(err, os.ErrClosed):
		return "closed"
	case errors.Is(err, syscall.EIO):
		return "io_error"
	}
	return "other"
}

// readiness runs the /readyz checks and returns the failing ones.
func (s *Server) readiness() []string {
	var bad []string
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		bad = append(bad, "accepting")
	}
	if !s.store.open() {
		bad = append(bad, "store")
	}
	if s.modules.Load() == nil {
		bad = append(bad, "module_set")
	}
	if s.audit.FailClosed() && !s.audit.Probe("controller") {
		bad = append(bad, "audit")
	}
	return bad
}

// serveReadyz answers 200 "ready" or 503 "not ready: CHECK,..." naming
// the failing checks (accepting, store, module_set, audit).
func (s *Server) serveReadyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Cache-Control", "no-store")
	if bad := s.readiness(); len(bad) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "not ready: "+strings.Join(bad, ",")+"\n")
		return
	}
	io.WriteString(w, "ready\n")
}

func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
}

// Gatherer returns the registry /metrics serves (for tests and embedding).
func (s *Server) Gatherer() prometheus.Gatherer { return s.metrics.reg }

// closeReason is the bounded reason a connection ended, for its log line
// and metric: the close text the controller sent, or how the read ended.
func closeReason(sent string, readErr error) string {
	if sent != "" {
		return sent
	}
	var ce *websocket.CloseError
	var ne net.Error
	switch {
	case errors.As(readErr, &ce):
		return "peer closed"
	case errors.As(readErr, &ne) && ne.Timeout():
		return "idle timeout"
	case readErr == nil:
		return "closed"
	}
	return "read failed"
}
