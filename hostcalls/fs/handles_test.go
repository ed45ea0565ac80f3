package fs

import (
	"context"
	"testing"
	"time"
)

// TestOpenFinishingAfterInvocationEndClosesItsDescriptor: an fs.open that
// outlives its deadline (f.do returns on ctx.Done while the open keeps
// running) and finishes after its invocation ended closes what it opened
// instead of storing it in the closed handle table, where nothing would
// close it (docs/FS.md, "Primitives: handles"). Found by adversarial
// review (adv11).
func TestOpenFinishingAfterInvocationEndClosesItsDescriptor(t *testing.T) {
	e := newEnv(t, []node{{path: "root/a.txt", file: "a"}}, "root")
	base := e.f.fdsInUse.Load()
	gate := make(chan struct{})
	entered := make(chan struct{}, 1)
	e.f.testHook = func(op string) {
		if op == "open" {
			entered <- struct{}{}
			<-gate
		}
	}
	call := newCall()
	var open func(context.Context, []byte) error
	for _, hc := range e.f.Table() {
		if hc.Name == "fs.open" {
			hc := hc
			open = func(ctx context.Context, b []byte) error { _, err := hc.Func(ctx, call, b); return err }
		}
	}
	if open == nil {
		t.Fatal("no fs.open in the table")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := open(ctx, []byte(`{"path":"a.txt"}`)); err == nil {
		t.Fatal("fs.open returned before its gated open ran, want a deadline error")
	}
	<-entered  // the open's goroutine holds f.life and waits at the gate
	call.end() // the invocation ends: its handle table is closed
	close(gate)
	// The open's goroutine holds f.life read-locked until it returns.
	e.f.life.Lock()
	e.f.life.Unlock()
	e.f.testHook = nil
	if got := e.f.fdsInUse.Load(); got != base {
		t.Fatalf("after the invocation ended %d descriptors in use, want %d (leaked)", got, base)
	}
}

// TestHandleTableRefusesAddAfterClose: once Close ran, add refuses and
// the table stays empty, so the caller keeps (and closes) the descriptor.
func TestHandleTableRefusesAddAfterClose(t *testing.T) {
	tab := &handles{m: map[uint32]*handle{}}
	tab.Close()
	if _, err := tab.add(&handle{fd: -1}); err == nil {
		t.Fatal("add after Close succeeded, want a refusal")
	}
	if len(tab.m) != 0 {
		t.Fatalf("table holds %d handles after Close, want 0", len(tab.m))
	}
}
