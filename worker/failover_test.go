package worker_test

import (
	"testing"

	"lemon/client/fakecontrol"
	"lemon/worker"
)

// A worker given several controllers fails over to the next when its
// preferred one is lost, and comes back to the preferred one first at
// the next reconnect (docs/CLUSTER.md, "Failover").
func TestWorkerFailsOverAcrossControllers(t *testing.T) {
	a := fakecontrol.New(fakecontrol.Options{NodeToken: nodeToken})
	b := fakecontrol.New(fakecontrol.Options{NodeToken: nodeToken})
	defer b.Close()
	startWorker(t, worker.Config{ControllerURL: a.URL, FailoverURLs: []string{b.URL}, Dispatcher: newFake()})
	ctx := ctxT(t)
	if _, err := a.NextNode(ctx); err != nil {
		t.Fatalf("preferred controller: %v", err)
	}
	if n := b.Connects(); n != 0 {
		t.Fatalf("failover controller got %d connects while the preferred one was up", n)
	}
	a.Close() // the preferred controller is lost
	if _, err := b.NextNode(ctx); err != nil {
		t.Fatalf("failover: %v", err)
	}
}

// At most MaxControllerURLs URLs: at the limit accepted, one more refused.
func TestWorkerControllerURLsBound(t *testing.T) {
	urls := make([]string, worker.MaxControllerURLs-1)
	for i := range urls {
		urls[i] = "ws://127.0.0.1:1/ws"
	}
	cfg := worker.Config{ControllerURL: "ws://127.0.0.1:1/ws", FailoverURLs: urls, Token: nodeToken, Dispatcher: newFake()}
	if _, err := worker.New(cfg); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	cfg.FailoverURLs = append(urls, "ws://127.0.0.1:1/ws")
	if _, err := worker.New(cfg); err == nil {
		t.Fatal("one past the limit was accepted")
	}
	cfg.FailoverURLs = []string{"ws://example.com/ws"}
	if _, err := worker.New(cfg); err == nil {
		t.Fatal("an insecure failover URL was accepted")
	}
}
