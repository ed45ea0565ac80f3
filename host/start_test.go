package host_test

import (
	"context"
	"testing"
	"time"

	"lemon/host"
	"lemon/host/hosttest"
)

// startLoop's start section runs an endless loop. The host runs it after
// instantiation with the stop flag armed (docs/ABI.md, "Instances"), so
// the caller's deadline ends it.
var startLoop = []byte("\x00asm\x01\x00\x00\x00" +
	"\x01\x04\x01\x60\x00\x00" +
	"\x03\x02\x01\x00" +
	"\x08\x01\x00" +
	"\x0a\x09\x01\x07\x00\x03\x40\x0c\x00\x0b\x0b")

func TestStartFunctionLoopStopsAtDeadline(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{CacheDir: hosttest.CacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	done := make(chan error, 1)
	go func() {
		c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := h.Load(c, hosttest.Pin("startloop", startLoop), startLoop)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Load of a module whose start function never returns succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Load with a 300ms deadline still running after 5s: start-function loop is not stoppable")
	}
}

func TestInspectStartLoopStops(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := host.Inspect(c, startLoop)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Inspect of a module whose start function never returns succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Inspect with a 300ms deadline still running after 5s")
	}
}
