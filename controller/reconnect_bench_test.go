package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"lemon/protocol"
)

// BenchmarkRestartReconnect1000 restarts a controller (durable state
// directory) under 1,000 connected simulated paired nodes. Each node
// reconnects after a jittered delay (uniform 0–2 s, the worker's first
// backoff step) and retries with jitter while the controller is down.
// Reported: seconds from the new controller's start until all 1,000 are
// online, and the peak heap+stack in use of the whole test process (the
// controller and the 1,000 simulated clients together) during the reconnect.
func BenchmarkRestartReconnect1000(b *testing.B) {
	const nodes = 1000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := b.TempDir()
		tokens := seedPairedNodes(b, dir, nodes)
		cfg := testConfig()
		cfg.StateDir = dir
		s1, url1 := startOn(b, cfg, "127.0.0.1:0")
		var url atomic.Value
		url.Store(url1)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for _, tok := range tokens {
			wg.Add(1)
			go func() { defer wg.Done(); simulatedNode(&url, tok, stop) }()
		}
		waitOnline(b, s1.Server, nodes)
		addr := s1.addr
		s1.Close()
		runtime.GC()
		var base runtime.MemStats
		runtime.ReadMemStats(&base)
		b.StartTimer()
		start := time.Now()
		s2, url2 := startOn(b, cfg, addr)
		url.Store(url2)
		peak := uint64(0)
		sample := time.NewTicker(20 * time.Millisecond)
		for online(s2.Server) < nodes {
			<-sample.C
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse+m.StackInuse)
			if time.Since(start) > time.Minute {
				b.Fatalf("only %d/%d nodes back online", online(s2.Server), nodes)
			}
		}
		elapsed := time.Since(start)
		b.StopTimer()
		sample.Stop()
		b.ReportMetric(elapsed.Seconds(), "s-to-all-online")
		b.ReportMetric(float64(peak)/(1<<20), "peak-inuse-MiB")
		b.ReportMetric(float64(base.HeapInuse+base.StackInuse)/(1<<20), "before-restart-MiB")
		close(stop)
		s2.Close()
		wg.Wait()
	}
}

type addrServer struct {
	*Server
	addr string
}

func startOn(b *testing.B, cfg Config, addr string) (*addrServer, string) {
	s, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	var ln net.Listener
	for i := 0; ; i++ {
		ln, err = net.Listen("tcp", addr)
		if err == nil {
			break
		}
		if i > 100 {
			b.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	go s.Serve(context.Background(), ln)
	return &addrServer{Server: s, addr: ln.Addr().String()}, "ws://" + ln.Addr().String() + "/ws"
}

func online(s *Server) int {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	n := 0
	for _, e := range s.reg.nodes {
		if e.live != nil {
			n++
		}
	}
	return n
}

func waitOnline(b *testing.B, s *Server, n int) {
	for start := time.Now(); online(s) < n; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > time.Minute {
			b.Fatalf("only %d/%d online", online(s), n)
		}
	}
}

// seedPairedNodes writes n paired nodes with live sessions into the store.
func seedPairedNodes(b *testing.B, dir string, n int) []string {
	st, err := openStore(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer st.close()
	now := time.Now().UnixMilli()
	var ops []op
	tokens := make([]string, n)
	for i := range tokens {
		id := fmt.Sprintf("node-%032x", i+1)
		tokens[i] = newSecret("lns_")
		ops = append(ops,
			op{bucketNodes, id, nodeRecord{ID: id, Name: fmt.Sprintf("sim-%04d", i), Identity: protocol.NodeIdentityPaired,
				CreatedAtMs: now, Generation: 1, RecoveryHash: hashHex(newSecret("lnr_"))}},
			op{bucketSessions, hashHex(tokens[i]), sessionRecord{NodeID: id, Generation: 1, IssuedAtMs: now,
				ExpiresAtMs: now + protocol.SessionTTL.Milliseconds()}})
	}
	if err := st.apply(ops...); err != nil {
		b.Fatal(err)
	}
	return tokens
}

// simulatedNode keeps one node connected, reconnecting after a uniform
// 0–2 s jitter whenever its socket closes.
func simulatedNode(url *atomic.Value, token string, stop chan struct{}) {
	params, _ := json.Marshal(protocol.ConnectParams{Role: protocol.RoleNode, Auth: protocol.ConnectAuth{Token: token},
		Node: &protocol.NodeAdvertise{Methods: map[string]int{mEcho: 1}}})
	connect, _ := json.Marshal(protocol.Request{Type: "req", ID: "c", Method: "connect", Params: params})
	for first := true; ; first = false {
		if !first {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(rand.Int64N(int64(2 * time.Second)))):
			}
		}
		ws, _, err := websocket.DefaultDialer.Dial(url.Load().(string), nil)
		if err != nil {
			continue
		}
		if ws.WriteMessage(websocket.TextMessage, connect) == nil {
			for {
				if _, _, err := ws.ReadMessage(); err != nil {
					break
				}
			}
		}
		ws.Close()
	}
}
