package host_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"lemon/host"
	"lemon/host/hosttest"
	"lemon/protocol"
)

// TestDeadlineSetsStopGlobal: a module spinning in a loop is stopped at its
// deadline through the lemon_stop global (no runtime exit-code checks), the
// error is exactly the deadline's, and the trapped instance is discarded.
func TestDeadlineSetsStopGlobal(t *testing.T) {
	f := newFixture(t, host.Config{})
	mod, _ := f.h.Module("testmod")
	_, before := mod.Stats()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, perr := f.invokeCtx(ctx, "test.spin", `{}`)
	if perr == nil || perr.Code != protocol.CodeTimeout || perr.Message != "request deadline passed" {
		t.Fatalf("spin: %+v, want timeout %q", perr, "request deadline passed")
	}
	if _, discarded := mod.Stats(); discarded != before+1 {
		t.Fatalf("discarded = %d, want %d", discarded, before+1)
	}
	if strings.Contains(f.log.String(), "module trapped") {
		t.Fatalf("a deadline was logged as a trap: %s", f.log.String())
	}
	if _, perr := f.invoke(t, "test.ping", `{}`); perr != nil {
		t.Fatalf("after the deadline: %v", perr)
	}
}

// TestStopExportReserved: a module exporting lemon_stop itself is refused at
// load (compile_failed), naming the export.
func TestStopExportReserved(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{CacheDir: hosttest.CacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	// (global (mut i32) (i32.const 0)) (export "lemon_stop" (global 0))
	wasm := []byte("\x00asm\x01\x00\x00\x00" +
		"\x06\x06\x01\x7f\x01\x41\x00\x0b" +
		"\x07\x0e\x01\x0alemon_stop\x03\x00")
	_, err = h.Load(ctx, hosttest.Pin("reserved", wasm), wasm)
	if got := host.ReasonOf(err); !strings.HasPrefix(got, host.ReasonCompileFailed+":") || !strings.Contains(got, "lemon_stop") {
		t.Fatalf("load: %q, want compile_failed naming lemon_stop", got)
	}
}
