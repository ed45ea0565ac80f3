package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"lemon/protocol"
)

// TestDevGate is the gate part of issue 2's "Must show" through `lemon
// dev`: a node whose capability ceiling omits host information refuses
// node.host.info with FORBIDDEN, and a rate limit of 5/s on a module's
// host calls refuses the sixth immediate call with RATE_LIMITED,
// retrySafe:true.
func TestDevGate(t *testing.T) {
	base := t.TempDir()
	pol := filepath.Join(base, "worker.toml")
	if err := os.WriteFile(pol, []byte("[[rate_limits]]\nmodule = \"fs\"\nhostcall = \"\"\nper_second = 5.0\nburst = 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDev(t, base, "--capabilities", "read,write,exec,secrets", "--policy", pol)

	e := d.op.callError(t, "node.host.info", map[string]any{"nodeId": d.nodeID})
	if e.Code != protocol.CodeForbidden {
		t.Errorf("node.host.info without the hostinfo capability: %+v, want FORBIDDEN", e)
	}
	t.Logf("without the hostinfo capability: %s / %v", e.Code, e.detail("code"))

	// Six immediate calls through one in-process connection (a `lemon
	// call` per request would leave time for the bucket to refill). The
	// bucket gains a token every 200 ms, so a round of six that took that
	// long proves nothing either way: it is repeated after the bucket has
	// refilled (at most 5 rounds), and only a fast round decides.
	conn := dialOperator(t, d.url, d.token)
	params := rawJSON(map[string]any{"nodeId": d.nodeID, "path": "."})
	for round := 1; ; round++ {
		start := time.Now()
		var sixth *protocol.Error
		for i := 1; i <= 6; i++ {
			_, perr := conn.Call(context.Background(), "node.fs.stat", params)
			if i <= 5 && perr != nil {
				t.Fatalf("round %d, call %d: %v, want success within the burst of 5", round, i, perr)
			}
			sixth = perr
		}
		slow := time.Since(start) >= 200*time.Millisecond
		if sixth == nil {
			if slow && round < 5 {
				time.Sleep(1200 * time.Millisecond) // refill to the burst
				continue
			}
			t.Fatalf("call 6 succeeded (round %d, slow %v), want RATE_LIMITED", round, slow)
		}
		if sixth.Code != protocol.CodeRateLimited || sixth.Details == nil || sixth.Details.RetrySafe == nil || !*sixth.Details.RetrySafe {
			t.Errorf("call 6: %+v, want RATE_LIMITED with retrySafe:true", sixth)
		}
		return
	}
}
