package host

import (
	"bytes"
	"context"
	"log/slog"
	"sync"

	"lemon/host/abi"
	"lemon/hostcalls/guestcall"
)

// Guest stderr (docs/PLUGINS.md, "Logging, panics, blobs and settings"):
// each instance writes its stderr into its own tail buffer, emptied before
// every invocation. When the invocation traps, the host logs at error
// level the panic text found in it (Go's wasip1 runtime writes a panic to
// stderr before trapping), bounded and escaped. Stdout stays discarded.
// A guest never holds a secret blob's bytes, so neither can its stderr.
const (
	// stderrTail is how many of an invocation's last stderr bytes an
	// instance keeps.
	stderrTail = 16 << 10
	// MaxPanicLogBytes bounds the panic text of one module_trapped record.
	MaxPanicLogBytes = 1024
)

// tailBuffer keeps the last stderrTail bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) >= stderrTail {
		p = p[len(p)-stderrTail:]
		t.buf = append(t.buf[:0], p...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - stderrTail; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

func (t *tailBuffer) reset() {
	t.mu.Lock()
	t.buf = t.buf[:0]
	t.mu.Unlock()
}

// panicText returns the last Go panic or fatal error in the buffer, from
// its "panic: " or "fatal error: " line, or else the buffer's tail; at
// most MaxPanicLogBytes once escaped.
func (t *tailBuffer) panicText() string {
	t.mu.Lock()
	b := append([]byte(nil), t.buf...)
	t.mu.Unlock()
	i := max(bytes.LastIndex(b, []byte("panic: ")), bytes.LastIndex(b, []byte("fatal error: ")))
	if i >= 0 {
		b = b[i:]
	} else if len(b) > MaxPanicLogBytes {
		b = b[len(b)-MaxPanicLogBytes:]
	}
	return guestcall.SafeText(string(bytes.TrimSpace(b)), MaxPanicLogBytes)
}

// logTrap records a module trap: module, method, invokeId and the panic
// text the guest wrote to stderr.
func (h *Host) logTrap(ctx context.Context, mod *Module, in *abi.Input, inst *instance) {
	if h.cfg.Logger == nil {
		return
	}
	text := ""
	if inst.stderr != nil {
		text = inst.stderr.panicText()
	}
	h.cfg.Logger.LogAttrs(context.WithoutCancel(ctx), slog.LevelError, "execution_node.module_trapped",
		slog.String("module", mod.family),
		slog.String("method", in.Method),
		slog.String("invokeId", guestcall.SafeText(in.Invocation.InvokeID, 128)),
		slog.String("panic", text))
}
