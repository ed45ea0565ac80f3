// Command cluster benchmarks three federated controllers
// (docs/BENCHMARKS.md, "Three controllers on NATS"): it runs three
// in-process controllers, each with an embedded nats-server routed to the
// others on loopback, pairs -nodes simulated nodes (package sim) through
// controller A and spreads them over the three, then measures the p50
// latency an operator on A sees reaching a node held by A and one held by
// C, and kills C under load: the time until all its nodes are back on A
// and B, and a check that no request was delivered twice.
//
//	go run ./bench/cluster -nodes 3000
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"lemon/client"
	"lemon/cluster"
	"lemon/controller"
	"lemon/protocol"
	"lemon/sim"
)

const (
	adminToken = "bench-cluster-admin-token-0123456789abcdef"
	secret     = "bench-cluster-secret-0123456789abcdef"
)

type member struct {
	name string
	emb  *cluster.Embedded
	nc   *nats.Conn
	srv  *controller.Server
	url  string
}

func main() {
	nodes := flag.Int("nodes", 3000, "simulated nodes, spread over the three controllers")
	calls := flag.Int("calls", 400, "sequential calls per latency sample (local and remote)")
	sources := flag.Int("sources", 0, "loopback source addresses 127.0.0.1..N (default: one per 2,000 nodes, at least 2)")
	procs := flag.Bool("procs", false, "run the controllers as `lemon controller` processes and the nodes in nodesim processes")
	lemonBin := flag.String("lemon", "bin/lemon", "with -procs: the lemon binary")
	nodesimBin := flag.String("nodesim", "bin/nodesim", "with -procs: the nodesim binary (go build -o bin/nodesim ./sim/cmd/nodesim)")
	simProcs := flag.Int("sim-procs", 4, "with -procs: nodesim processes")
	sourcesPer := flag.Int("sources-per-proc", 8, "with -procs: loopback source addresses per nodesim process")
	keep := flag.Bool("keep", false, "with -procs: keep the work directory (logs, state)")
	flag.Parse()
	if *procs {
		if err := runProcs(*lemonBin, *nodesimBin, *nodes, *simProcs, *sourcesPer, *calls, *keep); err != nil {
			fmt.Fprintln(os.Stderr, "cluster:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*nodes, *calls, *sources); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startMembers(dir string) ([]*member, error) {
	addrs := []string{freeAddr(), freeAddr(), freeAddr()}
	ms := make([]*member, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range ms {
		var peers []string
		for j, a := range addrs {
			if j != i {
				peers = append(peers, a)
			}
		}
		name := string(rune('A' + i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			emb, err := cluster.Start(cluster.Options{Name: name, StateDir: fmt.Sprintf("%s/%s", dir, name),
				Listen: addrs[i], Peers: peers, Secret: secret})
			ms[i], errs[i] = &member{name: name, emb: emb}, err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	for _, m := range ms {
		nc, err := m.emb.Connect(m.name)
		if err != nil {
			return nil, err
		}
		m.nc = nc
		srv, err := controller.New(controller.Config{
			Operators: []controller.OperatorCredential{{Name: "admin", TokenHash: controller.HashToken(adminToken),
				Scopes: []string{protocol.ScopeAdmin}}},
			Cluster:                      &controller.ClusterConfig{Conn: nc, Name: m.name, Replicas: m.emb.Replicas},
			MaxUnauthenticated:           4096,
			MaxUnauthenticatedPerAddress: 4096,
			AuthFailureBurst:             1 << 20,
			AuthFailuresPerMinute:        1 << 20,
		})
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		go srv.Serve(context.Background(), ln)
		m.srv, m.url = srv, "ws://"+ln.Addr().String()+"/ws"
	}
	return ms, nil
}

func (m *member) kill() {
	m.nc.Close()
	m.emb.Shutdown()
	m.srv.Close()
}

// hopLatency makes calls sequential calls to nodes held by A (local) and
// to nodes held by C (remote), each through the operator on A, and prints
// the p50 and p90 of both and the p50 the hop A→C adds.
func hopLatency(call func(id string) (time.Duration, *protocol.Error), calls int, local, remote []string) error {
	sample := func(ids []string) ([]time.Duration, error) {
		var out []time.Duration
		for i := 0; i < calls; i++ {
			d, e := call(ids[i%len(ids)])
			if e != nil {
				return nil, fmt.Errorf("call: %s", e.Message)
			}
			out = append(out, d)
		}
		return out, nil
	}
	l, err := sample(local)
	if err != nil {
		return err
	}
	r, err := sample(remote)
	if err != nil {
		return err
	}
	fmt.Printf("operator on A, node.host.info, %d sequential calls each:\n", calls)
	fmt.Printf("  node held by A: p50 %s  p90 %s\n", p(l, .5).Round(time.Microsecond), p(l, .9).Round(time.Microsecond))
	fmt.Printf("  node held by C: p50 %s  p90 %s\n", p(r, .5).Round(time.Microsecond), p(r, .9).Round(time.Microsecond))
	fmt.Printf("  added by the hop A→C (p50): %s\n", (p(r, .5) - p(l, .5)).Round(time.Microsecond))
	return nil
}

func p(d []time.Duration, q float64) time.Duration {
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*q))]
}

func run(n, calls, sources int) error {
	lim := syscall.Rlimit{Cur: 1 << 20, Max: 1 << 20}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
		lim.Cur = lim.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	if sources <= 0 {
		sources = max(2, (n+1999)/2000)
	}
	dir, err := os.MkdirTemp("", "lemon-bench-cluster-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	t0 := time.Now()
	ms, err := startMembers(dir)
	if err != nil {
		return err
	}
	defer func() {
		for _, m := range ms {
			m.kill()
		}
	}()
	fmt.Printf("cluster of 3 up in %s\n", time.Since(t0).Round(time.Millisecond))
	a, c := ms[0], ms[2]
	urls := []string{ms[0].url, ms[1].url, ms[2].url}
	o := sim.Options{URLs: urls, AdminToken: adminToken, SourceAddrs: sim.LoopbackSources(sources),
		BackoffInitial: 500 * time.Millisecond, BackoffMax: 5 * time.Second}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("sim-%05d", i)
	}
	t0 = time.Now()
	creds, err := sim.Pair(ctx, o, names)
	if err != nil {
		return err
	}
	fmt.Printf("paired %d nodes through A in %s\n", n, time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	fleet := sim.Start(ctx, o, creds)
	defer fleet.Close()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	ok := fleet.Wait(wctx, n)
	cancel()
	if !ok {
		return fmt.Errorf("only %d of %d nodes online", fleet.Online(), n)
	}
	fmt.Printf("%d nodes online over A, B, C in %s\n", n, time.Since(t0).Round(time.Millisecond))
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
	byURL := map[string][]*sim.Node{}
	for _, nd := range fleet.Nodes() {
		byURL[nd.URL()] = append(byURL[nd.URL()], nd)
	}
	// Every node reachable from A first (the holders have propagated).
	deadline := time.Now().Add(2 * time.Minute)
	for _, nd := range fleet.Nodes() {
		for {
			if _, e := call(nd.Credential().NodeID); e == nil {
				break
			} else if time.Now().After(deadline) {
				return fmt.Errorf("node not reachable from A: %s", e.Message)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	ids := func(ns []*sim.Node) []string {
		out := make([]string, len(ns))
		for i, nd := range ns {
			out[i] = nd.Credential().NodeID
		}
		return out
	}
	if err := hopLatency(call, calls, ids(byURL[a.url]), ids(byURL[c.url])); err != nil {
		return err
	}

	// Kill C under load: 8 operators on A keep calling C's nodes.
	victims := byURL[c.url]
	var before int64
	for _, nd := range fleet.Nodes() {
		before += nd.Calls()
	}
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
				_, e := lop.Call(ctx, "node.host.info", map[string]string{"nodeId": victims[i%len(victims)].Credential().NodeID})
				// node.host.info is a pure read: retry-safe either way; the
				// domain tells a call never handed over from one cut off.
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
	fmt.Printf("killing C (holding %d nodes) under load\n", len(victims))
	tk := time.Now()
	c.kill()
	var recovered time.Duration
	for {
		back := 0
		for _, nd := range victims {
			if nd.Online() && nd.URL() != c.url {
				back++
			}
		}
		if back == len(victims) {
			recovered = time.Since(tk)
			break
		}
		if time.Since(tk) > 5*time.Minute {
			return fmt.Errorf("only %d of %d nodes back after 5 min", back, len(victims))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Every moved node answers through A again.
	for _, nd := range victims {
		for {
			if _, e := call(nd.Credential().NodeID); e == nil {
				break
			} else if time.Since(tk) > 5*time.Minute {
				return fmt.Errorf("moved node unreachable: %s", e.Message)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	reach := time.Since(tk)
	close(stop)
	wg.Wait()
	var after int64
	for _, nd := range fleet.Nodes() {
		after += nd.Calls()
	}
	received := after - before - int64(len(victims)) // minus the reachability check's calls
	fmt.Printf("all %d of C's nodes back on A and B %s after the kill; all answering through A after %s\n",
		len(victims), recovered.Round(time.Millisecond), reach.Round(time.Millisecond))
	fmt.Printf("load during the kill: %d calls: %d ok, %d not delivered (node_offline), %d cut off after hand-over (node_disconnected or timeout), %d other\n",
		issued.Load(), okN.Load(), notDispatched.Load(), uncertain.Load(), other.Load())
	fmt.Printf("requests received by nodes: %d (at most ok+uncertain = %d, at least ok = %d): ",
		received, okN.Load()+uncertain.Load(), okN.Load())
	if received > okN.Load()+uncertain.Load() || received < okN.Load() {
		fmt.Println("MISMATCH: a request was delivered twice or an answer was lost")
		return fmt.Errorf("delivery check failed")
	}
	fmt.Println("no request delivered twice")
	return nil
}
