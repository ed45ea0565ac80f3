package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"lemon/controller"
	"lemon/protocol"
	"lemon/sim"
)

func TestCallAllAndNodesFanout(t *testing.T) {
	const tok = "fanout-cli-admin-token-0123456789"
	srv, err := controller.New(controller.Config{Operators: []controller.OperatorCredential{{Name: "admin",
		TokenHash: controller.HashToken(tok), Scopes: []string{protocol.ScopeAdmin}}}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { srv.Serve(sctx, ln); close(served) }()
	defer func() { stop(); <-served; srv.Close() }()
	url := "ws://" + ln.Addr().String() + "/ws"

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	o := sim.Options{URL: url, AdminToken: tok}
	creds, err := sim.Pair(ctx, o, []string{"cli-a1", "cli-a2", "cli-b1", "cli-b2", "cli-gone"})
	if err != nil {
		t.Fatal(err)
	}
	f := sim.Start(ctx, o, creds)
	defer f.Close()
	if !f.Wait(ctx, 5) {
		t.Fatal("fleet not online")
	}
	f.Nodes()[4].Vanish()
	for f.Online() != 4 {
		time.Sleep(5 * time.Millisecond)
	}
	e := map[string]string{envOperatorToken: tok, envController: url}
	lines := func(out string) (nodes []fanoutLine, sum protocol.FanoutSummary) {
		t.Helper()
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var s map[string]protocol.FanoutSummary
			if json.Unmarshal([]byte(l), &s) == nil && s["summary"].FanoutID != "" {
				sum = s["summary"]
				continue
			}
			var n fanoutLine
			if err := json.Unmarshal([]byte(l), &n); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			nodes = append(nodes, n)
		}
		return
	}
	// The controller may not have seen the vanished node's socket close
	// yet: wait until --nodes offline finds it.
	for {
		code, out, _ := runCallT([]string{"--nodes", "offline", "node.host.info"}, e, "")
		if n, _ := lines(out); code == 1 && len(n) == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}

	code, out, errOut := runCallT([]string{"--all", "node.host.info"}, e, "")
	nodes, sum := lines(out)
	if code != 1 || len(nodes) != 5 || sum.Total != 5 || sum.OK != 4 || sum.Failed != 1 {
		t.Fatalf("--all: code %d, %d lines, %+v, stderr %q", code, len(nodes), sum, errOut)
	}
	for _, n := range nodes {
		if n.Name == "cli-gone" {
			if n.OK || n.Error == nil || n.Error.DomainCode() != protocol.DomainNodeOffline || !n.RetrySafe || n.MutationMayHaveApplied {
				t.Fatalf("vanished node: %+v", n)
			}
		} else if !n.OK || !n.RetrySafe || n.MutationMayHaveApplied || !strings.Contains(string(n.Result), n.Name) {
			t.Fatalf("node line: %+v", n)
		}
	}
	code, out, _ = runCallT([]string{"--nodes", "name=CLI-A,online", "--concurrency", "1", "node.host.info", "{}"}, e, "")
	nodes, sum = lines(out)
	if code != 0 || len(nodes) != 2 || sum.OK != 2 || nodes[0].Name[:5] != "cli-a" {
		t.Fatalf("--nodes name=CLI-A,online: code %d, %+v", code, nodes)
	}
	// A filter that matches no node is a failure, said on stderr.
	code, out, errOut = runCallT([]string{"--nodes", "name=zz", "node.host.info"}, e, "")
	if nodes, sum = lines(out); code != 1 || len(nodes) != 0 || sum.Total != 0 || errOut != "lemon call: no node matched\n" {
		t.Fatalf("--nodes name=zz: code %d, %+v, stderr %q", code, sum, errOut)
	}
	for _, bad := range [][]string{
		{"--all", "--nodes", "online", "node.host.info"},
		{"--nodes", "bogus", "node.host.info"},
		{"--nodes", "online,offline", "node.host.info"},
		{"--all", "--concurrency", fmt.Sprint(protocol.MaxFanoutConcurrency + 1), "node.host.info"},
	} {
		if code, _, _ := runCallT(bad, e, ""); code != 2 {
			t.Fatalf("%v: exit %d, want 2", bad, code)
		}
	}
	// A refused fan-out (args holding nodeId) exits 1 with the error object.
	code, out, errOut = runCallT([]string{"--all", "node.host.info", `{"nodeId":"x"}`}, e, "")
	if code != 1 || out != "" || !strings.Contains(errOut, protocol.CodeInvalidParams) {
		t.Fatalf("refused: code %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// lemon nodes pages through node.list: more nodes than one page, all
// listed once, sorted by name.
func TestNodesPagesThroughList(t *testing.T) {
	const tok = "nodes-paging-admin-token-0123456789"
	cfg := controller.Config{Operators: []controller.OperatorCredential{{Name: "admin",
		TokenHash: controller.HashToken(tok), Scopes: []string{protocol.ScopeAdmin}}}}
	const n = protocol.MaxNodeListLimit + 5
	for i := n - 1; i >= 0; i-- {
		cfg.NodeTokens = append(cfg.NodeTokens, controller.NodeCredential{Name: fmt.Sprintf("page-%04d", i),
			TokenHash: controller.HashToken(fmt.Sprintf("page-token-%04d-0123456789", i))})
	}
	srv, err := controller.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { srv.Serve(sctx, ln); close(served) }()
	defer func() { stop(); <-served; srv.Close() }()
	e := env(map[string]string{envOperatorToken: tok, envController: "ws://" + ln.Addr().String() + "/ws"})
	var out, errb strings.Builder
	if code := runNodes(context.Background(), []string{"--json"}, e, &out, &errb); code != 0 {
		t.Fatalf("lemon nodes --json: %d %s", code, errb.String())
	}
	var got struct{ Nodes []protocol.NodeSummary }
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Nodes) != n {
		t.Fatalf("%d nodes, want %d", len(got.Nodes), n)
	}
	for i, nd := range got.Nodes {
		if want := fmt.Sprintf("page-%04d", i); nd.Name != want {
			t.Fatalf("node %d is %s, want %s", i, nd.Name, want)
		}
	}
}
