package authority

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const goodContext = `{"version":1,"runId":"inv-1","attempt":1,"principal":"ci","provenance":"controller",` +
	`"policy":{"allowed_commands":["make"]},"workspace":{"root":"/srv/ws","mode":"read_write"},` +
	`"capabilities":["exec"],"limits":{"maxTimeoutMs":60000}}`

func TestParseContextRules(t *testing.T) {
	c, err := ParseContext([]byte(goodContext))
	if err != nil {
		t.Fatal(err)
	}
	if c.RunID != "inv-1" || c.Principal != "ci" || c.Workspace.Root != "/srv/ws" || !c.HasCapability("exec") ||
		c.Limits.MaxTimeoutMs != 60000 || c.Policy.AllowedCommands[0] != "make" {
		t.Fatalf("parsed %+v", c)
	}
	enc, _ := json.Marshal(c)
	if string(enc) != goodContext {
		t.Fatalf("encoding:\n%s\nwant\n%s", enc, goodContext)
	}
	edit := func(old, new string) string { return strings.Replace(goodContext, old, new, 1) }
	cases := []struct{ name, in, err string }{
		{"not an object", `[]`, "must be a JSON object"},
		{"empty", ``, "malformed JSON"},
		{"unknown key", edit(`"attempt":1`, `"attempt":1,"sudo":true`), "sudo: unknown key"},
		{"key twice", edit(`"attempt":1`, `"attempt":1,"attempt":2`), "attempt: key given twice"},
		{"version 2", edit(`"version":1`, `"version":2`), "version: must be 1"},
		{"version missing", edit(`"version":1,`, ``), "version: required"},
		{"runId missing", edit(`"runId":"inv-1",`, ``), "runId: required"},
		{"runId bad chars", edit(`"inv-1"`, `"inv 1"`), "runId: must be letters"},
		{"runId at its limit", edit(`"inv-1"`, `"`+strings.Repeat("r", MaxIDBytes)+`"`), ""},
		{"runId one past its limit", edit(`"inv-1"`, `"`+strings.Repeat("r", MaxIDBytes+1)+`"`), "runId: must be 1 to 128 bytes"},
		{"attempt 0", edit(`"attempt":1`, `"attempt":0`), "attempt: must be an integer"},
		{"attempt string", edit(`"attempt":1`, `"attempt":"1"`), "attempt: must be an integer"},
		{"principal empty", edit(`"principal":"ci"`, `"principal":""`), "principal: must be 1 to"},
		{"principal control", edit(`"principal":"ci"`, `"principal":"c\ni"`), "principal: must be 1 to"},
		{"provenance upper", edit(`"controller"`, `"Controller"`), "provenance: must be"},
		{"policy missing", edit(`"policy":{"allowed_commands":["make"]},`, ``), "policy: required"},
		{"policy malformed", edit(`"allowed_commands":["make"]`, `"allowed_commands":["./make"]`), "policy.allowed_commands[0]"},
		{"policy unknown key", edit(`"allowed_commands":["make"]`, `"root":true`), "policy.root: unknown key"},
		{"policy null", edit(`{"allowed_commands":["make"]}`, `null`), "policy: must be an object"},
		{"workspace relative", edit(`"/srv/ws"`, `"srv/ws"`), "workspace.root: must be a clean absolute path"},
		{"workspace dotdot", edit(`"/srv/ws"`, `"/srv/ws/.."`), "workspace.root: must be a clean"},
		{"workspace trailing slash", edit(`"/srv/ws"`, `"/srv/ws/"`), "workspace.root: must be a clean"},
		{"workspace mode", edit(`"read_write"`, `"rw"`), "workspace.mode"},
		{"workspace mode missing", edit(`,"mode":"read_write"`, ``), "workspace.mode"},
		{"workspace extra", edit(`"mode":"read_write"`, `"mode":"read_write","x":1`), "workspace.x: unknown key"},
		{"capabilities missing", edit(`"capabilities":["exec"],`, ``), "capabilities: required"},
		{"capability all", edit(`["exec"]`, `["all"]`), "capabilities: malformed capability"},
		{"capabilities a string", edit(`["exec"]`, `"exec"`), "capabilities: must be a list"},
		{"limit negative", edit(`60000`, `-1`), "limits.maxTimeoutMs"},
		{"limit unknown", edit(`"maxTimeoutMs"`, `"maxTimeout"`), "limits.maxTimeout: unknown key"},
		{"too long", edit(`"provenance":"controller"`, `"provenance":"`+strings.Repeat("a", MaxContextBytes)+`"`), "longer than 65536 bytes"},
	}
	for _, c := range cases {
		_, err := ParseContext([]byte(c.in))
		if c.err == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var ce *ContextError
		if err == nil || !strings.Contains(err.Error(), c.err) || !errors.As(err, &ce) || ce.Code != CodeContextInvalid {
			t.Errorf("%s: err = %v, want context_invalid with %q", c.name, err, c.err)
		}
	}
}

func TestContextSizeBoundary(t *testing.T) {
	// A context of exactly MaxContextBytes parses; one byte more does not.
	pad := func(n int) []byte { return []byte("{" + strings.Repeat(" ", n) + goodContext[1:]) }
	at := pad(MaxContextBytes - len(goodContext))
	if len(at) != MaxContextBytes {
		t.Fatalf("built %d bytes", len(at))
	}
	if _, err := ParseContext(at); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	if _, err := ParseContext(pad(MaxContextBytes - len(goodContext) + 1)); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("one past the limit: %v", err)
	}
}

func TestNewContextDefaults(t *testing.T) {
	p := mustJSON(t, `{"max_file_bytes":100,"max_timeout_ms":50}`)
	c, err := New(ExecutionContext{RunID: "r", Principal: "ci", Policy: p, Capabilities: []string{"write", "read", "read"},
		Limits: Limits{MaxFileBytes: 200, MaxOutputBytes: 7}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Attempt != 1 || strings.Join(c.Capabilities, ",") != "read,write" ||
		c.Limits != (Limits{MaxFileBytes: 100, MaxTimeoutMs: 50, MaxOutputBytes: 7}) {
		t.Fatalf("New = %+v", c)
	}
}

func ctxFor(t *testing.T, ws *Workspace, caps ...string) ExecutionContext {
	t.Helper()
	c, err := New(ExecutionContext{RunID: "inv-1", Principal: "ci", Provenance: "controller",
		Policy: mustJSON(t, `{"allowed_commands":["make","git"]}`), Workspace: ws, Capabilities: caps,
		Limits: Limits{MaxTimeoutMs: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestChild(t *testing.T) {
	parent := ctxFor(t, &Workspace{Root: "/srv/ws", Mode: WorkspaceReadOnly}, "exec", "read")
	cases := []struct {
		name string
		spec ChildSpec
		code string
	}{
		{"inherits", ChildSpec{RunID: "c1"}, ""},
		{"sub workspace", ChildSpec{RunID: "c1", Workspace: &Workspace{Root: "/srv/ws/sub", Mode: WorkspaceReadWrite}}, ""},
		{"same root", ChildSpec{RunID: "c1", Workspace: &Workspace{Root: "/srv/ws", Mode: WorkspaceReadOnly}}, ""},
		{"sibling prefix escapes", ChildSpec{RunID: "c1", Workspace: &Workspace{Root: "/srv/wsx", Mode: WorkspaceReadOnly}}, CodeWorkspaceEscape},
		{"parent escapes", ChildSpec{RunID: "c1", Workspace: &Workspace{Root: "/srv", Mode: WorkspaceReadOnly}}, CodeWorkspaceEscape},
		{"dotdot refused", ChildSpec{RunID: "c1", Workspace: &Workspace{Root: "/srv/ws/../x", Mode: WorkspaceReadOnly}}, CodeContextInvalid},
		{"no run id", ChildSpec{}, CodeContextInvalid},
	}
	for _, c := range cases {
		child, err := parent.Child(c.spec)
		if c.code != "" {
			var ce *ContextError
			if !errors.As(err, &ce) || ce.Code != c.code {
				t.Errorf("%s: err = %v, want %s", c.name, err, c.code)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !child.ReadOnly() {
			t.Errorf("%s: read_only did not stick", c.name)
		}
		if child.ParentRunID != "inv-1" || !child.Subset(parent) {
			t.Errorf("%s: child %+v", c.name, child)
		}
	}
	// Everything else intersects.
	p := mustJSON(t, `{"allowed_commands":["make","rm"],"max_timeout_ms":5000}`)
	child, err := parent.Child(ChildSpec{RunID: "c2", Policy: &p, Capabilities: []string{"exec", "write"}, Limits: Limits{MaxFileBytes: 9}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(child.Capabilities, ",") != "exec" || strings.Join(child.Policy.AllowedCommands, ",") != "make" ||
		child.Limits != (Limits{MaxTimeoutMs: 1000, MaxFileBytes: 9}) {
		t.Fatalf("child %+v", child)
	}
}

func TestNarrow(t *testing.T) {
	base := ctxFor(t, &Workspace{Root: "/srv/ws", Mode: WorkspaceReadWrite}, "exec", "read")
	ro := ctxFor(t, &Workspace{Root: "/srv/ws", Mode: WorkspaceReadOnly}, "exec")
	cases := []struct {
		name string
		base ExecutionContext
		in   string
		code string
	}{
		{"empty narrows nothing", base, `{}`, ""},
		{"own principal", base, `{"principal":"ci"}`, ""},
		{"other principal", base, `{"principal":"admin"}`, CodePrincipalMismatch},
		{"fewer capabilities", base, `{"capabilities":["read"]}`, ""},
		{"no capabilities", base, `{"capabilities":[]}`, ""},
		{"wider capabilities", base, `{"capabilities":["read","write"]}`, CodeContextWider},
		{"sub root", base, `{"workspace":{"root":"/srv/ws/a"}}`, ""},
		{"outside root", base, `{"workspace":{"root":"/srv"}}`, CodeContextWider},
		{"sibling root", base, `{"workspace":{"root":"/srv/ws2"}}`, CodeContextWider},
		{"read_only of read_write", base, `{"workspace":{"root":"/srv/ws","mode":"read_only"}}`, ""},
		{"read_write of read_only", ro, `{"workspace":{"root":"/srv/ws","mode":"read_write"}}`, CodeContextWider},
		{"mode inherits read_only", ro, `{"workspace":{"root":"/srv/ws/a"}}`, ""},
		{"limit at base", base, `{"limits":{"maxTimeoutMs":1000}}`, ""},
		{"limit one above base", base, `{"limits":{"maxTimeoutMs":1001}}`, CodeContextWider},
		{"limit where base has none", base, `{"limits":{"maxFileBytes":10}}`, ""},
		{"limit zero refused", base, `{"limits":{"maxFileBytes":0}}`, CodeContextInvalid},
		{"policy intersects", base, `{"policy":{"allowed_commands":["make","sh"]}}`, ""},
		{"runId is the controller's", base, `{"runId":"x"}`, CodeContextInvalid},
		{"malformed policy", base, `{"policy":{"allow":["capability:exec"]}}`, CodeContextInvalid},
	}
	for _, c := range cases {
		n, err := ParseNarrowing([]byte(c.in))
		var got ExecutionContext
		if err == nil {
			got, err = c.base.Narrow(n)
		}
		if c.code != "" {
			var ce *ContextError
			if !errors.As(err, &ce) || ce.Code != c.code {
				t.Errorf("%s: err = %v, want %s", c.name, err, c.code)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !got.Subset(c.base) || got.Provenance != "caller" {
			t.Errorf("%s: %+v not within base", c.name, got)
		}
	}
	n, _ := ParseNarrowing([]byte(`{"policy":{"allowed_commands":["make","sh"]},"workspace":{"root":"/srv/ws/a"}}`))
	got, _ := base.Narrow(n)
	if strings.Join(got.Policy.AllowedCommands, ",") != "make" || got.Workspace.Root != "/srv/ws/a" || got.Workspace.Mode != WorkspaceReadWrite {
		t.Fatalf("narrowed %+v", got)
	}
}

func TestRebind(t *testing.T) {
	c := ctxFor(t, &Workspace{Root: "/home/u/ws", Mode: WorkspaceReadOnly}, "read")
	r, err := c.Rebind("/data/real/ws")
	if err != nil || r.Workspace.Root != "/data/real/ws" || !r.ReadOnly() || r.Principal != "ci" || c.Workspace.Root != "/home/u/ws" {
		t.Fatalf("Rebind = %+v, %v", r, err)
	}
	if _, err := c.Rebind("rel"); err == nil {
		t.Fatal("relative root accepted")
	}
	if _, err := ctxFor(t, nil, "read").Rebind("/x"); err == nil {
		t.Fatal("rebind without a workspace accepted")
	}
}

func TestSubset(t *testing.T) {
	a := ctxFor(t, &Workspace{Root: "/srv/ws", Mode: WorkspaceReadWrite}, "exec", "read")
	if !a.Subset(a) {
		t.Fatal("not a subset of itself")
	}
	b := ctxFor(t, nil, "exec", "read")
	if !a.Subset(b) || b.Subset(a) {
		t.Fatal("a workspace is within none, not the reverse")
	}
	c := ctxFor(t, &Workspace{Root: "/srv/ws", Mode: WorkspaceReadWrite}, "exec", "read", "write")
	if c.Subset(a) || !a.Subset(c) {
		t.Fatal("capabilities")
	}
	d := a
	d.Principal = "other"
	if d.Subset(a) {
		t.Fatal("principal")
	}
}
