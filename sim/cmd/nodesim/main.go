// Command nodesim runs simulated nodes (package sim) against a running
// controller until interrupted, printing how many are online every 5 s.
//
//	LEMON_OPERATOR_TOKEN=... go run ./sim/cmd/nodesim -controller ws://127.0.0.1:7777/ws -nodes 1000
//
// The token must hold operator.admin (each node pairs, approved at once).
// With -creds FILE the credentials are saved there (mode 0600: they hold
// session tokens) and reused on the next run instead of pairing again.
// -controller takes several comma-separated URLs (nodes fail over).
//
// With -status FILE it rewrites FILE (JSON, see status) every 250 ms: the
// nodes online, by controller URL, up to 64 node ids per URL, and the
// invocations received counted per invokeId (a request delivered twice
// shows as a duplicate). bench/cluster -procs reads it
// (docs/BENCHMARKS.md, "Three controllers on NATS").
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"lemon/sim"
)

func main() {
	urls := flag.String("controller", "ws://127.0.0.1:7777/ws", "controller /ws URL(s), comma-separated")
	n := flag.Int("nodes", 100, "simulated nodes")
	prefix := flag.String("name-prefix", "sim-", "node names are PREFIX00000, PREFIX00001, ...")
	sources := flag.Int("sources", 1, "loopback source addresses 127.0.0.1..N")
	creds := flag.String("creds", "", "credentials file to reuse (written after pairing, mode 0600)")
	slow := flag.Duration("slow", 0, "every node waits this long before answering")
	firstSource := flag.Int("source-first", 1, "the first loopback source address is 127.0.0.N (1..254)")
	statusFile := flag.String("status", "", "rewrite this JSON status file every 250 ms")
	backoffMax := flag.Duration("backoff-max", 0, "longest reconnect backoff (default 30s)")
	flag.Parse()
	if *firstSource < 1 || *sources < 1 || *firstSource+*sources > 255 {
		fmt.Fprintln(os.Stderr, "nodesim: -source-first and -sources must stay within 127.0.0.1..254")
		os.Exit(2)
	}
	if err := run(strings.Split(*urls, ","), *n, *prefix, *sources, *firstSource, *creds, *statusFile, *slow, *backoffMax); err != nil {
		fmt.Fprintln(os.Stderr, "nodesim:", err)
		os.Exit(1)
	}
}

// status is the -status file's content.
type status struct {
	Total  int            `json:"total"`
	Online int            `json:"online"`
	ByURL  map[string]int `json:"byUrl"` // online nodes by the URL of their socket
	// Sample holds up to 64 online node ids per URL.
	Sample     map[string][]string `json:"sample"`
	Deliveries int64               `json:"deliveries"` // invocations received
	Distinct   int                 `json:"distinct"`   // distinct invokeIds among them
	Duplicates int                 `json:"duplicates"` // invokeIds received more than once
	RSSKiB     int64               `json:"rssKiB"`
}

// deliveries counts invocations per invokeId.
type deliveries struct {
	mu    sync.Mutex
	seen  map[string]int
	total int64
	dups  int
}

func (d *deliveries) add(_ *sim.Node, id string) {
	d.mu.Lock()
	d.seen[id]++
	d.total++
	if d.seen[id] == 2 {
		d.dups++
	}
	d.mu.Unlock()
}

func writeStatus(path string, f *sim.Fleet, d *deliveries) {
	st := status{Total: len(f.Nodes()), ByURL: map[string]int{}, Sample: map[string][]string{}}
	for _, nd := range f.Nodes() {
		if !nd.Online() {
			continue
		}
		st.Online++
		u := nd.URL()
		st.ByURL[u]++
		if len(st.Sample[u]) < 64 {
			st.Sample[u] = append(st.Sample[u], nd.Credential().NodeID)
		}
	}
	d.mu.Lock()
	st.Deliveries, st.Distinct, st.Duplicates = d.total, len(d.seen), d.dups
	d.mu.Unlock()
	st.RSSKiB = rssKiB()
	b, _ := json.Marshal(st)
	tmp := path + ".tmp"
	if os.WriteFile(tmp, b, 0o600) == nil {
		os.Rename(tmp, path)
	}
}

// rssKiB reads this process's resident set (Linux; 0 elsewhere).
func rssKiB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var k int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &k)
			return k
		}
	}
	return 0
}

func run(urls []string, n int, prefix string, sources, firstSource int, credsFile, statusFile string, slow, backoffMax time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var src []net.IP
	for i := 0; i < sources; i++ {
		src = append(src, net.IPv4(127, 0, 0, byte(firstSource+i)))
	}
	d := &deliveries{seen: map[string]int{}}
	o := sim.Options{URLs: urls, AdminToken: os.Getenv("LEMON_OPERATOR_TOKEN"), SourceAddrs: src,
		BackoffMax: backoffMax, OnInvoke: d.add}
	var creds []sim.Credential
	if credsFile != "" {
		if b, err := os.ReadFile(credsFile); err == nil {
			if json.Unmarshal(b, &creds) != nil {
				return errors.New("the credentials file is not readable JSON")
			}
		}
	}
	if len(creds) == 0 {
		if o.AdminToken == "" {
			return errors.New("set LEMON_OPERATOR_TOKEN to an operator.admin token")
		}
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("%s%05d", prefix, i)
		}
		var err error
		if creds, err = sim.Pair(ctx, o, names); err != nil {
			return err
		}
		if credsFile != "" {
			b, _ := json.Marshal(creds)
			if err := os.WriteFile(credsFile, b, 0o600); err != nil {
				return errors.New("cannot write the credentials file")
			}
		}
	}
	f := sim.Start(ctx, o, creds)
	defer f.Close()
	for _, nd := range f.Nodes() {
		nd.SetSlow(slow)
	}
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	st := time.NewTicker(250 * time.Millisecond)
	defer st.Stop()
	for {
		select {
		case <-ctx.Done():
			if statusFile != "" {
				writeStatus(statusFile, f, d)
			}
			return nil
		case <-st.C:
			if statusFile != "" {
				writeStatus(statusFile, f, d)
			}
		case <-t.C:
			fmt.Printf("%s online %d of %d\n", time.Now().Format(time.TimeOnly), f.Online(), len(creds))
		}
	}
}
