package host_test

import (
	"context"
	"testing"
	"time"

	"lemon/host"
	"lemon/protocol"
)

// TestCloseDuringCall: Host.Close while a guest runs (test.spin, touching
// its memory in a loop) does not pull the memory from under it: the call
// ends at its deadline with an error, the process does not crash, and
// every instance memory is unmapped once no call runs on it (docs/ABI.md,
// "Instances").
func TestCloseDuringCall(t *testing.T) {
	since := host.MemoryCount()
	f := newFixture(t, host.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	done := make(chan *protocol.Error, 1)
	go func() {
		_, perr := f.invokeCtx(ctx, "test.spin", `{}`)
		done <- perr
	}()
	for host.CallsRunning() == 0 {
		select {
		case perr := <-done:
			t.Fatalf("spin returned before Close: %v", perr)
		case <-time.After(time.Millisecond):
		}
	}
	if err := f.h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if host.MemoriesMapped(since) == 0 {
		t.Fatal("every memory was unmapped while a call ran")
	}
	if perr := <-done; perr == nil {
		t.Fatal("spin succeeded")
	}
	if n := host.MemoriesMapped(since); n != 0 {
		t.Fatalf("%d instance memories still mapped after Close and the last call", n)
	}
}
