package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lemon/audit"
	"lemon/host"
	"lemon/host/hosttest"
	"lemon/hostcalls"
	"lemon/policies/authority"
	"lemon/protocol"
)

// gathered renders a registry's metrics as "name{labels} value" lines.
func gathered(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			b.WriteString(mf.GetName() + "{")
			for _, l := range m.GetLabel() {
				b.WriteString(l.GetName() + "=" + l.GetValue() + ",")
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			fmt.Fprintf(&b, "} %g\n", v)
		}
	}
	return b.String()
}

// TestHostCallAuditAndMetrics: a host call writes one audit record with
// the invokeId and the execution context's principal, and moves the host
// call and invocation counters; an unserved method is "other"; a second
// host on the same registry shares its collectors.
func TestHostCallAuditAndMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	var aud bytes.Buffer
	f := newFixture(t, host.Config{Registry: reg, Audit: audit.New(&aud, false)})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ec := hosttest.ContextOf(t, authority.ExecutionContext{RunID: "inv-audit-1", Principal: "alice", Provenance: "test",
		Capabilities: []string{hostcalls.CapHostInfo}})
	_, perr := f.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "inv-audit-1", NodeID: "n1", Method: "test.ping",
		Args: json.RawMessage(`{"a":"CANARY-ARG"}`), ExecutionContext: ec})
	if perr != nil {
		t.Fatal(perr)
	}
	if _, perr := f.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "i2", NodeID: "n1", Method: "test.CANARY"}); perr == nil {
		t.Fatal("unknown method served")
	}
	var rec audit.Record
	if err := json.Unmarshal(bytes.TrimSpace(aud.Bytes()), &rec); err != nil {
		t.Fatalf("one record expected: %v\n%s", err, aud.String())
	}
	if rec.Source != "node" || rec.InvokeID != "inv-audit-1" || rec.Principal != "alice" || rec.Method != "test.ping" ||
		rec.Module != "testmod" || rec.HostCall != "test.ping" || rec.Outcome != "ok" || rec.NodeID != "n1" {
		t.Fatalf("record %+v", rec)
	}
	m := gathered(t, reg)
	for _, want := range []string{
		"lemon_hostcall_total{hostcall=test.ping,module=testmod,outcome=ok,} 1",
		"lemon_node_invocations_total{method=test.ping,outcome=ok,} 1",
		"lemon_node_invocations_total{method=other,outcome=METHOD_NOT_FOUND,} 1",
	} {
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %q:\n%s", want, m)
		}
	}
	for name, text := range map[string]string{"audit": aud.String(), "metrics": m} {
		if strings.Contains(text, "CANARY") {
			t.Fatalf("%s carries request content:\n%s", name, text)
		}
	}
	if n := f.h.PoolInstances()["testmod"]; n < 1 {
		t.Fatalf("pool instances %d", n)
	}
	newFixture(t, host.Config{Registry: reg}) // shares, does not panic
}
