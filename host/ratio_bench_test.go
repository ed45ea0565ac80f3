package host_test

import (
	"context"
	"encoding/json"
	"testing"

	"lemon/host"
	"lemon/host/hosttest"
	"lemon/hostcalls"
	"lemon/hostcalls/sysinfo"
	"lemon/plugins/hostinfo/shape"
	"lemon/protocol"
)

// BenchmarkRatioEcho is the fixed cost of the module ABI (docs/BENCHMARKS.md,
// "Module ABI (issue 11)"; bound p50 ≤ 20 µs): test.small decodes small
// params strictly into a struct and returns a struct payload, through
// host.Invoke with an execution context as the worker passes it (parsed,
// checked and bound per request) and the gate's audit log on.
func BenchmarkRatioEcho(b *testing.B) {
	f := newFixture(b, host.Config{})
	ctx := context.Background()
	req := protocol.InvokeRequest{InvokeID: "i-bench", NodeID: "n1", SessionGeneration: 3, Method: "test.small",
		Args:             json.RawMessage(`{"nodeId":"n1","path":"src/main.go","limit":100,"follow":true}`),
		ExecutionContext: hosttest.Context(b, "i-bench", "hostinfo"), MaxResultBytes: protocol.DefaultMaxPayload}
	want := `{"nodeId":"n1","path":"src/main.go","limit":100,"follow":true,"invokeId":"i-bench"}`
	hosttest.Latency(b, func() error {
		out, perr := f.h.Invoke(ctx, req)
		if perr != nil {
			return perr
		}
		if string(out) != want {
			b.Fatalf("payload %s, want %s", out, want)
		}
		return nil
	})
}

// BenchmarkRatioHostInfo is node.host.info through the module against the
// same work natively (docs/BENCHMARKS.md, "Module ABI (issue 11)"; bound
// ≤ 1.5×): strict params, the sysinfo figures, the payload shaped and
// encoded. Both sides measure the machine (/proc, statfs, uname), which is
// most of the native cost.
func BenchmarkRatioHostInfo(b *testing.B) {
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
	params := json.RawMessage(`{"nodeId":"n1"}`)
	native := func() error {
		if perr := protocol.ValidateHostInfo(params); perr != nil {
			return perr
		}
		f, err := si.Figures()
		if err != nil {
			return err
		}
		_, err = json.Marshal(shape.Payload(*f))
		return err
	}
	// "context": the request carries an execution context, as the worker
	// passes it, which the host parses and binds (the native side has no
	// such step); "bare": it carries none.
	for _, c := range []struct {
		name string
		ec   json.RawMessage
	}{{"context", hosttest.Context(b, "i-bench", "hostinfo")}, {"bare", nil}} {
		b.Run(c.name, func(b *testing.B) {
			req := protocol.InvokeRequest{InvokeID: "i-bench", NodeID: "n1", Method: "node.host.info", Args: params,
				ExecutionContext: c.ec, MaxResultBytes: protocol.DefaultMaxPayload}
			hosttest.SideBySide(b, func() error {
				_, perr := h.Invoke(ctx, req)
				if perr != nil {
					return perr
				}
				return nil
			}, native)
		})
	}
}

// BenchmarkABIEmpty is the floor under BenchmarkRatioEcho: test.nop takes
// no params and returns no payload, without an execution context; what
// it costs is the host's bookkeeping, two export calls and the envelopes.
func BenchmarkABIEmpty(b *testing.B) {
	f := newFixture(b, host.Config{})
	ctx := context.Background()
	req := protocol.InvokeRequest{InvokeID: "i-bench", NodeID: "n1", Method: "test.nop", Args: json.RawMessage(`{}`)}
	hosttest.Latency(b, func() error {
		out, perr := f.h.Invoke(ctx, req)
		if perr != nil {
			return perr
		}
		if string(out) != "{}" {
			b.Fatalf("payload %s, want {}", out)
		}
		return nil
	})
}
