package authority

import (
	"encoding/json"
	"testing"
)

var policySeeds = []string{
	`{}`, `{"allow":[]}`, `{"allow":["node.fs.*","node.host.info"]}`, `{"deny":["capability:exec","class:mutation"]}`,
	`{"blocked_tools":["node.secrets.*"],"require_approval":["node.fs.write"]}`,
	`{"approvals":{"node.process.*":"once","class:mutation":"always"}}`,
	`{"allowed_commands":["make","/usr/bin/git"],"blocked_commands":["rm"]}`, `{"allowed_commands":[]}`,
	`{"max_file_bytes":1,"max_timeout_ms":2,"max_output_bytes":3,"sandbox":true,"no_reply":true}`,
	`{"profile":"safe_mode"}`, `{"profile":"subagent_restricted","allow":["node.fs.read"]}`,
	`{"allow":["node.fs.read"],"allow":[]}`, `{"Allow":[],"allow":[]}`,
}

// FuzzParseJSON: any input either fails or gives a canonical policy whose
// JSON parses back to the same policy.
func FuzzParseJSON(f *testing.F) {
	for _, s := range policySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseJSON(data)
		if err != nil {
			return
		}
		enc, _ := p.MarshalJSON()
		q, err := ParseJSON(enc)
		if err != nil || !q.Equal(p) {
			t.Fatalf("round trip of %s: %v", enc, err)
		}
	})
}

// FuzzRestrict: for any two policies that parse, Restrict never widens.
func FuzzRestrict(f *testing.F) {
	for i, a := range policySeeds {
		f.Add([]byte(a), []byte(policySeeds[(i+3)%len(policySeeds)]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		pa, err := ParseJSON(a)
		if err != nil {
			return
		}
		pb, err := ParseJSON(b)
		if err != nil {
			return
		}
		checkNeverWidens(t, pa, pb)
	})
}

// FuzzParseContext: any input either fails or gives a context whose JSON
// parses back to the same context.
func FuzzParseContext(f *testing.F) {
	f.Add([]byte(goodContext))
	f.Add([]byte(`{"version":1,"runId":"r","attempt":3,"parentRunId":"p","principal":"op","policy":{},"capabilities":[]}`))
	f.Add([]byte(`{"version":1,"runId":"r","attempt":1,"principal":"op","policy":{"profile":"read_only"},"capabilities":["read"],"workspace":{"root":"/","mode":"read_only"},"limits":{}}`))
	f.Add([]byte(`{"version":1,"runId":"r","runId":"s"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseContext(data)
		if err != nil {
			if _, ok := err.(*ContextError); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		enc, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseContext(enc)
		if err != nil || !back.Subset(c) || !c.Subset(back) {
			t.Fatalf("round trip of %s: %v", enc, err)
		}
	})
}
