package controller

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"lemon/audit"
	"lemon/protocol"
)

// lockedBuf is a bytes.Buffer safe for the server's goroutines.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// gate is an audit writer that fails while broken is set.
type gate struct {
	lockedBuf
	broken bool
}

func (g *gate) Write(p []byte) (int, error) {
	g.mu.Lock()
	broken := g.broken
	g.mu.Unlock()
	if broken {
		return 0, errors.New("disk full")
	}
	return g.lockedBuf.Write(p)
}

func (g *gate) set(broken bool) {
	g.mu.Lock()
	g.broken = broken
	g.mu.Unlock()
}

func records(t *testing.T, s string) []audit.Record {
	t.Helper()
	var out []audit.Record
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

const canary = "CANARY-7f3a91"

// TestObserveOperatorRequests: every operator request gets one audit
// record (principal, scopes, method, node, invokeId, outcome, code) and
// moves the request counter; a method outside the route table is "other"
// in labels, records and logs, and no canary planted in a token, a method
// name or params reaches a log line, record or metric.
func TestObserveOperatorRequests(t *testing.T) {
	var logs, aud lockedBuf
	cfg := testConfig()
	cfg.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Audit = audit.New(&aud, false)
	s := startServer(t, cfg)
	connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, echoHandler)
	op := connectOperator(t, s.url, adminToken)
	nodeID := nodeIDOf("worker-1")

	if f := op.call(protocol.MethodNodeList, map[string]any{}); !f.OK {
		t.Fatalf("node.list: %s", f.raw)
	}
	f := op.call(mEcho, echoParams{NodeID: nodeID, Value: json.RawMessage(`"/home/` + canary + `/secret"`)})
	if !f.OK {
		t.Fatalf("echo: %s", f.raw)
	}
	wantError(t, op.call("node."+canary+".steal", map[string]any{}), protocol.CodeMethodNotFound, "")
	wantError(t, op.call(mEcho, echoParams{NodeID: "n-" + canary}), protocol.CodeNotFound, "")

	bad := dialPeer(t, s.url)
	bad.writeJSON(protocol.Request{Type: protocol.FrameReq, ID: "c1", Method: "connect",
		Params: mustJSON(t, protocol.ConnectParams{Role: protocol.RoleOperator, Auth: protocol.ConnectAuth{Token: "tok-" + canary},
			Client: protocol.ConnectClient{ID: "x", Version: "1"}})})
	bad.waitClosed()

	recs := records(t, aud.String())
	if len(recs) != 4 {
		t.Fatalf("%d audit records, want 4:\n%s", len(recs), aud.String())
	}
	for _, r := range recs {
		if r.Source != "controller" || r.Principal != "admin" || len(r.Scopes) != 1 || r.Scopes[0] != protocol.ScopeAdmin || r.Time.IsZero() {
			t.Fatalf("record %+v", r)
		}
	}
	if r := recs[0]; r.Method != protocol.MethodNodeList || r.Outcome != "ok" || r.Code != "" || r.InvokeID != "" {
		t.Fatalf("node.list record %+v", r)
	}
	if r := recs[1]; r.Method != mEcho || r.Outcome != "ok" || r.NodeID != nodeID || len(r.InvokeID) != 32 {
		t.Fatalf("echo record %+v", r)
	}
	if r := recs[2]; r.Method != "other" || r.Outcome != "error" || r.Code != protocol.CodeMethodNotFound {
		t.Fatalf("unknown-method record %+v", r)
	}
	if r := recs[3]; r.Method != mEcho || r.Outcome != "error" || r.Code != protocol.CodeNotFound || r.InvokeID != "" {
		t.Fatalf("unknown-node record %+v", r)
	}

	if got := metricValue(s.metrics.requests.WithLabelValues("other", "error", protocol.CodeMethodNotFound)); got != 1 {
		t.Fatalf("requests{other} = %v", got)
	}
	if got := metricValue(s.metrics.requests.WithLabelValues(mEcho, "ok", "")); got != 1 {
		t.Fatalf("requests{echo,ok} = %v", got)
	}
	if got := metricValue(s.metrics.connects.WithLabelValues(protocol.RoleOperator, protocol.CodeUnauthorized)); got != 1 {
		t.Fatalf("refused operator connects = %v", got)
	}
	if got := metricValue(s.metrics.connections.WithLabelValues(protocol.RoleNode)); got != 1 {
		t.Fatalf("node connections = %v", got)
	}
	body := scrape(t, s.url)
	for _, want := range []string{`lemon_controller_nodes{state="online"} 1`, `lemon_controller_calls_inflight 0`,
		`lemon_controller_pairings_pending 0`, `lemon_controller_module_set_pinned 0`} {
		if !strings.Contains(body, want) {
			t.Fatalf("/metrics lacks %q", want)
		}
	}
	for name, text := range map[string]string{"log": logs.String(), "audit": aud.String(), "metrics": body} {
		if strings.Contains(text, canary) || strings.Contains(text, adminToken) {
			t.Fatalf("the %s carries a canary:\n%s", name, text)
		}
	}
	for _, want := range []string{`"msg":"operator connected"`, `"msg":"operator connect refused"`, `"code":"UNAUTHORIZED"`, `"msg":"node connected"`} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("log lacks %s:\n%s", want, logs.String())
		}
	}
}

func scrape(t *testing.T, wsURL string) string {
	t.Helper()
	return get(t, strings.Replace(strings.TrimSuffix(wsURL, "/ws"), "ws://", "http://", 1)+"/metrics", http.StatusOK)
}

func get(t *testing.T, url string, want int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d %q, want %d", url, resp.StatusCode, b, want)
	}
	return string(b)
}

// TestHealthEndpoints: /healthz is always 200; /readyz is 200 with a
// module set pinned and 503 naming module_set without one.
func TestHealthEndpoints(t *testing.T) {
	base := func(s *testServer) string {
		return strings.Replace(strings.TrimSuffix(s.url, "/ws"), "ws://", "http://", 1)
	}
	bare := startServer(t, testConfig())
	if got := get(t, base(bare)+"/healthz", 200); got != "ok\n" {
		t.Fatalf("healthz %q", got)
	}
	if got := get(t, base(bare)+"/readyz", 503); got != "not ready: module_set\n" {
		t.Fatalf("readyz without a set %q", got)
	}
	cfg := testConfig()
	cfg.ModuleSet, _, _ = testModuleSet(t, 100)
	pinned := startServer(t, cfg)
	if got := get(t, base(pinned)+"/readyz", 200); got != "ready\n" {
		t.Fatalf("readyz %q", got)
	}
	pinned.Close()
	if bad := pinned.readiness(); len(bad) != 1 || bad[0] != "accepting" {
		t.Fatalf("readiness after Close: %v", bad)
	}
}

// TestAuditFailClosed: while a fail-closed sink cannot write, requests
// are refused UNAVAILABLE audit_unavailable (retry-safe) and /readyz is
// 503 "audit"; the first record written again admits requests. A
// fail-open sink keeps serving.
func TestAuditFailClosed(t *testing.T) {
	w := &gate{}
	cfg := testConfig()
	cfg.ModuleSet, _, _ = testModuleSet(t, 100)
	cfg.Audit = audit.New(w, true)
	s := startServer(t, cfg)
	op := connectOperator(t, s.url, adminToken)
	if f := op.call(protocol.MethodNodeList, map[string]any{}); !f.OK {
		t.Fatalf("healthy: %s", f.raw)
	}
	w.set(true)
	// This request ran; its record is the write that fails.
	if f := op.call(protocol.MethodNodeList, map[string]any{}); !f.OK {
		t.Fatalf("the request whose record failed: %s", f.raw)
	}
	f := op.call(protocol.MethodNodeList, map[string]any{})
	wantError(t, f, protocol.CodeUnavailable, DomainAuditUnavailable)
	wantRetry(t, f, true, false)
	if bad := s.readiness(); len(bad) != 1 || bad[0] != "audit" {
		t.Fatalf("readiness while audit fails: %v", bad)
	}
	if got := metricValue(s.metrics.auditRefusals); got != 1 {
		t.Fatalf("audit refusals %v", got)
	}
	w.set(false)
	// The refused request's record heals the sink... once it is written:
	// the next refused request writes it.
	wantError(t, op.call(protocol.MethodNodeList, map[string]any{}), protocol.CodeUnavailable, DomainAuditUnavailable)
	if f := op.call(protocol.MethodNodeList, map[string]any{}); !f.OK {
		t.Fatalf("after the sink healed: %s", f.raw)
	}
	recs := records(t, w.String())
	// The second request's record and the first refusal's were not written.
	if n := len(recs); n != 3 {
		t.Fatalf("%d records:\n%s", n, w.String())
	}
	if r := recs[1]; r.Outcome != "error" || r.Domain != DomainAuditUnavailable {
		t.Fatalf("refusal record %+v", r)
	}

	open := &gate{broken: true}
	cfg = testConfig()
	cfg.Audit = audit.New(open, false)
	s2 := startServer(t, cfg)
	op2 := connectOperator(t, s2.url, adminToken)
	for range 2 {
		if f := op2.call(protocol.MethodNodeList, map[string]any{}); !f.OK {
			t.Fatalf("fail-open sink refused: %s", f.raw)
		}
	}
	if got := metricValue(s2.metrics.auditFailures); got != 2 {
		t.Fatalf("audit failures %v", got)
	}
}

// TestMethodLabelBounded: route-table, controller and node-only methods
// keep their names; anything else is "other".
func TestMethodLabelBounded(t *testing.T) {
	s := startServer(t, testConfig())
	for in, want := range map[string]string{
		protocol.MethodNodeList:         protocol.MethodNodeList,
		mEcho:                           mEcho,
		protocol.MethodInvokeResult:     protocol.MethodInvokeResult,
		"node.fs.zztest.echo2":          "other",
		"/etc/passwd":                   "other",
		strings.Repeat("x", maxIDBytes): "other",
	} {
		if got := s.methodLabel(in); got != want {
			t.Errorf("methodLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

// metricValue is the value of one counter or gauge.
func metricValue(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// TestStoreFailureLogBounded: a durable store failure is logged with a
// bounded reason class, never the error's text (which names a path).
func TestStoreFailureLogBounded(t *testing.T) {
	var logs lockedBuf
	cfg := testConfig()
	cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	s := startServer(t, cfg)
	for err, want := range map[error]string{
		&os.PathError{Op: "write", Path: "/var/lib/" + canary, Err: syscall.ENOSPC}: "no_space",
		&os.PathError{Op: "open", Path: "/var/lib/" + canary, Err: syscall.EACCES}:  "permission_denied",
		&os.PathError{Op: "open", Path: "/var/lib/" + canary, Err: syscall.EROFS}:   "read_only_fs",
		&os.PathError{Op: "write", Path: "/var/lib/" + canary, Err: syscall.EIO}:    "io_error",
		errors.New("bolt: " + canary): "other",
	} {
		if got := ioReason(err); got != want {
			t.Errorf("ioReason(%v) = %q, want %q", err, got, want)
		}
		s.storeFailed(err)
	}
	if got := metricValue(s.metrics.storeFailures); got != 5 {
		t.Fatalf("store failures %v", got)
	}
	if strings.Contains(logs.String(), canary) || !strings.Contains(logs.String(), `"reason":"no_space"`) {
		t.Fatalf("log:\n%s", logs.String())
	}
}
