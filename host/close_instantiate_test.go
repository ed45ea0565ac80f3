package host_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"

	"lemon/host"
)

// TestCloseDuringInstantiate: a module closed right after the runtime
// instantiated it (Host.Close closing the runtime, which closes every
// module in its store, in the window before the instance's
// initialization) has its memory unmapped at once; the instance must not
// run its start function or _initialize on it (a SIGSEGV of the node),
// but fail the invocation.
func TestCloseDuringInstantiate(t *testing.T) {
	f := newFixture(t, host.Config{})
	// The idle instance the load left is dropped by a deadline, so the
	// next invocation instantiates one.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if _, perr := f.invokeCtx(ctx, "test.spin", `{}`); perr == nil {
		t.Fatal("spin succeeded")
	}
	cancel()
	var fired atomic.Bool
	host.SetInstantiatedHook(func(m api.Module) {
		if fired.CompareAndSwap(false, true) {
			m.Close(context.Background())
		}
	})
	defer host.SetInstantiatedHook(nil)
	_, perr := f.invoke(t, "test.nop", `{}`)
	if !fired.Load() {
		t.Skip("no instance was started")
	}
	if perr == nil {
		t.Fatal("an invocation on an instance closed before its initialization succeeded")
	}
	if _, perr := f.invoke(t, "test.nop", `{}`); perr != nil {
		t.Fatalf("the next invocation: %v", perr)
	}
}
