package authority

import (
	"encoding/json"
	"testing"
)

// Benchmarks of the per-request work (docs/BENCHMARKS.md): building and
// encoding a context at the controller, the node's strict parse, Decide,
// and Restrict.

func benchPolicy(b *testing.B) ToolPolicy {
	return mustJSON(b, `{"profile":"minimal_core","deny":["node.fs.delete","capability:secrets"],`+
		`"approvals":{"node.process.run":"once"},"allowed_commands":["make","git","/usr/bin/go"],"max_timeout_ms":60000}`)
}

func BenchmarkContextEncode(b *testing.B) {
	p := benchPolicy(b)
	for b.Loop() {
		c, err := New(ExecutionContext{RunID: "inv-123456", Principal: "ci", Provenance: "controller", Policy: p,
			Workspace: &Workspace{Root: "/srv/ws", Mode: WorkspaceReadWrite}, Capabilities: []string{"exec"}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseContext(b *testing.B) {
	c, _ := New(ExecutionContext{RunID: "inv-123456", Principal: "ci", Provenance: "controller", Policy: benchPolicy(b),
		Workspace: &Workspace{Root: "/srv/ws", Mode: WorkspaceReadWrite}, Capabilities: []string{"exec"}})
	enc, _ := json.Marshal(c)
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		if _, err := ParseContext(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecide(b *testing.B) {
	p := benchPolicy(b)
	m := methodByName["node.process.run"]
	for b.Loop() {
		if Decide(p, m).Verdict != NeedsApproval {
			b.Fatal("verdict")
		}
	}
}

func BenchmarkRestrict(b *testing.B) {
	p := benchPolicy(b)
	q := mustJSON(b, `{"allow":["node.fs.read","node.process.*"],"blocked_commands":["rm"],"max_timeout_ms":1000,"sandbox":true}`)
	for b.Loop() {
		_ = Restrict(p, q)
	}
}
