package hosttest

import (
	"slices"
	"testing"
	"time"
)

// SideBySide runs module and native alternately, b.N times each, in one
// loop, so both see the same machine load, and reports the p50 of each in
// µs (metrics "module-p50-µs" and "native-p50-µs") and their ratio
// ("ratio", module / native). docs/BENCHMARKS.md ("Module ABI") lists the
// bound of each ratio. Either function failing stops the benchmark.
func SideBySide(b *testing.B, module, native func() error) {
	b.Helper()
	mod := make([]time.Duration, 0, b.N)
	nat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := module(); err != nil {
			b.Fatalf("module: %v", err)
		}
		t1 := time.Now()
		if err := native(); err != nil {
			b.Fatalf("native: %v", err)
		}
		t2 := time.Now()
		mod = append(mod, t1.Sub(t0))
		nat = append(nat, t2.Sub(t1))
	}
	b.StopTimer()
	m, n := P50(mod), P50(nat)
	b.ReportMetric(float64(m)/1e3, "module-p50-µs")
	b.ReportMetric(float64(n)/1e3, "native-p50-µs")
	if n > 0 {
		b.ReportMetric(float64(m)/float64(n), "ratio")
	}
}

// Latency runs f b.N times and reports its p50 and p90 in µs (metrics
// "p50-µs" and "p90-µs"), for benchmarks whose bound is absolute.
func Latency(b *testing.B, f func() error) {
	b.Helper()
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(float64(P50(d))/1e3, "p50-µs")
	b.ReportMetric(float64(quantile(d, 0.9))/1e3, "p90-µs")
}

// P50 is the median of d (0 when d is empty); d is sorted in place.
func P50(d []time.Duration) time.Duration { return quantile(d, 0.5) }

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[int(q*float64(len(d)-1))]
}
