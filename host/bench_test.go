package host_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"lemon/host"
	"lemon/host/hosttest"
	"lemon/hostcalls"
	"lemon/hostcalls/sysinfo"
	"lemon/plugins/hostinfo/shape"
	"lemon/protocol"
)

// BenchmarkHostInfoModule is node.host.info through the module and the
// gate; BenchmarkHostInfoNative is the same measurement called in Go.
// The ratio is the cost of the module boundary.
func BenchmarkHostInfoModule(b *testing.B) {
	ctx := context.Background()
	si := sysinfo.New(sysinfo.Config{DefaultCwd: b.TempDir(), LemonVersion: "bench"})
	h, err := host.New(ctx, host.Config{CacheDir: hosttest.CacheDir(b), Ceiling: hostcalls.AllCapabilities, Tables: []hostcalls.Table{si.Table()}})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(ctx)
	wasm := hosttest.Build(b, "plugins/hostinfo")
	if _, err := h.Load(ctx, hosttest.Pin("hostinfo", wasm), wasm); err != nil {
		b.Fatal(err)
	}
	req := protocol.InvokeRequest{Method: "node.host.info", Args: json.RawMessage(`{"nodeId":"n1"}`)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, perr := h.Invoke(ctx, req); perr != nil {
			b.Fatal(perr)
		}
	}
}

func BenchmarkHostInfoNative(b *testing.B) {
	si := sysinfo.New(sysinfo.Config{DefaultCwd: b.TempDir(), LemonVersion: "bench"})
	params := json.RawMessage(`{"nodeId":"n1"}`)
	for i := 0; i < b.N; i++ {
		if err := protocol.ValidateHostInfo(params); err != nil {
			b.Fatal(err)
		}
		f, err := si.Figures()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(shape.Payload(*f)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkModuleColdCompile compiles the hostinfo module with an empty
// compilation cache each time (a node's first start).
func BenchmarkModuleColdCompile(b *testing.B) {
	benchmarkLoad(b, false)
}

// BenchmarkModuleCachedStart loads it with a warm on-disk cache (a
// restart).
func BenchmarkModuleCachedStart(b *testing.B) {
	benchmarkLoad(b, true)
}

func benchmarkLoad(b *testing.B, warm bool) {
	ctx := context.Background()
	wasm := hosttest.Build(b, "plugins/hostinfo")
	si := sysinfo.New(sysinfo.Config{DefaultCwd: b.TempDir()})
	cache := b.TempDir()
	load := func(dir string) {
		h, err := host.New(ctx, host.Config{CacheDir: dir, Tables: []hostcalls.Table{si.Table()}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.Load(ctx, hosttest.Pin("hostinfo", wasm), wasm); err != nil {
			b.Fatal(err)
		}
		h.Close(ctx)
	}
	if warm {
		load(cache)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dir := cache
		if !warm {
			b.StopTimer()
			d, err := os.MkdirTemp(b.TempDir(), "cold")
			if err != nil {
				b.Fatal(err)
			}
			dir = d
			b.StartTimer()
		}
		load(dir)
	}
}

// BenchmarkGateRateRules is test.ping (one host call) through the gate
// with no rate rule and with two rules that both match it (every matching
// bucket is charged under one lock); the buckets never run dry.
func BenchmarkGateRateRules(b *testing.B) {
	for _, c := range []struct {
		name  string
		rules []host.RateRule
	}{
		{"none", nil},
		{"two-matching", []host.RateRule{{Module: "testmod", HostCall: "test.ping", PerSecond: 1e9, Burst: 1e9}, {PerSecond: 1e9, Burst: 1e9}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			f := newFixture(b, host.Config{RateRules: c.rules})
			ctx := context.Background()
			req := protocol.InvokeRequest{InvokeID: "i1", Method: "test.ping", Args: json.RawMessage(`{}`)}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, perr := f.h.Invoke(ctx, req); perr != nil {
					b.Fatal(perr)
				}
			}
		})
	}
}
