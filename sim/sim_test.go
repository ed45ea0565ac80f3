package sim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"testing"
	"time"

	"lemon/client"
	"lemon/controller"
	"lemon/protocol"
	"lemon/sim"
)

const adminToken = "sim-test-admin-token-0123456789abcdef"

// startController serves an in-memory controller on loopback and returns
// its /ws URL.
func startController(t *testing.T, cfg controller.Config) string {
	t.Helper()
	cfg.Operators = append(cfg.Operators, controller.OperatorCredential{Name: "admin",
		TokenHash: controller.HashToken(adminToken), Scopes: []string{protocol.ScopeAdmin}})
	srv, err := controller.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	return "ws://" + ln.Addr().String() + "/ws"
}

func TestSimFleetPairsConnectsAndAnswers(t *testing.T) {
	url := startController(t, controller.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	o := sim.Options{URL: url, AdminToken: adminToken, SourceAddrs: sim.LoopbackSources(3), BackoffInitial: 50 * time.Millisecond}
	names := make([]string, 20)
	for i := range names {
		names[i] = fmt.Sprintf("sim-%03d", i)
	}
	creds, err := sim.Pair(ctx, o, names)
	if err != nil {
		t.Fatal(err)
	}
	f := sim.Start(ctx, o, creds)
	defer f.Close()
	if !f.Wait(ctx, len(names)) {
		t.Fatalf("online %d of %d", f.Online(), len(names))
	}
	op, err := client.Dial(ctx, url, client.Options{Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	raw, perr := op.Call(ctx, "node.host.info", map[string]string{"nodeId": creds[7].NodeID})
	if perr != nil {
		t.Fatal(perr)
	}
	var hi struct {
		Hostname string `json:"hostname"`
		Sim      bool   `json:"sim"`
	}
	if json.Unmarshal(raw, &hi); hi.Hostname != "sim-007" || !hi.Sim {
		t.Fatalf("host.info = %s", raw)
	}
	if got := f.Nodes()[7].Calls(); got != 1 {
		t.Fatalf("calls = %d", got)
	}
	// Flap: the node comes back; vanish: it stays away.
	f.Nodes()[3].Flap()
	f.Nodes()[4].Vanish()
	deadline := time.Now().Add(10 * time.Second)
	for (f.Nodes()[4].Online() || f.Online() != len(names)-1) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if f.Nodes()[4].Online() || f.Online() != len(names)-1 {
		t.Fatalf("after flap and vanish: online %d", f.Online())
	}
	_, perr = op.Call(ctx, "node.host.info", map[string]string{"nodeId": creds[4].NodeID})
	if perr == nil || perr.Code != protocol.CodeUnavailable {
		t.Fatalf("vanished node: %v", perr)
	}
	f.Nodes()[4].Revive()
	if !f.Wait(ctx, len(names)) {
		t.Fatalf("after revive: online %d", f.Online())
	}
}

// With several URLs a node moves to the next after a failed attempt: a
// fleet given a dead controller first ends up on the live one.
func TestSimFailsOverToTheNextURL(t *testing.T) {
	url := startController(t, controller.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "ws://" + dead.Addr().String() + "/ws"
	dead.Close() // nothing listens there any more
	o := sim.Options{URLs: []string{url, deadURL}, AdminToken: adminToken, BackoffInitial: 20 * time.Millisecond}
	creds, err := sim.Pair(ctx, o, []string{"fo-0", "fo-1", "fo-2", "fo-3"})
	if err != nil {
		t.Fatal(err)
	}
	f := sim.Start(ctx, o, creds)
	defer f.Close()
	if !f.Wait(ctx, len(creds)) {
		t.Fatalf("online %d of %d", f.Online(), len(creds))
	}
	for _, n := range f.Nodes() {
		if n.URL() != url {
			t.Fatalf("node %s on %q", n.Credential().Name, n.URL())
		}
	}
}
