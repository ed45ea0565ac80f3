package controller

import (
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"lemon/audit"
	"lemon/protocol"
)

// BenchmarkRoundTrip measures an end-to-end node call over loopback:
// operator → controller → fake node → controller → operator, with 1 and
// 8 concurrent callers (one socket each). It reports p50/p99 latency in µs
// and requests per second.
func BenchmarkRoundTrip(b *testing.B) { benchRoundTrip(b, false) }

// BenchmarkRoundTripAudit is BenchmarkRoundTrip with an audit file: one
// record per request written to a rotated file before the answer
// (docs/BENCHMARKS.md, "Audit").
func BenchmarkRoundTripAudit(b *testing.B) { benchRoundTrip(b, true) }

func benchRoundTrip(b *testing.B, withAudit bool) {
	for _, callers := range []int{1, 8} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			cfg := testConfig()
			if withAudit {
				sink, err := audit.Open(audit.Config{File: filepath.Join(b.TempDir(), "audit.jsonl")})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { sink.Close() })
				cfg.Audit = sink
			}
			s := startServer(b, cfg)
			connectNode(b, s.url, nodeToken, protocol.NodeAdvertise{}, echoHandler)
			id := nodeIDOf("worker-1")
			params := map[string]any{"nodeId": id, "value": "ping"}
			ops := make([]*peer, callers)
			for i := range ops {
				ops[i] = connectOperator(b, s.url, adminToken)
				if f := ops[i].call(mEcho, params); !f.OK { // warm up
					b.Fatalf("warm-up: %s", f.raw)
				}
			}
			lat := make([][]time.Duration, callers)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := 0; w < callers; w++ {
				n := b.N / callers
				if w < b.N%callers {
					n++
				}
				wg.Add(1)
				go func(w, n int) {
					defer wg.Done()
					lat[w] = make([]time.Duration, 0, n)
					for i := 0; i < n; i++ {
						t0 := time.Now()
						f := ops[w].call(mEcho, params)
						lat[w] = append(lat[w], time.Since(t0))
						if !f.OK {
							b.Errorf("call: %s", f.raw)
							return
						}
					}
				}(w, n)
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			var all []time.Duration
			for _, l := range lat {
				all = append(all, l...)
			}
			sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
				b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
			}
		})
	}
}
