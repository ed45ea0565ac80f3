package authority

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

var (
	selPool = []string{"node.fs.read", "node.fs.write", "node.fs.delete", "node.process.run", "node.process.get",
		"node.host.info", "node.kv.put", "node.checksum.sha256", "node.secrets.set", "node.rename",
		"node.fs.*", "node.process.*", "node.*", "node.kv.*", "node.secrets.*"}
	anySelPool = append(append([]string{}, selPool...), "capability:read", "capability:write", "capability:exec",
		"capability:secrets", "capability:kv", "class:read", "class:mutation")
	cmdPool   = []string{"make", "/usr/bin/make", "sh", "/bin/sh", "git", "rm", "/bin/rm", "true", "/tmp/x/true"}
	argv0Pool = append(append([]string{}, cmdPool...), "/usr/local/bin/rm", "ls", "/usr/bin/git")
)

func pick(r *rand.Rand, pool []string) []any {
	n := r.IntN(4)
	out := make([]any, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, pool[r.IntN(len(pool))])
	}
	return out
}

// randomPolicy builds a random policy through the parser, so it is in
// canonical form as every real policy is.
func randomPolicy(t testing.TB, r *rand.Rand) ToolPolicy {
	m := map[string]any{}
	if r.IntN(3) == 0 {
		m["profile"] = ProfileNames[r.IntN(len(ProfileNames))]
	}
	if r.IntN(2) == 0 {
		m["allow"] = pick(r, selPool)
	}
	if r.IntN(2) == 0 {
		m["deny"] = pick(r, anySelPool)
	}
	if r.IntN(3) == 0 {
		m["blocked_tools"] = pick(r, anySelPool)
	}
	ra := pick(r, anySelPool)
	if r.IntN(2) == 0 {
		m["require_approval"] = ra
	}
	if r.IntN(2) == 0 {
		ap := map[string]any{}
		for _, s := range pick(r, anySelPool) {
			mode := ModeOnce
			if r.IntN(2) == 0 || contains(toStrings(ra), s.(string)) {
				mode = ModeAlways
			}
			ap[s.(string)] = mode
		}
		m["approvals"] = ap
	}
	switch r.IntN(4) {
	case 0:
		m["allowed_commands"] = pick(r, cmdPool)
	case 1:
		m["allowed_commands"] = "all"
	}
	if r.IntN(2) == 0 {
		m["blocked_commands"] = pick(r, cmdPool)
	}
	for _, k := range []string{"max_file_bytes", "max_timeout_ms", "max_output_bytes"} {
		if r.IntN(2) == 0 {
			m[k] = int64(r.IntN(4) * 100)
		}
	}
	m["sandbox"] = r.IntN(3) == 0
	m["no_reply"] = r.IntN(3) == 0
	p, err := Parse(m)
	if err != nil {
		t.Fatalf("random policy %v: %v", m, err)
	}
	return p
}

func toStrings(xs []any) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.(string)
	}
	return out
}

// checkNeverWidens proves, field by field and by behaviour, that r =
// Restrict(a, b) allows nothing a or b refuses.
func checkNeverWidens(t testing.TB, a, b ToolPolicy) {
	t.Helper()
	r := Restrict(a, b)
	for _, m := range methods {
		dr := Decide(r, m)
		for _, x := range []ToolPolicy{a, b} {
			if dx := Decide(x, m); dx.Stricter(dr) {
				t.Fatalf("Restrict widens %s: %+v from %+v\na=%s\nb=%s\nr=%s", m.Name, dr, dx, canonJSON(t, a), canonJSON(t, b), canonJSON(t, r))
			}
		}
	}
	for _, c := range argv0Pool {
		if ok, _ := AllowsCommand(r, c); ok {
			okA, _ := AllowsCommand(a, c)
			okB, _ := AllowsCommand(b, c)
			if !okA || !okB {
				t.Fatalf("Restrict allows command %q: a=%s b=%s", c, canonJSON(t, a), canonJSON(t, b))
			}
		}
	}
	if !r.Limits.Within(a.Limits) || !r.Limits.Within(b.Limits) {
		t.Fatalf("Restrict widens limits: %+v from %+v, %+v", r.Limits, a.Limits, b.Limits)
	}
	if r.Sandbox != (a.Sandbox || b.Sandbox) || r.NoReply != (a.NoReply || b.NoReply) {
		t.Fatalf("sandbox/no_reply did not stick")
	}
	if !Within(r, a) || !Within(r, b) {
		t.Fatalf("Restrict result not Within both: a=%s b=%s r=%s", canonJSON(t, a), canonJSON(t, b), canonJSON(t, r))
	}
	if !Restrict(b, a).Equal(r) {
		t.Fatalf("Restrict is not commutative: a=%s b=%s", canonJSON(t, a), canonJSON(t, b))
	}
	if !Restrict(r, a).Equal(r) || !Restrict(r, r).Equal(r) {
		t.Fatalf("Restrict is not idempotent: r=%s", canonJSON(t, r))
	}
	enc, _ := r.MarshalJSON()
	back, err := ParseJSON(enc)
	if err != nil || !back.Equal(r) {
		t.Fatalf("canonical JSON does not parse back: %s: %v", enc, err)
	}
}

func TestRestrictRandomPairs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 5000; i++ {
		checkNeverWidens(t, randomPolicy(t, r), randomPolicy(t, r))
	}
}

func randomContext(t testing.TB, r *rand.Rand) ExecutionContext {
	caps := []string{}
	for _, c := range []string{"read", "write", "exec", "secrets", "hostinfo", "kv"} {
		if r.IntN(2) == 0 {
			caps = append(caps, c)
		}
	}
	c := ExecutionContext{RunID: "run-1", Principal: "ci", Provenance: "controller", Policy: randomPolicy(t, r),
		Capabilities: caps, Limits: Limits{MaxFileBytes: int64(r.IntN(3) * 1000), MaxTimeoutMs: int64(r.IntN(3) * 500)}}
	if r.IntN(3) > 0 {
		c.Workspace = &Workspace{Root: []string{"/srv", "/srv/ws", "/"}[r.IntN(3)],
			Mode: []string{WorkspaceReadOnly, WorkspaceReadWrite}[r.IntN(2)]}
	}
	out, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var rootPool = []string{"/", "/srv", "/srv/ws", "/srv/ws/sub", "/srv/wsx", "/etc", "/srv/ws/../etc"}

func TestContextRandomChildren(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 3000; i++ {
		parent := randomContext(t, r)
		p := randomPolicy(t, r)
		spec := ChildSpec{RunID: "child-1", Policy: &p,
			Limits: Limits{MaxFileBytes: int64(r.IntN(3) * 700), MaxOutputBytes: int64(r.IntN(2) * 9)}}
		if r.IntN(2) == 0 {
			spec.Capabilities = []string{[]string{"read", "write", "exec", "kv"}[r.IntN(4)]}
		}
		if r.IntN(2) == 0 {
			spec.Workspace = &Workspace{Root: rootPool[r.IntN(len(rootPool))],
				Mode: []string{WorkspaceReadOnly, WorkspaceReadWrite}[r.IntN(2)]}
		}
		child, err := parent.Child(spec)
		if err != nil {
			ce, ok := err.(*ContextError)
			if !ok {
				t.Fatalf("Child error %T %v", err, err)
			}
			escape := spec.Workspace != nil && parent.Workspace != nil && CheckRoot(spec.Workspace.Root) == nil &&
				!RootWithin(spec.Workspace.Root, parent.Workspace.Root)
			if (ce.Code == CodeWorkspaceEscape) != escape && ce.Code != CodeContextInvalid {
				t.Fatalf("Child refused with %v for %+v", err, spec.Workspace)
			}
			continue
		}
		if !child.Subset(parent) {
			t.Fatalf("child is not a subset:\nparent %+v\nchild %+v", parent, child)
		}
		if child.ParentRunID != parent.RunID || child.Principal != parent.Principal {
			t.Fatalf("child identity: %+v", child)
		}
		roundTrip(t, child)
	}
}

func TestContextRandomNarrow(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 3000; i++ {
		base := randomContext(t, r)
		n := Narrowing{}
		if r.IntN(2) == 0 {
			p := randomPolicy(t, r)
			n.Policy = &p
		}
		if r.IntN(2) == 0 {
			n.HasCapabilities = true
			n.Capabilities = []string{[]string{"read", "write", "exec", "kv"}[r.IntN(4)]}
		}
		if r.IntN(2) == 0 {
			n.Workspace = &Workspace{Root: rootPool[r.IntN(len(rootPool)-1)], Mode: []string{"", WorkspaceReadOnly, WorkspaceReadWrite}[r.IntN(3)]}
		}
		n.Limits = Limits{MaxFileBytes: int64(r.IntN(3) * 800), MaxTimeoutMs: int64(r.IntN(3) * 400)}
		if r.IntN(5) == 0 {
			n.Principal = []string{"ci", "other"}[r.IntN(2)]
		}
		got, err := base.Narrow(n)
		if err != nil {
			ce, ok := err.(*ContextError)
			if !ok || (ce.Code != CodeContextWider && ce.Code != CodePrincipalMismatch) {
				t.Fatalf("Narrow error %v", err)
			}
			if ce.Code == CodePrincipalMismatch && n.Principal == base.Principal {
				t.Fatalf("own principal refused")
			}
			continue
		}
		if !got.Subset(base) {
			t.Fatalf("narrowed context is wider:\nbase %+v\ngot %+v", base, got)
		}
		if n.HasCapabilities && len(got.Capabilities) != len(n.Capabilities) {
			t.Fatalf("capabilities not as asked: %v", got.Capabilities)
		}
		roundTrip(t, got)
	}
}

func roundTrip(t testing.TB, c ExecutionContext) {
	t.Helper()
	enc, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseContext(enc)
	if err != nil {
		t.Fatalf("ParseContext(%s): %v", enc, err)
	}
	if !back.Subset(c) || !c.Subset(back) || back.RunID != c.RunID || back.Attempt != c.Attempt {
		t.Fatalf("round trip differs: %s", enc)
	}
	enc2, _ := json.Marshal(back)
	if string(enc2) != string(enc) {
		t.Fatalf("round trip not stable:\n%s\n%s", enc, enc2)
	}
}
