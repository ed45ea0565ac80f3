package terminate_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"lemon/host/terminate"
)

// treeRecursion is f(n) = if n { f(n-1); f(n-1) }; run() = f(60): 2^60
// calls at stack depth 60, with no loop opcode anywhere. Only the check at
// function entry stops it (docs/RATIONALE.md, "Deadlines").
var treeRecursion = []byte("\x00asm\x01\x00\x00\x00" +
	"\x01\x08\x02\x60\x01\x7f\x00\x60\x00\x00" +
	"\x03\x03\x02\x00\x01" +
	"\x07\x07\x01\x03run\x00\x01" +
	"\x0a\x1e\x02" +
	"\x15\x00\x20\x00\x04\x40\x20\x00\x41\x01\x6b\x10\x00\x20\x00\x41\x01\x6b\x10\x00\x0b\x0b" +
	"\x06\x00\x41\x3c\x10\x00\x0b")

func instantiateTree(t *testing.T) api.Module {
	t.Helper()
	ctx := context.Background()
	wasm, err := terminate.Instrument(treeRecursion)
	if err != nil {
		t.Fatal(err)
	}
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	t.Cleanup(func() { r.Close(ctx) })
	mod, err := r.Instantiate(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	return mod
}

func TestRecursionWithoutLoopStops(t *testing.T) {
	mod := instantiateTree(t)
	g := mod.ExportedGlobal(terminate.StopExport).(api.MutableGlobal)
	c, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	release := terminate.Arm(c, g)
	defer release()
	done := make(chan error, 1)
	go func() { _, err := mod.ExportedFunction("run").Call(c); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("run returned without a trap")
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("stop flag = %d, but the loop-free tree recursion still runs 5s after its 200ms deadline", g.Get())
	}
}

// TestRecursionYieldsToGC: while the guest recurses, a garbage
// collection's stop-the-world completes (without a yield point it would
// never finish and the test, the whole process, would hang: the GC runs
// in a goroutine and the test fails after 20 s instead).
func TestRecursionYieldsToGC(t *testing.T) {
	mod := instantiateTree(t)
	g := mod.ExportedGlobal(terminate.StopExport).(api.MutableGlobal)
	done := make(chan struct{})
	go func() { mod.ExportedFunction("run").Call(context.Background()); close(done) }()
	defer func() { g.Set(1); <-done }()
	time.Sleep(100 * time.Millisecond)
	gcDone := make(chan struct{})
	go func() { runtime.GC(); close(gcDone) }()
	select {
	case <-gcDone:
	case <-time.After(20 * time.Second):
		t.Fatalf("runtime.GC did not complete in 20s while the guest recursed")
	}
}

// TestStartSectionBecomesExport: the start section is gone (the runtime
// runs nothing at instantiation) and its function is exported as
// StartExport (docs/ABI.md, "Instances").
func TestStartSectionBecomesExport(t *testing.T) {
	// (global $g (mut i32) 0) (func $s (global.set $g (i32.const 7)))
	// (start $s) (export "g" (global $g))
	src := []byte("\x00asm\x01\x00\x00\x00" +
		"\x01\x04\x01\x60\x00\x00" +
		"\x03\x02\x01\x00" +
		"\x06\x06\x01\x7f\x01\x41\x00\x0b" +
		"\x07\x05\x01\x01g\x03\x00" +
		"\x08\x01\x00" +
		"\x0a\x08\x01\x06\x00\x41\x07\x24\x00\x0b")
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	if mod, err := r.Instantiate(ctx, src); err != nil || mod.ExportedGlobal("g").Get() != 7 {
		t.Fatalf("the original module's start did not run: %v", err)
	}
	wasm, err := terminate.Instrument(src)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := r.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName("instrumented"))
	if err != nil {
		t.Fatal(err)
	}
	if g := mod.ExportedGlobal("g").Get(); g != 0 {
		t.Fatalf("g = %d after instantiation, want 0: the start section still ran", g)
	}
	start := mod.ExportedFunction(terminate.StartExport)
	if start == nil {
		t.Fatalf("no %s export", terminate.StartExport)
	}
	if _, err := start.Call(ctx); err != nil {
		t.Fatal(err)
	}
	if g := mod.ExportedGlobal("g").Get(); g != 7 {
		t.Fatalf("g = %d after %s, want 7", g, terminate.StartExport)
	}
}
