package host_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"lemon/host"
	"lemon/host/abi"
	"lemon/hostcalls"
	"lemon/protocol"
)

// TestInvocationBuffer: an invocation envelope of up to 16 KiB (the SDK's
// lemon_input buffer) is written into the guest's buffer, with no
// lemon_malloc call; one byte more goes through lemon_malloc; both answer
// the same echo, and the buffer serves again afterwards (docs/ABI.md,
// "Exports").
func TestInvocationBuffer(t *testing.T) {
	ctx := context.Background()
	h := newFixture(t, host.Config{PoolSize: 1}).h
	mod, ok := h.Module("testmod")
	if !ok {
		t.Fatal("testmod not loaded")
	}
	const bufSize = 16 << 10
	// params of an envelope of exactly n bytes
	params := func(n int) string {
		p := `{"nodeId":"n1","path":""}`
		in := abi.Input{Method: "test.small", Params: json.RawMessage(p),
			Invocation: hostcalls.Invocation{InvokeID: "i1", NodeID: "n1"}}
		pad := n - abi.InputSize(&in)
		return `{"nodeId":"n1","path":"` + strings.Repeat("x", pad) + `"}`
	}
	for _, c := range []struct {
		size    int
		mallocs int
	}{{200, 0}, {bufSize, 0}, {bufSize + 1, 1}, {300, 1}} {
		args := params(c.size)
		out, perr := h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "i1", NodeID: "n1", Method: "test.small",
			Args: json.RawMessage(args), MaxResultBytes: protocol.DefaultMaxPayload})
		if perr != nil {
			t.Fatalf("envelope of %d bytes: %v", c.size, perr)
		}
		var got struct{ Path string }
		if err := json.Unmarshal(out, &got); err != nil || len(got.Path) != len(args)-len(`{"nodeId":"n1","path":""}`) {
			t.Fatalf("envelope of %d bytes: echo of %d path bytes (%v)", c.size, len(got.Path), err)
		}
		if n := host.Mallocs(mod); n != c.mallocs {
			t.Fatalf("after an envelope of %d bytes: %d lemon_malloc calls, want %d", c.size, n, c.mallocs)
		}
	}
}
