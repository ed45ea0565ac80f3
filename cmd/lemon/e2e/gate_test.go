package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

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
	// call` per request would leave time for the bucket to refill).
	conn := dialOperator(t, d.url, d.token)
	params := rawJSON(map[string]any{"nodeId": d.nodeID, "path": "."})
	for i := 1; i <= 6; i++ {
		_, perr := conn.Call(context.Background(), "node.fs.stat", params)
		switch {
		case i <= 5 && perr != nil:
			t.Fatalf("call %d: %v, want success within the burst of 5", i, perr)
		case i == 6 && perr == nil:
			t.Fatalf("call 6 succeeded, want RATE_LIMITED")
		case i == 6:
			if perr.Code != protocol.CodeRateLimited || perr.Details == nil || perr.Details.RetrySafe == nil || !*perr.Details.RetrySafe {
				t.Errorf("call 6: %+v, want RATE_LIMITED with retrySafe:true", perr)
			}
		}
	}
}
