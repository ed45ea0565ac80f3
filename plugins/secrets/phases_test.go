//go:build !wasip1

package secrets_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"lemon/host"
	"lemon/host/hosttest"
	"lemon/hostcalls"
	"lemon/hostcalls/vault"
	"lemon/protocol"
)

// BenchmarkSetPhases splits node.secrets.set through the module into the
// time before its one host call (host invoke path, guest decode and
// checks), in it (vault.set: seal, bbolt commit, fdatasyncs) and after it
// (guest result, output envelope, payload check), p50s in µs, for the
// diagnosis in docs/BENCHMARKS.md ("Module ABI"). A new set (pre/in/post)
// alternates, as in BenchmarkRatioSecretsSet, with the native
// seal-and-put of the same request on a vault of its own (native-put).
// It also reports a replayed set, which writes nothing
// (replay-pre/replay-post), a receipt (receipt-pre/receipt-post) and a
// set the module refuses before any host call (refused: the whole
// invocation). The audit log is discarded.
//
//	go test -run '^$' -bench BenchmarkSetPhases -benchtime 1000x ./plugins/secrets/
func BenchmarkSetPhases(b *testing.B) {
	root := b.TempDir()
	open := func(dir string) *vault.Vault {
		keyFile := filepath.Join(root, dir+".key")
		if err := vault.GenerateKeyFile(keyFile); err != nil {
			b.Fatal(err)
		}
		v, err := vault.New(vault.Config{Dir: filepath.Join(root, dir), KeyFile: keyFile})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { v.Close() })
		return v
	}
	v, nv := open("state"), open("native")
	var tin, tout time.Time
	tbl := v.Table()
	for i := range tbl {
		inner := tbl[i].Func
		tbl[i].Func = func(ctx context.Context, c hostcalls.Call, args []byte) ([]byte, error) {
			tin = time.Now()
			defer func() { tout = time.Now() }()
			return inner(ctx, c, args)
		}
	}
	h := hosttest.NewHost(b, host.Config{Ceiling: hostcalls.AllCapabilities, Tables: []hostcalls.Table{tbl},
		Logger: slog.New(slog.DiscardHandler)}, "secrets", "plugins/secrets")
	ctx := context.Background()
	// run invokes method b.N times with args(i) and returns the p50s of
	// the time before the host call, after it, in it and in total.
	// native, when not nil, runs after each invocation.
	run := func(method string, args func(int) string, wantErr bool, native func(i int)) (pre, post, in, total time.Duration) {
		var dp, dq, di, dt []time.Duration
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			_, perr := h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "i", NodeID: "node-id", SessionGeneration: 1,
				Method: method, Args: json.RawMessage(args(i))})
			t3 := time.Now()
			if (perr != nil) != wantErr {
				b.Fatalf("%s: %v", method, perr)
			}
			dp, dq, di, dt = append(dp, tin.Sub(t0)), append(dq, t3.Sub(tout)), append(di, tout.Sub(tin)), append(dt, t3.Sub(t0))
			if native != nil {
				native(i)
			}
		}
		return hosttest.P50(dp), hosttest.P50(dq), hosttest.P50(di), hosttest.P50(dt)
	}
	set := func(name, op string) string {
		return `{"nodeId":"node-id","name":" ` + name + ` ","value":"0123456789abcdef0123456789abcdef","operationId":"` + op + `"}`
	}
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	var nat []time.Duration
	native := func(i int) {
		rec := &vault.Record{Key: "op/node-id/op-" + itoa(i), Value: "applied", MaxPerName: protocol.SecretReceiptsPerName}
		t0 := time.Now()
		if _, perr := nv.Put(vault.PutRequest{Family: "secrets", Name: "bench/" + itoa(i), Value: []byte("0123456789abcdef0123456789abcdef"), Record: rec}); perr != nil {
			b.Fatal(perr)
		}
		nat = append(nat, time.Since(t0))
	}
	b.ResetTimer()
	pre, post, in, _ := run(protocol.MethodSecretsSet, func(i int) string { return set("bench/"+itoa(i), "op-"+itoa(i)) }, false, native)
	b.ReportMetric(us(hosttest.P50(nat)), "native-put-µs")
	b.ReportMetric(us(pre), "pre-µs")
	b.ReportMetric(us(in), "in-µs")
	b.ReportMetric(us(post), "post-µs")
	pre, post, _, _ = run(protocol.MethodSecretsSet, func(int) string { return set("bench/0", "op-0") }, false, nil)
	b.ReportMetric(us(pre), "replay-pre-µs")
	b.ReportMetric(us(post), "replay-post-µs")
	pre, post, _, _ = run(protocol.MethodSecretsReceipt, func(i int) string { return `{"nodeId":"node-id","operationId":"op-` + itoa(i) + `"}` }, false, nil)
	b.ReportMetric(us(pre), "receipt-pre-µs")
	b.ReportMetric(us(post), "receipt-post-µs")
	_, _, _, total := run(protocol.MethodSecretsSet, func(i int) string { return set("lemon_bot/invocations/"+itoa(i), "op-"+itoa(i)) }, true, nil)
	b.ReportMetric(us(total), "refused-µs")
}
