package sim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"lemon/client"
	"lemon/controller"
	"lemon/policies/authority"
	"lemon/protocol"
	"lemon/sim"
)

// mTouch is a test mutation with a short broker deadline (scope
// operator.admin, capability write: under node.fs).
const mTouch = "node.fs.zzsim.touch"

func init() {
	protocol.RegisterMethod(protocol.MethodSpec{Name: mTouch, Version: 1,
		Deadline: func(json.RawMessage) time.Duration { return time.Second }})
}

type fanoutRun struct {
	mu     sync.Mutex
	events []protocol.FanoutResult
}

func (r *fanoutRun) onEvent(ev protocol.Event) {
	if ev.Event != protocol.EventFanoutResult {
		return
	}
	var fr protocol.FanoutResult
	if json.Unmarshal(ev.Payload, &fr) == nil {
		r.mu.Lock()
		r.events = append(r.events, fr)
		r.mu.Unlock()
	}
}

// take returns the events received so far and forgets them. Events of a
// fan-out are all queued before its answer, and the client delivers
// frames in order, so after the answer they are all here.
func (r *fanoutRun) take() []protocol.FanoutResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

func TestFanoutOverSimulatedFleet(t *testing.T) {
	const n = 51
	url := startController(t, controller.Config{MaxFanoutNodes: n - 1, MaxFanoutsPerConn: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	o := sim.Options{URL: url, AdminToken: adminToken, SourceAddrs: sim.LoopbackSources(2),
		Methods: map[string]int{"node.host.info": 1, mTouch: 1}, BackoffInitial: 50 * time.Millisecond}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("fan-%02d", i)
	}
	creds, err := sim.Pair(ctx, o, names)
	if err != nil {
		t.Fatal(err)
	}
	f := sim.Start(ctx, o, creds)
	defer f.Close()
	if !f.Wait(ctx, n) {
		t.Fatalf("online %d of %d", f.Online(), n)
	}
	nodes := f.Nodes()
	nodes[1].SetSlow(100 * time.Millisecond) // well within the 1 s deadline
	nodes[3].Vanish()                        // gone
	for nodes[3].Online() {
		time.Sleep(5 * time.Millisecond)
	}
	var run fanoutRun
	op, err := client.Dial(ctx, url, client.Options{Token: adminToken, OnEvent: run.onEvent})
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	// Wait until the controller sees node 3 offline.
	for {
		on := false
		l, _ := op.ListNodes(ctx, protocol.NodeListParams{NamePrefix: "fan-03", Online: &on})
		if len(l) == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}

	// Bounds: the filter selecting all 51 is one past the 50-node bound;
	// 51 ids too; concurrency one past its maximum.
	all := &protocol.NodeFilter{}
	_, perr := op.Call(ctx, protocol.MethodNodeFanout, protocol.FanoutParams{Method: "node.host.info", Filter: all})
	if perr == nil || perr.DomainCode() != protocol.DomainFanoutTooLarge {
		t.Fatalf("51 by filter: %v", perr)
	}
	ids := make([]string, n)
	for i, c := range creds {
		ids[i] = c.NodeID
	}
	_, perr = op.Call(ctx, protocol.MethodNodeFanout, protocol.FanoutParams{Method: "node.host.info", NodeIDs: ids})
	if perr == nil || perr.DomainCode() != protocol.DomainFanoutTooLarge {
		t.Fatalf("51 ids: %v", perr)
	}
	_, perr = op.Call(ctx, protocol.MethodNodeFanout, protocol.FanoutParams{Method: "node.host.info", NodeIDs: ids[:1], Concurrency: protocol.MaxFanoutConcurrency + 1})
	if perr == nil || perr.Code != protocol.CodeInvalidParams {
		t.Fatalf("concurrency 1025: %v", perr)
	}
	_, perr = op.Call(ctx, protocol.MethodNodeFanout, protocol.FanoutParams{Method: "node.host.info", NodeIDs: ids[:1], Args: json.RawMessage(`{"nodeId":"x"}`)})
	if perr == nil || perr.Code != protocol.CodeInvalidParams {
		t.Fatalf("args.nodeId: %v", perr)
	}

	// A pure read on the 50 online nodes (at the bound), concurrency at
	// its maximum; node 1 is slow but within the deadline.
	on := true
	sum := fanout(t, ctx, op, protocol.FanoutParams{Method: "node.host.info",
		Filter: &protocol.NodeFilter{Online: &on}, Concurrency: protocol.MaxFanoutConcurrency})
	got := run.take()
	if sum.Total != n-1 || sum.OK != n-1 || sum.Failed != 0 || len(got) != n-1 {
		t.Fatalf("host.info: %+v, %d events", sum, len(got))
	}
	for _, e := range got {
		if !e.OK || !e.RetrySafe || e.MutationMayHaveApplied || e.FanoutID != sum.FanoutID || e.NodeID == creds[3].NodeID {
			t.Fatalf("host.info event: %+v", e)
		}
		var hi struct{ Hostname string }
		if json.Unmarshal(e.Result, &hi); hi.Hostname != e.Name {
			t.Fatalf("host.info result %s for %s", e.Result, e.Name)
		}
	}

	// A mutation over listed ids: answered, slow-but-answered, hanging
	// (timeout: it may have applied), vanished (offline: nothing sent) and
	// unknown (nothing sent).
	nodes[2].SetHang(true)
	list := []string{creds[0].NodeID, creds[1].NodeID, creds[2].NodeID, creds[3].NodeID, "node-unknown"}
	sum = fanout(t, ctx, op, protocol.FanoutParams{Method: mTouch, NodeIDs: list, Concurrency: 2})
	byNode := map[string]protocol.FanoutResult{}
	for _, e := range run.take() {
		byNode[e.NodeID] = e
	}
	if sum.Total != 5 || sum.OK != 2 || sum.Failed != 3 || len(byNode) != 5 {
		t.Fatalf("touch: %+v, %d events", sum, len(byNode))
	}
	want := []struct {
		ok                bool
		code, domain      string
		retry, mayApplied bool
	}{
		{true, "", "", false, true},
		{true, "", "", false, true},
		{false, protocol.CodeTimeout, "", false, true},
		{false, protocol.CodeUnavailable, protocol.DomainNodeOffline, true, false},
		{false, protocol.CodeNotFound, "", false, false},
	}
	for i, w := range want {
		e := byNode[list[i]]
		code, domain := "", ""
		if e.Error != nil {
			code, domain = e.Error.Code, e.Error.DomainCode()
		}
		if e.OK != w.ok || code != w.code || domain != w.domain || e.RetrySafe != w.retry || e.MutationMayHaveApplied != w.mayApplied {
			t.Fatalf("touch node %d: %+v (error %v)", i, e, e.Error)
		}
	}

	// One fan-out at a time on this connection (MaxFanoutsPerConn 1).
	before := nodes[2].Calls()
	done := make(chan *protocol.Error, 1)
	go func() {
		_, perr := op.Call(ctx, protocol.MethodNodeFanout, protocol.FanoutParams{Method: mTouch, NodeIDs: list[2:3]})
		done <- perr
	}()
	for nodes[2].Calls() == before {
		time.Sleep(2 * time.Millisecond)
	}
	_, perr = op.Call(ctx, protocol.MethodNodeFanout, protocol.FanoutParams{Method: "node.host.info", NodeIDs: ids[:1]})
	if perr == nil || perr.DomainCode() != protocol.DomainTooManyFanouts || perr.Details.RetrySafe == nil || !*perr.Details.RetrySafe {
		t.Fatalf("second fan-out: %v", perr)
	}
	if perr := <-done; perr != nil {
		t.Fatalf("first fan-out: %v", perr)
	}
	run.take()
}

// A method the operator's policy holds for approval is refused as a
// whole: a fan-out does not wait for approvals.
func TestFanoutRefusesApprovalMethods(t *testing.T) {
	pol := authority.FullAccessOperator()
	pol.Policy.RequireApproval = []string{"node.host.info"}
	const tok = "held-operator-token-0123456789abcdef"
	url := startController(t, controller.Config{Operators: []controller.OperatorCredential{{Name: "held",
		TokenHash: controller.HashToken(tok), Scopes: []string{protocol.ScopeAdmin}, Policy: &pol}}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	op, err := client.Dial(ctx, url, client.Options{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	_, perr := op.Call(ctx, protocol.MethodNodeFanout, protocol.FanoutParams{Method: "node.host.info", Filter: &protocol.NodeFilter{}})
	if perr == nil || perr.DomainCode() != protocol.DomainFanoutNeedsApproval {
		t.Fatalf("held method: %v", perr)
	}
}

func fanout(t *testing.T, ctx context.Context, op *client.Conn, p protocol.FanoutParams) protocol.FanoutSummary {
	t.Helper()
	raw, perr := op.Call(ctx, protocol.MethodNodeFanout, p)
	if perr != nil {
		t.Fatalf("fan-out %s: %v", p.Method, perr)
	}
	var sum protocol.FanoutSummary
	if err := json.Unmarshal(raw, &sum); err != nil {
		t.Fatal(err)
	}
	return sum
}
