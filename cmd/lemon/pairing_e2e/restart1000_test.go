package pairinge2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"lemon/protocol"
	"lemon/worker"
)

// trivialDispatcher serves node.host.info with a constant payload.
type trivialDispatcher struct{}

func (trivialDispatcher) Methods() map[string]int { return map[string]int{methodHostInfo: 1} }

func (trivialDispatcher) Invoke(context.Context, protocol.InvokeRequest) (json.RawMessage, *protocol.Error) {
	return json.RawMessage(`{"os":"simulated"}`), nil
}

// TestRestartUnder1000Nodes restarts a real `lemon controller` subprocess
// (SIGTERM, then a new process on the same port and --state) under 1,000
// paired nodes simulated in this process: real worker.Worker instances
// with the default reconnect backoff (worker/backoff.go: full jitter,
// 500 ms doubling to 30 s) and a trivial Dispatcher. It reports the time
// until all nodes are back online, the new controller's peak RSS (VmHWM
// from /proc/PID/status) and the spread of the reconnect times.
//
// It runs only with LEMON_BENCH_1000=1 (LEMON_BENCH_NODES changes the
// count):
//
//	LEMON_BENCH_1000=1 go test -run TestRestartUnder1000Nodes -v -timeout 20m ./cmd/lemon/pairing_e2e/
func TestRestartUnder1000Nodes(t *testing.T) {
	if os.Getenv("LEMON_BENCH_1000") != "1" {
		t.Skip("set LEMON_BENCH_1000=1 to run the 1,000-node controller restart measurement")
	}
	nodes := 1000
	if v := os.Getenv("LEMON_BENCH_NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			t.Fatalf("LEMON_BENCH_NODES must be 1..10000")
		}
		nodes = n
	}
	// Each node holds a socket here and one in the controller; pairing
	// holds a few more. Raising the soft limit explicitly also passes it
	// on to the controller subprocess.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if need := uint64(2*nodes + 512); lim.Cur < need {
		t.Fatalf("RLIMIT_NOFILE hard limit %d is below the %d open files %d nodes need", lim.Max, need, nodes)
	}

	h := newHarness(t)
	h.startController()
	store := worker.TokenStore{Dir: filepath.Join(h.root, "sim-store")}

	// Pair every node through the real pairing client, 8 at a time; an
	// operator approves each code as it is shown.
	approver := h.operator()
	recs := make([]*worker.NodeRecord, nodes)
	pairStart := time.Now()
	var pairWG sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range recs {
		pairWG.Add(1)
		sem <- struct{}{}
		go func() {
			defer pairWG.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rec, err := worker.Pair(ctx, worker.PairConfig{
				ControllerURL: h.url, OperatorToken: h.pairToken, Name: fmt.Sprintf("sim-%04d", i),
				Methods: trivialDispatcher{}.Methods(), Store: store, PollInterval: 100 * time.Millisecond,
				OnCode: func(code string, _ time.Time) {
					go approver.Call(ctx, protocol.MethodPairApprove, protocol.PairDecisionParams{Code: code})
				},
			})
			if err != nil {
				t.Errorf("pair sim-%04d: %v", i, err)
				return
			}
			recs[i] = rec
		}()
	}
	pairWG.Wait()
	if t.Failed() {
		t.FailNow()
	}
	pairing := time.Since(pairStart)
	for _, r := range recs {
		h.addSecret("session token", r.SessionToken)
		h.addSecret("recovery credential", r.RecoveryCredential)
	}

	// Start the simulated nodes; each records when it (re)connects.
	var mu sync.Mutex
	connects := make([][]time.Time, nodes)
	dials := make([][]dialRec, nodes) // every TCP dial attempt of each node
	ctx, cancel := context.WithCancel(context.Background())
	var runWG sync.WaitGroup
	t.Cleanup(func() { cancel(); runWG.Wait() })
	for i, r := range recs {
		w, err := worker.New(worker.Config{ControllerURL: h.url, Name: r.Name, NodeID: r.NodeID, Token: r.SessionToken,
			Dispatcher: trivialDispatcher{},
			Dialer: &websocket.Dialer{HandshakeTimeout: 10 * time.Second,
				NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
					now := time.Now()
					c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
					mu.Lock()
					dials[i] = append(dials[i], dialRec{now, err != nil})
					mu.Unlock()
					return c, err
				}},
			OnConnected: func(protocol.NodeHelloOK) {
				now := time.Now()
				mu.Lock()
				connects[i] = append(connects[i], now)
				mu.Unlock()
			}})
		if err != nil {
			t.Fatal(err)
		}
		runWG.Go(func() {
			if err := w.Run(ctx); err != nil {
				t.Errorf("node %s: %v", r.Name, err)
			}
		})
	}
	firstStart := time.Now()
	h.waitAllOnline(nodes, 2*time.Minute)
	firstOnline := time.Since(firstStart)
	hwm1, rss1 := procMemory(t, h.ctl.cmd.Process.Pid)

	// Restart.
	stopAt := time.Now()
	if code := h.ctl.stop(); code != 0 {
		t.Fatalf("controller exit %d\n%s", code, h.ctl.out.String())
	}
	exited := time.Since(stopAt)
	startAt := time.Now()
	h.startController()
	listening := time.Since(stopAt)
	list := h.waitAllOnline(nodes, 5*time.Minute)
	allOnline := time.Since(stopAt)
	hwm2, rss2 := procMemory(t, h.ctl.cmd.Process.Pid)
	// The restarted controller routes to a simulated node.
	if info := callAs[map[string]string](h, methodHostInfo, protocol.HostInfoParams{NodeID: recs[nodes-1].NodeID}); info["os"] != "simulated" {
		t.Fatalf("node.host.info: %v", info)
	}

	// Timelines relative to the SIGTERM: every dial attempt, each node's
	// first dial after it (its first backoff draw), the controller-side
	// connectedAtMs, and each node's hello-ok.
	mu.Lock()
	var attempts, firstRetry, secondDelay, accepted, helloAt []time.Duration
	for i := range nodes {
		var after []dialRec
		for _, d := range dials[i] {
			if d.at.After(stopAt) {
				after = append(after, d)
				attempts = append(attempts, d.at.Sub(stopAt))
			}
		}
		if len(after) > 0 {
			firstRetry = append(firstRetry, after[0].at.Sub(stopAt))
		}
		// A refused first retry makes the worker draw its next delay from
		// [0, Backoff.Ceiling(1)] = [0, 1 s].
		if len(after) > 1 && after[0].refused {
			secondDelay = append(secondDelay, after[1].at.Sub(after[0].at))
		}
		j := slices.IndexFunc(connects[i], func(c time.Time) bool { return c.After(startAt) })
		if j < 0 {
			t.Fatalf("node %d never reconnected", i)
		}
		helloAt = append(helloAt, connects[i][j].Sub(stopAt))
	}
	mu.Unlock()
	for _, n := range list {
		accepted = append(accepted, time.UnixMilli(n.ConnectedAtMs).Sub(stopAt))
	}
	const bucket = 250 * time.Millisecond
	var sb strings.Builder
	fmt.Fprintf(&sb, "  after SIGTERM      dials  accepted  hello-ok\n")
	ha, hc, hh := histogram(attempts, bucket), histogram(accepted, bucket), histogram(helloAt, bucket)
	for b := 0; b < max(len(ha), len(hc), len(hh)); b++ {
		mark := ""
		if time.Duration(b)*bucket <= listening && listening < time.Duration(b+1)*bucket {
			mark = "  <- new controller listening"
		}
		fmt.Fprintf(&sb, "  %5.2f–%5.2f s  %6d  %8d  %8d  %s%s\n", (time.Duration(b) * bucket).Seconds(), (time.Duration(b+1) * bucket).Seconds(),
			at(ha, b), at(hc, b), at(hh, b), strings.Repeat("#", (at(hc, b)+9)/10), mark)
	}
	busiest := slices.Max(histogram(firstRetry, 50*time.Millisecond))

	t.Logf("%d simulated paired nodes; pairing them took %s; first start to all online %s", nodes, pairing.Round(time.Millisecond), firstOnline.Round(time.Millisecond))
	t.Logf("controller before restart: VmHWM %.1f MiB, VmRSS %.1f MiB", mib(hwm1), mib(rss1))
	t.Logf("restart, from SIGTERM: old process exited %s, new process listening %s, all %d online %s (%s after the new process started)",
		exited.Round(time.Millisecond), listening.Round(time.Millisecond), nodes, allOnline.Round(time.Millisecond), (allOnline - startAt.Sub(stopAt)).Round(time.Millisecond))
	t.Logf("restarted controller: peak RSS (VmHWM) %.1f MiB, VmRSS %.1f MiB with all online", mib(hwm2), mib(rss2))
	t.Logf("%d dial attempts after SIGTERM; first retries: p10 %s p50 %s p90 %s (busiest 50 ms: %d of %d)",
		len(attempts), pct(firstRetry, 10), pct(firstRetry, 50), pct(firstRetry, 90), busiest, nodes)
	t.Logf("delay after a refused first retry (drawn from [0, 1 s]) for %d nodes: min %s p10 %s p50 %s p90 %s max %s",
		len(secondDelay), pct(secondDelay, 0), pct(secondDelay, 10), pct(secondDelay, 50), pct(secondDelay, 90), pct(secondDelay, 100))
	t.Logf("accepted by the new controller (connectedAtMs): p10 %s p50 %s p90 %s max %s\n%s",
		pct(accepted, 10), pct(accepted, 50), pct(accepted, 90), pct(accepted, 100), sb.String())
	// Jitter, shown without judging speed: without it every node would wait
	// the same delay after a refused dial (p10 = p90); full jitter spreads
	// the delays over [0, 1 s], p10 near 100 ms and p90 near 900 ms.
	if len(secondDelay) >= 100 && pct(secondDelay, 90)-pct(secondDelay, 10) < 250*time.Millisecond {
		t.Fatalf("reconnect delays are not spread out: p10 %s p90 %s", pct(secondDelay, 10), pct(secondDelay, 90))
	}
}

// dialRec is one TCP dial attempt of a simulated node.
type dialRec struct {
	at      time.Time
	refused bool
}

// histogram counts ds in buckets of width w from 0.
func histogram(ds []time.Duration, w time.Duration) []int {
	var h []int
	for _, d := range ds {
		b := int(max(d, 0) / w)
		for len(h) <= b {
			h = append(h, 0)
		}
		h[b]++
	}
	return h
}

func at(h []int, i int) int {
	if i < len(h) {
		return h[i]
	}
	return 0
}

// pct is the p-th percentile of ds (p 100 is the maximum), rounded to ms.
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(time.Millisecond)
}

// waitAllOnline polls node.list until n nodes are online and returns it.
func (h *harness) waitAllOnline(n int, timeout time.Duration) []protocol.NodeSummary {
	h.t.Helper()
	c := h.operator()
	defer c.Close()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		raw, perr := c.Call(ctx, protocol.MethodNodeList, protocol.NodeListParams{})
		cancel()
		res := mustDecode[protocol.NodeListResult](h.t, raw, perr)
		online := 0
		for _, s := range res.Nodes {
			if s.Online {
				online++
			}
		}
		if online == n {
			return res.Nodes
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%d of %d nodes online after %s", online, n, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procMemory returns VmHWM (peak resident set) and VmRSS of pid, in bytes.
func procMemory(t *testing.T, pid int) (hwm, rss uint64) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmHWM" && k != "VmRSS") {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			t.Fatalf("/proc status %s: %q", k, v)
		}
		if k == "VmHWM" {
			hwm = kb << 10
		} else {
			rss = kb << 10
		}
	}
	if hwm == 0 || rss == 0 {
		t.Fatal("no VmHWM/VmRSS in /proc status")
	}
	return hwm, rss
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
