package main

// -procs mode (docs/BENCHMARKS.md, "Three controllers on NATS, separate
// processes"): three `lemon controller` processes (the real binary, cluster
// flags, the secret in the environment) and several sim/cmd/nodesim
// processes, so no process needs more than the host's open-file limit.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"lemon/client"
	"lemon/protocol"
)

type simStatus struct {
	Total      int                 `json:"total"`
	Online     int                 `json:"online"`
	ByURL      map[string]int      `json:"byUrl"`
	Sample     map[string][]string `json:"sample"`
	Deliveries int64               `json:"deliveries"`
	Distinct   int                 `json:"distinct"`
	Duplicates int                 `json:"duplicates"`
	RSSKiB     int64               `json:"rssKiB"`
}

type proc struct {
	name string
	cmd  *exec.Cmd
	url  string        // controllers
	file string        // nodesims: status file
	done chan struct{} // closed once the process has exited
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// rss returns a process's current and peak resident set in MiB.
func rss(pid int) (cur, peak int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		var k int64
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &k)
			cur = k / 1024
		}
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &k)
			peak = k / 1024
		}
	}
	return cur, peak
}

func readStatus(ps []*proc) ([]simStatus, error) {
	out := make([]simStatus, len(ps))
	for i, p := range ps {
		b, err := os.ReadFile(p.file)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func runProcs(lemonBin, nodesimBin string, n, simProcs, sourcesPer, calls int, keep bool) error {
	if simProcs < 1 || n < simProcs {
		return errors.New("-sim-procs must be between 1 and -nodes")
	}
	dir, err := os.MkdirTemp("", "lemon-bench-procs-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	// One operator entry per nodesim process: a credential holds at most
	// 32 pairings in progress (protocol.MaxPendingPairingsPerCredential).
	policy := `[[operators]]
name = "admin"
token_env = "LEMON_BENCH_ADMIN_TOKEN"
scopes = ["operator.admin"]
`
	env := append(os.Environ(), "LEMON_BENCH_ADMIN_TOKEN="+adminToken, "LEMON_CLUSTER_SECRET="+secret)
	simToken := func(i int) string { return fmt.Sprintf("%s-sim-%d", adminToken, i) }
	for i := 0; i < simProcs; i++ {
		policy += fmt.Sprintf("\n[[operators]]\nname = \"sim-%d\"\ntoken_env = \"LEMON_BENCH_SIM_TOKEN_%d\"\nscopes = [\"operator.admin\"]\n", i, i)
		env = append(env, fmt.Sprintf("LEMON_BENCH_SIM_TOKEN_%d=%s", i, simToken(i)))
	}
	policy += `
[limits]
max_unauthenticated = 4096
max_unauthenticated_per_address = 4096
auth_failure_burst = 10000
auth_failures_per_minute = 60000
admission_wait_ms = 5000
`
	if err := os.WriteFile(filepath.Join(dir, "controller.toml"), []byte(policy), 0o600); err != nil {
		return err
	}
	var all []*proc
	defer func() {
		for _, p := range all {
			p.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range all {
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				p.cmd.Process.Kill()
				<-p.done
			}
		}
	}()
	// The benchmark's own SIGINT/SIGTERM ends the children too.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		if _, ok := <-sigs; ok {
			for _, p := range all {
				p.cmd.Process.Signal(syscall.SIGTERM)
			}
			time.Sleep(5 * time.Second)
			os.Exit(1)
		}
	}()
	start := func(p *proc, bin string, args []string, env []string) error {
		p.cmd = exec.Command(bin, args...)
		p.cmd.Env = env
		logf, err := os.Create(filepath.Join(dir, p.name+".log"))
		if err != nil {
			return err
		}
		p.cmd.Stdout, p.cmd.Stderr = logf, logf
		if err := p.cmd.Start(); err != nil {
			return err
		}
		p.done = make(chan struct{})
		go func() { p.cmd.Wait(); logf.Close(); close(p.done) }()
		all = append(all, p)
		return nil
	}

	// Three controllers.
	t0 := time.Now()
	cports := []int{freePort(), freePort(), freePort()}
	ctrls := make([]*proc, 3)
	for i := range ctrls {
		name := string(rune('A' + i))
		var peers []string
		for j, cp := range cports {
			if j != i {
				peers = append(peers, fmt.Sprintf("127.0.0.1:%d", cp))
			}
		}
		port := freePort()
		ctrls[i] = &proc{name: "controller-" + name, url: fmt.Sprintf("ws://127.0.0.1:%d/ws", port)}
		args := []string{"controller", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--policy", filepath.Join(dir, "controller.toml"),
			"--state", filepath.Join(dir, "state-"+name), "--log-level", "warn",
			"--cluster-listen", fmt.Sprintf("127.0.0.1:%d", cports[i]), "--cluster-peers", strings.Join(peers, ","), "--cluster-name", name}
		if err := start(ctrls[i], lemonBin, args, env); err != nil {
			return err
		}
	}
	for _, c := range ctrls {
		ready := strings.Replace(strings.Replace(c.url, "ws://", "http://", 1), "/ws", "/readyz", 1)
		for {
			r, err := http.Get(ready)
			if err == nil {
				r.Body.Close()
				if r.StatusCode == 200 {
					break
				}
			}
			if time.Since(t0) > 2*time.Minute {
				return fmt.Errorf("%s not ready after 2 min (log in %s)", c.name, dir)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	fmt.Printf("3 controller processes ready in %s\n", time.Since(t0).Round(time.Millisecond))
	a, c := ctrls[0], ctrls[2]
	urls := strings.Join([]string{ctrls[0].url, ctrls[1].url, ctrls[2].url}, ",")

	// The simulated nodes, in simProcs processes over distinct 127.0.0.x.
	t0 = time.Now()
	sims := make([]*proc, simProcs)
	per := n / simProcs
	for i := range sims {
		k := per
		if i == simProcs-1 {
			k = n - per*(simProcs-1)
		}
		sims[i] = &proc{name: fmt.Sprintf("nodesim-%d", i), file: filepath.Join(dir, fmt.Sprintf("nodesim-%d.json", i))}
		args := []string{"-controller", urls, "-nodes", fmt.Sprint(k), "-name-prefix", fmt.Sprintf("sim-%d-", i),
			"-sources", fmt.Sprint(sourcesPer), "-source-first", fmt.Sprint(2 + i*sourcesPer),
			"-status", sims[i].file, "-backoff-max", "5s"}
		if err := start(sims[i], nodesimBin, args, append(os.Environ(), "LEMON_OPERATOR_TOKEN="+simToken(i))); err != nil {
			return err
		}
	}
	var st []simStatus
	best := 0
	for {
		time.Sleep(time.Second)
		for _, p := range all {
			if p.exited() {
				return fmt.Errorf("%s exited (log in %s)", p.name, dir)
			}
		}
		if st, err = readStatus(sims); err != nil {
			if time.Since(t0) > 15*time.Minute {
				return fmt.Errorf("no status from the simulators after 15 min (logs in %s)", dir)
			}
			continue
		}
		online := 0
		for _, s := range st {
			online += s.Online
		}
		best = max(best, online)
		if online == n {
			break
		}
		if time.Since(t0) > 15*time.Minute {
			return fmt.Errorf("only %d of %d nodes online after 15 min (best %d; logs in %s)", online, n, best, dir)
		}
	}
	fmt.Printf("%d nodes (paired through A, then connected) online over A, B, C in %s, %d nodesim processes\n",
		n, time.Since(t0).Round(time.Millisecond), simProcs)
	byURL := map[string]int{}
	var sample = map[string][]string{}
	for _, s := range st {
		for u, k := range s.ByURL {
			byURL[u] += k
		}
		for u, ids := range s.Sample {
			sample[u] = append(sample[u], ids...)
		}
	}
	for _, p := range ctrls {
		cur, peak := rss(p.cmd.Process.Pid)
		fmt.Printf("  %s holds %d nodes: RSS %d MiB (peak %d MiB)\n", p.name, byURL[p.url], cur, peak)
	}
	for i, s := range st {
		fmt.Printf("  nodesim-%d: %d nodes, RSS %d MiB\n", i, s.Total, s.RSSKiB/1024)
	}

	ctx := context.Background()
	op, err := client.Dial(ctx, a.url, client.Options{Token: adminToken, ClientID: "bench"})
	if err != nil {
		return err
	}
	defer op.Close()
	call := func(id string) (time.Duration, *protocol.Error) {
		t := time.Now()
		_, e := op.Call(ctx, "node.host.info", map[string]string{"nodeId": id})
		return time.Since(t), e
	}
	for _, ids := range sample {
		for _, id := range ids {
			deadline := time.Now().Add(2 * time.Minute)
			for {
				if _, e := call(id); e == nil {
					break
				} else if time.Now().After(deadline) {
					return fmt.Errorf("node not reachable from A: %s", e.Message)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	if err := hopLatency(call, calls, sample[a.url], sample[c.url]); err != nil {
		return err
	}

	// SIGKILL C under load: 8 operators on A keep calling C's sampled nodes.
	victims := sample[c.url]
	var issued, okN, notDispatched, uncertain, other atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lop, err := client.Dial(ctx, a.url, client.Options{Token: adminToken, ClientID: "bench-load"})
			if err != nil {
				return
			}
			defer lop.Close()
			for i := g; ; i += 8 {
				select {
				case <-stop:
					return
				default:
				}
				issued.Add(1)
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, e := lop.Call(cctx, "node.host.info", map[string]string{"nodeId": victims[i%len(victims)]})
				cancel()
				switch {
				case e == nil:
					okN.Add(1)
				case e.DomainCode() == protocol.DomainNodeOffline:
					notDispatched.Add(1)
				case e.DomainCode() == protocol.DomainNodeDisconnected || e.Code == protocol.CodeTimeout:
					uncertain.Add(1)
				default:
					other.Add(1)
				}
			}
		}()
	}
	time.Sleep(time.Second)
	held := byURL[c.url]
	fmt.Printf("SIGKILL to C (holding %d nodes) under load\n", held)
	tk := time.Now()
	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
	var recovered time.Duration
	for {
		if st, err = readStatus(sims); err == nil {
			online, onC := 0, 0
			for _, s := range st {
				online += s.Online
				onC += s.ByURL[c.url]
			}
			if online == n && onC == 0 {
				recovered = time.Since(tk)
				break
			}
		}
		if time.Since(tk) > 10*time.Minute {
			return fmt.Errorf("C's nodes not all back after 10 min")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, id := range victims {
		for {
			if _, e := call(id); e == nil {
				break
			} else if time.Since(tk) > 10*time.Minute {
				return fmt.Errorf("moved node unreachable: %s", e.Message)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	reach := time.Since(tk)
	close(stop)
	wg.Wait()
	time.Sleep(time.Second) // a last status write
	st, err = readStatus(sims)
	if err != nil {
		return err
	}
	var deliveries int64
	distinct, dups := 0, 0
	for _, s := range st {
		deliveries += s.Deliveries
		distinct += s.Distinct
		dups += s.Duplicates
	}
	fmt.Printf("all %d of C's nodes back on A and B %s after the kill; the sampled ones answering through A after %s\n",
		held, recovered.Round(time.Millisecond), reach.Round(time.Millisecond))
	fmt.Printf("load during the kill: %d calls: %d ok, %d not delivered (node_offline), %d cut off after hand-over (node_disconnected or timeout), %d other\n",
		issued.Load(), okN.Load(), notDispatched.Load(), uncertain.Load(), other.Load())
	for _, p := range ctrls[:2] {
		cur, peak := rss(p.cmd.Process.Pid)
		fmt.Printf("  %s after the failover: RSS %d MiB (peak %d MiB)\n", p.name, cur, peak)
	}
	fmt.Printf("deliveries counted at the nodes per invokeId: %d deliveries, %d distinct invokeIds, %d delivered more than once\n",
		deliveries, distinct, dups)
	if dups != 0 {
		return errors.New("a request was delivered twice")
	}
	fmt.Println("no request delivered twice")
	return nil
}
