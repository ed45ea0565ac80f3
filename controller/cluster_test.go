package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"lemon/cluster"
	"lemon/protocol"
)

const clusterTestSecret = "cluster-test-secret-0123456789abcdef"

// freeLoopbackAddr returns a loopback host:port that was free a moment ago.
func freeLoopbackAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type clusterMember struct {
	emb *cluster.Embedded
	nc  *nats.Conn
	srv *testServer
}

// startCluster runs n controllers, each with an embedded nats-server
// routed to the others (loopback, temp dirs); cleanup stops them all.
func startCluster(t *testing.T, n int, cfgFor func(i int) Config) []*clusterMember {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = freeLoopbackAddr(t)
	}
	members := make([]*clusterMember, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	// Started together: each becomes ready once its routes and JetStream
	// are up, which needs the others.
	for i := range members {
		var peers []string
		for j, a := range addrs {
			if j != i {
				peers = append(peers, a)
			}
		}
		dir := t.TempDir()
		wg.Add(1)
		go func() {
			defer wg.Done()
			emb, err := cluster.Start(cluster.Options{Name: fmt.Sprintf("c%d", i), StateDir: dir,
				Listen: addrs[i], Peers: peers, Secret: clusterTestSecret})
			members[i], errs[i] = &clusterMember{emb: emb}, err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, m := range members {
			if m.nc != nil {
				m.nc.Close()
			}
			if m.emb != nil {
				m.emb.Shutdown()
			}
		}
	})
	for i, m := range members {
		nc, err := m.emb.Connect(fmt.Sprintf("c%d", i))
		if err != nil {
			t.Fatal(err)
		}
		m.nc = nc
		cfg := cfgFor(i)
		cfg.Cluster = &ClusterConfig{Conn: nc, Name: fmt.Sprintf("c%d", i), Replicas: m.emb.Replicas}
		m.srv = startServer(t, cfg)
	}
	return members
}

// waitFor polls cond (a hang guard, not a timing assertion).
func clusterWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *federation) knownHolders() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.remote)
}

func (f *federation) holderEpoch(nodeID string) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.remote[nodeID].Epoch
}

func (f *federation) holderOf(nodeID string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.remote[nodeID].Holder
}

// TestClusterThreeControllers runs three clustered controllers with 50
// nodes each: routing from every controller to every node, pairing on
// one controller and connecting on another, a takeover and a revocation
// seen cluster-wide, and failover when one controller dies, with no
// request delivered twice and truthful outcome flags.
func TestClusterThreeControllers(t *testing.T) {
	const perController = 50
	const controllers = 3
	total := perController * controllers
	tokens := make([]string, total)
	base := pairingConfig("", &testClock{t: time.Now()})
	base.Now = nil
	for i := range tokens {
		tokens[i] = fmt.Sprintf("cluster-node-token-%04d-abcdef", i)
		base.NodeTokens = append(base.NodeTokens, NodeCredential{Name: fmt.Sprintf("n-%04d", i), TokenHash: HashToken(tokens[i])})
	}
	ms := startCluster(t, controllers, func(int) Config { return base })

	// Every request any node receives, by invokeId: none twice.
	var seenMu sync.Mutex
	seen := map[string]int{}
	counting := func(h func(protocol.InvokeRequest) (any, *protocol.Error, bool)) func(protocol.InvokeRequest) (any, *protocol.Error, bool) {
		return func(req protocol.InvokeRequest) (any, *protocol.Error, bool) {
			seenMu.Lock()
			seen[req.InvokeID]++
			seenMu.Unlock()
			return h(req)
		}
	}
	nodes := make([]*fakeNode, total)
	ids := make([]string, total)
	for i := range nodes {
		ids[i] = nodeIDOf(fmt.Sprintf("n-%04d", i))
		nodes[i] = connectNode(t, ms[i%controllers].srv.url, tokens[i], protocol.NodeAdvertise{}, counting(echoHandler))
	}
	for _, m := range ms {
		clusterWait(t, "every holder seen", func() bool { return m.srv.fed.knownHolders() == total })
	}

	// Routing: an operator on every controller reaches every node, and the
	// execution context and deadline travel unchanged.
	for ci, m := range ms {
		op := connectOperator(t, m.srv.url, adminToken)
		for i := range nodes {
			f := op.call(mEcho, map[string]any{"nodeId": ids[i], "value": i})
			if !f.OK {
				t.Fatalf("controller %d → node %d: %s", ci, i, f.raw)
			}
			var got struct {
				Value int `json:"value"`
			}
			if err := json.Unmarshal(f.Payload, &got); err != nil || got.Value != i {
				t.Fatalf("controller %d → node %d: payload %s", ci, i, f.Payload)
			}
		}
		list := decode[protocol.NodeListResult](t, op.call(protocol.MethodNodeList, struct{}{}))
		online := 0
		for _, n := range list.Nodes {
			if n.Online {
				online++
			}
		}
		if online != total {
			t.Fatalf("controller %d lists %d nodes online, want %d", ci, online, total)
		}
	}

	// A fan-out from controller 1 reaches every node of the cluster, its
	// per-node results as events to the requesting connection.
	fop := connectOperator(t, ms[1].srv.url, adminToken)
	sum := decode[protocol.FanoutSummary](t, fop.call(protocol.MethodNodeFanout, protocol.FanoutParams{
		Method: mEcho, Args: json.RawMessage(`{"value":7}`), Filter: &protocol.NodeFilter{NamePrefix: "n-"}}))
	if sum.Total != total || sum.OK != total {
		t.Fatalf("fan-out summary %+v, want %d ok", sum, total)
	}
	results := 0
	for results < total {
		f := fop.next()
		if f.Event != protocol.EventFanoutResult {
			continue
		}
		var r protocol.FanoutResult
		if err := json.Unmarshal(f.Payload, &r); err != nil || !r.OK {
			t.Fatalf("fan-out result %s", f.raw)
		}
		results++
	}

	// Pairing on controller 0, connecting on controller 1, calling from 2.
	first := pairNew(t, ms[0].srv, "paired-1")
	paired := connectNode(t, ms[1].srv.url, first.SessionToken, protocol.NodeAdvertise{}, counting(echoHandler))
	clusterWait(t, "paired holder on c2", func() bool { return ms[2].srv.fed.holderOf(first.NodeID) == "c1" })
	op2 := connectOperator(t, ms[2].srv.url, adminToken)
	if f := op2.call(mEcho, map[string]any{"nodeId": first.NodeID}); !f.OK {
		t.Fatalf("paired node via c2: %s", f.raw)
	}

	// Takeover: the same session connecting on controller 0 replaces the
	// socket on controller 1, which is closed before the new one serves.
	again := connectNode(t, ms[0].srv.url, first.SessionToken, protocol.NodeAdvertise{}, counting(echoHandler))
	if code := paired.waitClosed(); code != CloseSessionReplaced {
		t.Fatalf("replaced socket close code %d", code)
	}
	clusterWait(t, "takeover seen on c2", func() bool { return ms[2].srv.fed.holderOf(first.NodeID) == "c0" })
	if f := op2.call(mEcho, map[string]any{"nodeId": first.NodeID}); !f.OK {
		t.Fatalf("after takeover: %s", f.raw)
	}

	// Revocation seen cluster-wide: re-pairing on controller 2 closes the
	// socket held by controller 0, and controller 1 refuses the old token.
	w := connectOperator(t, ms[2].srv.url, pairToken)
	req := decode[protocol.PairRequestResult](t, w.call(protocol.MethodPairRequest,
		protocol.PairRequestParams{NodeID: first.NodeID, RecoveryCredential: first.RecoveryCredential}))
	decode[protocol.ConnectChallengeResult](t, w.call(protocol.MethodConnectChallenge,
		protocol.ConnectChallengeParams{PairingID: req.PairingID, Challenge: req.Challenge}))
	if code := again.waitClosedWithin(30 * time.Second); code != CloseSessionRevoked {
		t.Fatalf("revoked socket close code %d", code)
	}
	clusterWait(t, "revocation on c1", func() bool {
		ms[1].srv.reg.mu.Lock()
		defer ms[1].srv.reg.mu.Unlock()
		s := ms[1].srv.reg.sessions[hashHex(first.SessionToken)]
		return s != nil && s.Revoked
	})
	p := dialPeer(t, ms[1].srv.url)
	p.writeJSON(protocol.Request{Type: "req", ID: "c1", Method: "connect", Params: mustJSON(t, protocol.ConnectParams{
		Role: "node", Auth: protocol.ConnectAuth{Token: first.SessionToken}, Node: &protocol.NodeAdvertise{Methods: map[string]int{}}})})
	wantError(t, p.next(), protocol.CodeUnauthorized, protocol.DomainSessionRevoked)

	// Failover: a call from controller 0 is in flight on a node held by
	// controller 2 when controller 2 dies; the node reconnects to
	// controller 1 and the call fails as possibly applied.
	victim := 2 // nodes 2, 5, 8, ... are held by controller 2
	before := ms[0].srv.fed.holderEpoch(ids[victim])
	silent := connectNode(t, ms[victim].srv.url, tokens[victim], protocol.NodeAdvertise{}, counting(silentHandler))
	clusterWait(t, "silent holder on c0", func() bool { return ms[0].srv.fed.holderEpoch(ids[victim]) > before })
	if code := nodes[victim].waitClosed(); code != CloseSessionReplaced {
		t.Fatalf("local takeover close code %d", code)
	}
	op0 := connectOperator(t, ms[0].srv.url, adminToken)
	inflight := op0.start(mEcho, map[string]any{"nodeId": ids[victim]})
	<-silent.requests
	ms[victim].nc.Close()
	ms[victim].emb.Shutdown()
	ms[victim].srv.Close()
	<-silent.closed
	for i := victim; i < total; i += controllers {
		nodes[i] = connectNodeRetry(t, ms[i%2].srv.url, tokens[i], protocol.NodeAdvertise{}, counting(echoHandler), 20*time.Second)
	}
	f := op0.await(inflight)
	wantError(t, f, protocol.CodeUnavailable, protocol.DomainNodeDisconnected)
	wantRetry(t, f, false, true)
	for _, m := range ms[:2] {
		clusterWait(t, "failed-over holders", func() bool {
			for i := victim; i < total; i += controllers {
				if h := m.srv.fed.holderOf(ids[i]); h == "c2" || h == "" {
					return false
				}
			}
			return true
		})
		op := connectOperator(t, m.srv.url, adminToken)
		for i := victim; i < total; i += controllers {
			if f := op.call(mEcho, map[string]any{"nodeId": ids[i], "value": i}); !f.OK {
				t.Fatalf("after failover, node %d: %s", i, f.raw)
			}
		}
	}
	// The routed-call counter saw the cut-off call and the ok ones.
	if got := testutil.ToFloat64(ms[0].srv.fed.routed.WithLabelValues("cut_off")); got < 1 {
		t.Fatalf("cut_off routed calls = %v", got)
	}
	if got := testutil.ToFloat64(ms[0].srv.fed.routed.WithLabelValues("ok")); got < float64(total-perController) {
		t.Fatalf("ok routed calls = %v", got)
	}
	seenMu.Lock()
	defer seenMu.Unlock()
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("invocation %s delivered %d times", id, n)
		}
	}
}

var _ = context.Background
