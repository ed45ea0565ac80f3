package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lemon/client"
)

// The BenchmarkE2E* set measures through a real `lemon dev` subprocess
// (controller + node over loopback), with the client package in-process
// as the operator. Each reports p50 and p99 latency (µs) and requests/s
// next to ns/op:
//
//	./build.sh && go test -run '^$' -bench E2E ./cmd/lemon/e2e/

// measure runs op b.N times spread over callers goroutines, caller c
// using conns[c], and reports the latency percentiles and throughput.
func measure(b *testing.B, d *devNode, conns []*client.Conn, op func(conn *client.Conn, i int) error) {
	b.Helper()
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	cpu0 := cpuTime(d.p.cmd.Process.Pid)
	b.ResetTimer()
	start := time.Now()
	for _, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N {
					return
				}
				t0 := time.Now()
				err := op(conn, i)
				lat[i] = time.Since(t0)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := firstErr.Load().(error); err != nil {
		b.Fatalf("request failed: %v", err)
	}
	report(b, lat, elapsed)
	reportDevCPU(b, d, cpu0)
}

// reportDevCPU adds dev-cpu-µs/op: the CPU time (user + system) the
// `lemon dev` process spent per operation, a figure that the load of a
// shared machine does not inflate the way it inflates latency. /proc
// counts in 10 ms ticks, so it is meaningful over many operations.
func reportDevCPU(b *testing.B, d *devNode, cpu0 time.Duration) {
	b.ReportMetric(float64((cpuTime(d.p.cmd.Process.Pid)-cpu0).Microseconds())/float64(b.N), "dev-cpu-µs/op")
}

// report adds p50-µs, p99-µs and req/s.
func report(b *testing.B, lat []time.Duration, elapsed time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) time.Duration {
		i := int(float64(len(lat))*p+0.999999) - 1
		return lat[max(0, min(i, len(lat)-1))]
	}
	b.ReportMetric(float64(pct(0.50).Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(pct(0.99).Nanoseconds())/1e3, "p99-µs")
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "req/s")
}

func dialN(b *testing.B, d *devNode, n int) []*client.Conn {
	b.Helper()
	conns := make([]*client.Conn, n)
	for i := range conns {
		conns[i] = dialOperator(b, d.url, d.token)
	}
	return conns
}

func call(conn *client.Conn, method string, params json.RawMessage, out any) error {
	raw, perr := conn.Call(context.Background(), method, params)
	if perr != nil {
		return perr
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

func rawJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkE2EHostInfo: node.host.info round trips, 1 and 8 concurrent
// callers (one connection each).
func BenchmarkE2EHostInfo(b *testing.B) {
	for _, callers := range []int{1, 8} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			d := sharedDev(b, "main")
			params := rawJSON(map[string]any{"nodeId": d.nodeID})
			measure(b, d, dialN(b, d, callers), func(conn *client.Conn, _ int) error {
				var info struct{ CPUCount int }
				if err := call(conn, "node.host.info", params, &info); err != nil {
					return err
				}
				if info.CPUCount < 1 {
					return fmt.Errorf("cpuCount %d", info.CPUCount)
				}
				return nil
			})
		})
	}
}

// BenchmarkE2EFSStat: node.fs.stat of a file in the node's cwd.
func BenchmarkE2EFSStat(b *testing.B) {
	d := sharedDev(b, "main")
	if err := os.WriteFile(filepath.Join(d.cwd, "stat-me.txt"), []byte("hello\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	params := rawJSON(map[string]any{"nodeId": d.nodeID, "path": "stat-me.txt"})
	measure(b, d, dialN(b, d, 1), func(conn *client.Conn, _ int) error {
		var st struct{ Size int64 }
		if err := call(conn, "node.fs.stat", params, &st); err != nil {
			return err
		}
		if st.Size != 6 {
			return fmt.Errorf("size %d", st.Size)
		}
		return nil
	})
}

// processIDsUsed counts the IDs spent on the "process" instance; a node
// retains at most 1,000, so the benchmark moves to a fresh instance
// (timer stopped) before it runs out.
var processIDsUsed int

// BenchmarkE2EProcessRunTrue: node.process.run of `true`, awaiting the
// completed receipt.
func BenchmarkE2EProcessRunTrue(b *testing.B) {
	d := sharedDev(b, "process")
	conns := dialN(b, d, 1)
	const batch = 900
	lat := make([]time.Duration, 0, b.N)
	var busy, devCPU time.Duration
	cpu0 := cpuTime(d.p.cmd.Process.Pid)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if processIDsUsed == batch {
			b.StopTimer()
			devCPU += cpuTime(d.p.cmd.Process.Pid) - cpu0
			d = restartShared(b, "process")
			cpu0 = cpuTime(d.p.cmd.Process.Pid)
			conns = dialN(b, d, 1)
			processIDsUsed = 0
			b.StartTimer()
		}
		processIDsUsed++
		params := rawJSON(map[string]any{"nodeId": d.nodeID, "processId": fmt.Sprintf("bench:%d", processIDsUsed), "cwd": ".",
			"argv": []string{"true"}, "stdinBase64": "", "timeoutMs": 10000, "maxOutputBytes": 1024})
		t0 := time.Now()
		var r struct {
			State    string
			ExitCode *int
		}
		if err := call(conns[0], "node.process.run", params, &r); err != nil {
			b.Fatal(err)
		}
		took := time.Since(t0)
		if r.State != "completed" || r.ExitCode == nil || *r.ExitCode != 0 {
			b.Fatalf("receipt %+v", r)
		}
		lat = append(lat, took)
		busy += took
	}
	b.StopTimer()
	report(b, lat, busy)
	devCPU += cpuTime(d.p.cmd.Process.Pid) - cpu0
	b.ReportMetric(float64(devCPU.Microseconds())/float64(b.N), "dev-cpu-µs/op")
}

var secretsSetCount int

// BenchmarkE2ESecretsSetWithReceipt: node.secrets.set of a new name with
// an operationId (one fsync'd vault write each).
func BenchmarkE2ESecretsSetWithReceipt(b *testing.B) {
	d := sharedDev(b, "secrets-set")
	base := secretsSetCount
	secretsSetCount += b.N
	value := "v-" + randHex(16)
	measure(b, d, dialN(b, d, 1), func(conn *client.Conn, i int) error {
		n := base + i
		var r struct{ Status string }
		err := call(conn, "node.secrets.set", rawJSON(map[string]any{"nodeId": d.nodeID,
			"name": fmt.Sprintf("bench/set/%08d", n), "value": value, "operationId": fmt.Sprintf("bench-set-%d", n)}), &r)
		if err == nil && r.Status != "applied" {
			err = fmt.Errorf("status %q", r.Status)
		}
		return err
	})
}

var listLoaded bool

// BenchmarkE2ESecretsList500: node.secrets.list of a vault holding 500
// names of 36 bytes.
func BenchmarkE2ESecretsList500(b *testing.B) {
	d := sharedDev(b, "secrets-list")
	conns := dialN(b, d, 1)
	if !listLoaded {
		for i := 0; i < 500; i++ {
			if err := call(conns[0], "node.secrets.set", rawJSON(map[string]any{"nodeId": d.nodeID,
				"name": fmt.Sprintf("bench/list/secret-number-%011d", i), "value": "v"}), nil); err != nil {
				b.Fatal(err)
			}
		}
		listLoaded = true
	}
	params := rawJSON(map[string]any{"nodeId": d.nodeID})
	measure(b, d, conns, func(conn *client.Conn, _ int) error {
		var l struct {
			Names     []string
			Truncated bool
		}
		if err := call(conn, "node.secrets.list", params, &l); err != nil {
			return err
		}
		if len(l.Names) != 500 || l.Truncated {
			return fmt.Errorf("%d names, truncated %v", len(l.Names), l.Truncated)
		}
		return nil
	})
}
