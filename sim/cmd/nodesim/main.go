// Command nodesim runs simulated nodes (package sim) against a running
// controller until interrupted, printing how many are online every 5 s.
//
//	LEMON_OPERATOR_TOKEN=... go run ./sim/cmd/nodesim -controller ws://127.0.0.1:7777/ws -nodes 1000
//
// The token must hold operator.admin (each node pairs, approved at once).
// With -creds FILE the credentials are saved there (mode 0600: they hold
// session tokens) and reused on the next run instead of pairing again.
// -controller takes several comma-separated URLs (nodes fail over).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
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
	flag.Parse()
	if err := run(strings.Split(*urls, ","), *n, *prefix, *sources, *creds, *slow); err != nil {
		fmt.Fprintln(os.Stderr, "nodesim:", err)
		os.Exit(1)
	}
}

func run(urls []string, n int, prefix string, sources int, credsFile string, slow time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := sim.Options{URLs: urls, AdminToken: os.Getenv("LEMON_OPERATOR_TOKEN"), SourceAddrs: sim.LoopbackSources(sources)}
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
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			fmt.Printf("%s online %d of %d\n", time.Now().Format(time.TimeOnly), f.Online(), len(creds))
		}
	}
}
