// Command fleet benchmarks one controller under many simulated nodes
// (docs/BENCHMARKS.md, "One controller, 10,000 nodes"): it runs the real
// `lemon controller` as a child process with a state directory, pairs
// -nodes simulated nodes (package sim) spread over loopback source
// addresses, and prints the controller's peak RSS (VmHWM), its idle CPU
// over -idle, the time of a node.host.info fan-out to every node, and the
// time until every node is back online after a controller restart.
//
//	go build -o bin/lemon ./cmd/lemon && go run ./bench/fleet -nodes 10000
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"lemon/client"
	"lemon/protocol"
	"lemon/sim"
)

const token = "bench-fleet-admin-token-0123456789abcdef"

func main() {
	nodes := flag.Int("nodes", 10000, "simulated nodes")
	lemon := flag.String("lemon", "bin/lemon", "the lemon binary")
	sources := flag.Int("sources", 0, "loopback source addresses 127.0.0.1..N (default: one per 2,000 nodes, at least 2)")
	idle := flag.Duration("idle", 10*time.Second, "idle CPU measurement window")
	addr := flag.String("listen", "127.0.0.1:17787", "controller listen address")
	policy := flag.String("policy", "", "controller policy TOML (default: one with [limits] sized for the fleet; see docs/SCALE.md)")
	concurrency := flag.Int("concurrency", protocol.MaxFanoutConcurrency, "fan-out concurrency")
	flag.Parse()
	if err := run(*nodes, *lemon, *sources, *idle, *addr, *policy, *concurrency); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

func run(n int, lemon string, sources int, idle time.Duration, addr, policy string, concurrency int) error {
	// Each node is one socket here and one in the controller.
	// Each node is one socket here and one in the controller (a child:
	// it inherits the limit). Raise the hard limit when allowed (root
	// with CAP_SYS_RESOURCE), else the soft one to the hard one.
	lim := syscall.Rlimit{Cur: 1 << 20, Max: 1 << 20}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
		lim.Cur = lim.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	if lim.Cur < uint64(n)+1024 {
		return fmt.Errorf("RLIMIT_NOFILE %d is too low for %d nodes", lim.Cur, n)
	}
	if sources <= 0 {
		sources = max(2, (n+1999)/2000)
	}
	dir, err := os.MkdirTemp("", "lemon-fleet-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if policy == "" {
		policy = filepath.Join(dir, "controller.toml")
		toml := "[limits]\nmax_unauthenticated = 4096\nmax_unauthenticated_per_address = 4096\nmax_inflight = 1024\n"
		if err := os.WriteFile(policy, []byte(toml), 0o600); err != nil {
			return err
		}
	}
	state := filepath.Join(dir, "state")
	url := "ws://" + addr + "/ws"
	fmt.Printf("nodes %d, source addresses %d, controller %s\n", n, sources, lemon)

	ctl, err := startController(lemon, addr, state, policy)
	if err != nil {
		return err
	}
	defer func() { ctl.Process.Kill(); ctl.Wait() }()

	ctx := context.Background()
	o := sim.Options{URL: url, AdminToken: token, SourceAddrs: sim.LoopbackSources(sources), Parallel: 256}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("sim-%05d", i)
	}
	t0 := time.Now()
	creds, err := sim.Pair(ctx, o, names)
	if err != nil {
		return err
	}
	fmt.Printf("paired %d nodes in %.1f s\n", n, time.Since(t0).Seconds())
	t0 = time.Now()
	f := sim.Start(ctx, o, creds)
	defer f.Close()
	if !waitOnline(f, n, 120*time.Second) {
		return fmt.Errorf("only %d of %d online", f.Online(), n)
	}
	fmt.Printf("connected %d nodes in %.1f s\n", n, time.Since(t0).Seconds())

	time.Sleep(2 * time.Second)
	cpu0, _ := cpuTicks(ctl.Process.Pid)
	time.Sleep(idle)
	cpu1, _ := cpuTicks(ctl.Process.Pid)
	fmt.Printf("idle CPU over %s: %.2f %% of one core\n", idle, 100*float64(cpu1-cpu0)/100/idle.Seconds())
	printRSS("after connect", ctl.Process.Pid)

	for round := 1; round <= 2; round++ {
		d, ok, failed, err := fanout(ctx, url, concurrency)
		if err != nil {
			return err
		}
		fmt.Printf("fan-out node.host.info to %d nodes (round %d): %.2f s (ok %d, failed %d)\n", n, round, d.Seconds(), ok, failed)
	}
	printRSS("after fan-out", ctl.Process.Pid)

	// Restart: SIGTERM, wait, start again on the same state directory.
	t0 = time.Now()
	ctl.Process.Signal(syscall.SIGTERM)
	ctl.Wait()
	down := time.Since(t0)
	for f.Online() > 0 && time.Since(t0) < 30*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	t1 := time.Now()
	ctl, err = startController(lemon, addr, state, policy)
	if err != nil {
		return err
	}
	up := time.Since(t1)
	if !waitOnline(f, n, 120*time.Second) {
		return fmt.Errorf("after restart only %d of %d online", f.Online(), n)
	}
	fmt.Printf("restart: stopped in %.1f s, serving again %.1f s after start; all %d back online %.1f s after the restart began (%.1f s after the new controller started)\n",
		down.Seconds(), up.Seconds(), n, time.Since(t0).Seconds(), time.Since(t1).Seconds())
	printRSS("restarted controller", ctl.Process.Pid)
	fmt.Printf("simulator (this process, %d nodes): ", n)
	printRSS("", os.Getpid())
	return nil
}

func waitOnline(f *sim.Fleet, n int, limit time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	return f.Wait(ctx, n)
}

func startController(lemon, addr, state, policy string) (*exec.Cmd, error) {
	cmd := exec.Command(lemon, "controller", "--listen", addr, "--state", state, "--policy", policy, "--log-level", "warn")
	cmd.Env = append(os.Environ(), "LEMON_CONTROL_PLANE_OPERATOR_TOKEN="+token)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return cmd, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	return nil, errors.New("controller did not become healthy")
}

func fanout(ctx context.Context, url string, concurrency int) (time.Duration, int, int, error) {
	var events atomic.Int64
	op, err := client.Dial(ctx, url, client.Options{Token: token, OnEvent: func(ev protocol.Event) {
		if ev.Event == protocol.EventFanoutResult {
			events.Add(1)
		}
	}})
	if err != nil {
		return 0, 0, 0, err
	}
	defer op.Close()
	on := true
	t0 := time.Now()
	raw, perr := op.Call(ctx, protocol.MethodNodeFanout, protocol.FanoutParams{Method: "node.host.info",
		Filter: &protocol.NodeFilter{Online: &on}, Concurrency: concurrency})
	d := time.Since(t0)
	if perr != nil {
		return d, 0, 0, perr
	}
	var sum protocol.FanoutSummary
	json.Unmarshal(raw, &sum)
	if int(events.Load()) != sum.Total {
		return d, 0, 0, fmt.Errorf("%d events for %d nodes", events.Load(), sum.Total)
	}
	return d, sum.OK, sum.Failed, nil
}

// cpuTicks is utime+stime of pid in clock ticks (USER_HZ, 100 a second).
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseInt(fields[11], 10, 64)
	k, _ := strconv.ParseInt(fields[12], 10, 64)
	return u + k, nil
}

func printRSS(when string, pid int) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return
	}
	defer f.Close()
	var hwm, rss string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			hwm = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			rss = strings.TrimSpace(v)
		}
	}
	if when == "" {
		fmt.Printf("VmHWM %s, VmRSS %s\n", hwm, rss)
		return
	}
	fmt.Printf("controller RSS %s: VmHWM %s, VmRSS %s\n", when, hwm, rss)
}
