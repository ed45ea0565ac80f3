package host

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"lemon/hostcalls"
	"lemon/protocol"
)

// BenchmarkGateCall is the gate's own cost per host call (docs/BENCHMARKS.md,
// "Host fixed cost"): capability check, no rate rule, the call (which does
// nothing), metrics, no audit sink and no logger.
func BenchmarkGateCall(b *testing.B) {
	g := newGate([]string{hostcalls.CapAll}, nil, nil, prometheus.NewRegistry(), nil)
	mod := &Module{host: &Host{gate: g}, family: "testmod"}
	inv := &invocation{mod: mod, method: "test.ping", caps: map[string]bool{hostcalls.CapHostInfo: true},
		outcome: &protocol.InvokeOutcome{}}
	hc := &hostcalls.HostCall{Name: "test.nop", Capability: hostcalls.CapHostInfo,
		Func: func(context.Context, hostcalls.Call, []byte) ([]byte, error) { return []byte("{}"), nil }}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, perr := g.call(ctx, inv, hc, nil); perr != nil {
			b.Fatal(perr)
		}
	}
}

// The success path counts through collectors cached per module and host
// call: the same series, with the same values, as observe(..., "ok", d).
func TestGateOKMetricsCached(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := newGate([]string{hostcalls.CapAll}, nil, nil, reg, nil)
	mod := &Module{host: &Host{gate: g}, family: "secrets"}
	inv := &invocation{mod: mod, method: "node.secrets.set", caps: map[string]bool{hostcalls.CapHostInfo: true},
		outcome: &protocol.InvokeOutcome{}}
	ok := func(context.Context, hostcalls.Call, []byte) ([]byte, error) { return []byte("{}"), nil }
	for _, name := range []string{"vault.receipt", "vault.receipt", "spawn.result", "test.nop"} {
		hc := &hostcalls.HostCall{Name: name, Capability: hostcalls.CapHostInfo, Func: ok}
		if _, perr := g.call(context.Background(), inv, hc, nil); perr != nil {
			t.Fatal(perr)
		}
	}
	// The uncached path, for comparison: one call observed by name.
	g.metrics.observe("secrets", "vault.receipt", "ok", 1)
	for _, c := range []struct {
		got  float64
		want float64
	}{
		{testutil.ToFloat64(g.metrics.calls.WithLabelValues("secrets", "vault.receipt", "ok")), 3},
		{testutil.ToFloat64(g.metrics.calls.WithLabelValues("secrets", "spawn.result", "ok")), 1},
		{testutil.ToFloat64(g.metrics.calls.WithLabelValues("secrets", "test.nop", "ok")), 1},
		{testutil.ToFloat64(g.metrics.vault.WithLabelValues("receipt", "ok")), 3},
		{testutil.ToFloat64(g.metrics.receipts.WithLabelValues("vault.receipt")), 3},
		// spawn.result is no receipt call: the process module keeps its
		// receipts itself (docs/PROCESS.md).
		{testutil.ToFloat64(g.metrics.receipts.WithLabelValues("spawn.result")), 0},
	} {
		if c.got != c.want {
			t.Errorf("counter %v, want %v", c.got, c.want)
		}
	}
	if n := testutil.CollectAndCount(g.metrics.latency); n != 3 {
		t.Errorf("%d latency series, want 3", n)
	}
	if n := testutil.CollectAndCount(g.metrics.vault); n != 1 {
		t.Errorf("%d vault series, want 1 (no test.nop or spawn.result in it)", n)
	}
}
