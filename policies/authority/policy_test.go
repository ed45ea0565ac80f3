package authority

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// canonJSON marshals p for comparison in tests.
func canonJSON(t testing.TB, p ToolPolicy) string {
	t.Helper()
	b, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseRules(t *testing.T) {
	many := make([]any, MaxListEntries+1)
	for i := range many {
		many[i] = "node.fs.read"
	}
	cases := []struct {
		name string
		in   map[string]any
		want string // canonical JSON, or "" when wantErr
		err  string // substring of the error
	}{
		{"empty table is full access", map[string]any{}, `{}`, ""},
		{"allow all", map[string]any{"allow": "all"}, `{}`, ""},
		{"allow list", map[string]any{"allow": []any{"node.fs.read", "node.fs.*"}}, `{"allow":["node.fs.*"]}`, ""},
		{"allow empty is none", map[string]any{"allow": []any{}}, `{"allow":[]}`, ""},
		{"allow []string from a decoder", map[string]any{"allow": []string{"node.host.info"}}, `{"allow":["node.host.info"]}`, ""},
		{"allow other string", map[string]any{"allow": "none"}, "", `allow: must be "all"`},
		{"allow capability refused", map[string]any{"allow": []any{"capability:read"}}, "", "allow[0]: allow takes method names and globs only"},
		{"allow class refused", map[string]any{"allow": []any{"class:read"}}, "", "allow[0]: allow takes"},
		{"allow malformed", map[string]any{"allow": []any{"Node.FS"}}, "", "allow[0]: malformed selector"},
		{"allow bare star refused", map[string]any{"allow": []any{"*"}}, "", "allow[0]: malformed selector"},
		{"allow not strings", map[string]any{"allow": []any{"node.fs.read", int64(3)}}, "", "allow: must be a list of strings"},
		{"allow a table", map[string]any{"allow": map[string]any{}}, "", "allow: must be"},
		{"deny selectors", map[string]any{"deny": []any{"capability:exec", "class:mutation", "node.fs.delete"}},
			`{"deny":["capability:exec","class:mutation","node.fs.delete"]}`, ""},
		{"deny class unknown", map[string]any{"deny": []any{"class:write"}}, "", "deny[0]: malformed selector"},
		{"deny capability malformed", map[string]any{"deny": []any{"capability:Exec"}}, "", "deny[0]: malformed"},
		{"deny capability all reserved", map[string]any{"deny": []any{"capability:all"}}, "", "deny[0]: malformed"},
		{"deny empty is none", map[string]any{"deny": []any{}}, `{}`, ""},
		{"blocked_tools", map[string]any{"blocked_tools": []any{"node.secrets.*"}}, `{"blocked_tools":["node.secrets.*"]}`, ""},
		{"selector too long", map[string]any{"deny": []any{"node." + strings.Repeat("a", MaxSelectorBytes)}}, "", "deny[0]: malformed"},
		{"selector at its limit", map[string]any{"deny": []any{"node." + strings.Repeat("a", MaxSelectorBytes-5)}},
			`{"deny":["node.` + strings.Repeat("a", MaxSelectorBytes-5) + `"]}`, ""},
		{"list at its limit", map[string]any{"deny": many[:MaxListEntries]}, `{"deny":["node.fs.read"]}`, ""},
		{"list one past its limit", map[string]any{"deny": many}, "", "deny: at most 256 entries"},
		{"require_approval is always", map[string]any{"require_approval": []any{"node.fs.write"}},
			`{"require_approval":["node.fs.write"]}`, ""},
		{"approvals once and always", map[string]any{"approvals": map[string]any{"node.fs.write": "once", "class:mutation": "always"}},
			`{"require_approval":["class:mutation"],"approvals":{"node.fs.write":"once"}}`, ""},
		{"approvals unsupported mode", map[string]any{"approvals": map[string]any{"node.fs.write": "never"}}, "",
			"approvals.node.fs.write: unsupported approval mode"},
		{"approvals mode not a string", map[string]any{"approvals": map[string]any{"node.fs.write": true}}, "", "unsupported approval mode"},
		{"approvals malformed selector", map[string]any{"approvals": map[string]any{"bad selector": "once"}}, "", "approvals.?: malformed selector"},
		{"approvals not a table", map[string]any{"approvals": []any{"node.fs.write"}}, "", "approvals: must be a table"},
		{"approvals once conflicts require_approval", map[string]any{"require_approval": []any{"node.fs.write"},
			"approvals": map[string]any{"node.fs.write": "once"}}, "", "conflicts with require_approval"},
		{"approvals always repeats require_approval", map[string]any{"require_approval": []any{"node.fs.write"},
			"approvals": map[string]any{"node.fs.write": "always"}}, `{"require_approval":["node.fs.write"]}`, ""},
		{"no_reply", map[string]any{"no_reply": true}, `{"no_reply":true}`, ""},
		{"no_reply not bool", map[string]any{"no_reply": "yes"}, "", "no_reply: must be true or false"},
		{"sandbox", map[string]any{"sandbox": true}, `{"sandbox":true}`, ""},
		{"sandbox not bool", map[string]any{"sandbox": int64(1)}, "", "sandbox: must be true or false"},
		{"allowed_commands empty is none", map[string]any{"allowed_commands": []any{}}, `{"allowed_commands":[]}`, ""},
		{"allowed_commands all is any", map[string]any{"allowed_commands": "all"}, `{}`, ""},
		{"allowed_commands other string", map[string]any{"allowed_commands": "any"}, "", `allowed_commands: must be "all"`},
		{"allowed_commands all as an item", map[string]any{"allowed_commands": []any{"make", "all"}}, "", `allowed_commands[1]: "all" is not a list item`},
		{"allowed_commands names and paths", map[string]any{"allowed_commands": []any{"make", "/usr/bin/make", "make"}},
			`{"allowed_commands":["/usr/bin/make","make"]}`, ""},
		{"command relative path", map[string]any{"allowed_commands": []any{"./make"}}, "", "allowed_commands[0]: must be a bare command name or a clean absolute path"},
		{"command unclean path", map[string]any{"blocked_commands": []any{"/usr/../bin/rm"}}, "", "blocked_commands[0]: must be a bare"},
		{"command empty", map[string]any{"blocked_commands": []any{""}}, "", "blocked_commands[0]: must be 1 to"},
		{"command at its limit", map[string]any{"blocked_commands": []any{strings.Repeat("a", MaxCommandBytes)}},
			`{"blocked_commands":["` + strings.Repeat("a", MaxCommandBytes) + `"]}`, ""},
		{"command one past its limit", map[string]any{"blocked_commands": []any{strings.Repeat("a", MaxCommandBytes+1)}}, "", "must be 1 to 512 bytes"},
		{"command with NUL", map[string]any{"blocked_commands": []any{"rm\x00"}}, "", "NUL"},
		{"blocked_commands all", map[string]any{"blocked_commands": "all"}, "", `blocked_commands: "all" is not allowed here`},
		{"limits", map[string]any{"max_file_bytes": int64(1024), "max_timeout_ms": 5000.0, "max_output_bytes": json.Number("77")},
			`{"max_file_bytes":1024,"max_timeout_ms":5000,"max_output_bytes":77}`, ""},
		{"limit 0 is unset", map[string]any{"max_file_bytes": int64(0)}, `{}`, ""},
		{"limit at its maximum", map[string]any{"max_file_bytes": int64(MaxLimit)}, `{"max_file_bytes":9007199254740991}`, ""},
		{"limit one past its maximum", map[string]any{"max_file_bytes": int64(MaxLimit + 1)}, "", "max_file_bytes: must be an integer"},
		{"limit negative", map[string]any{"max_timeout_ms": int64(-1)}, "", "max_timeout_ms: must be an integer"},
		{"limit fraction", map[string]any{"max_timeout_ms": 1.5}, "", "max_timeout_ms: must be an integer"},
		{"limit a string", map[string]any{"max_output_bytes": "10"}, "", "max_output_bytes: must be an integer"},
		{"profile read_only", map[string]any{"profile": "read_only"}, `{"profile":"read_only","deny":["class:mutation"]}`, ""},
		{"profile narrowed by keys", map[string]any{"profile": "minimal_core", "allow": []any{"node.fs.read", "node.secrets.list"}},
			`{"profile":"minimal_core","allow":["node.fs.read"]}`, ""},
		{"profile not widened by allow all", map[string]any{"profile": "minimal_core", "allow": "all"},
			`{"profile":"minimal_core","allow":["node.fs.*","node.host.info","node.process.*"]}`, ""},
		{"profile safe_mode once stays always", map[string]any{"profile": "safe_mode", "approvals": map[string]any{"class:mutation": "once"}},
			`{"profile":"safe_mode","require_approval":["class:mutation"],"sandbox":true}`, ""},
		{"unknown profile", map[string]any{"profile": "root"}, "", "profile: unknown profile"},
		{"profile not a string", map[string]any{"profile": int64(1)}, "", "profile: must be a string"},
		{"unknown key", map[string]any{"allow_all": true}, "", "allow_all: unknown key"},
		{"misspelled key", map[string]any{"blockedTools": []any{}}, "", "blockedTools: unknown key (did you mean blocked_tools?)"},
		{"conflicting keys", map[string]any{"deny": []any{}, "Deny": []any{}}, "", "Deny: conflicts with key deny"},
		{"conflicting keys dash", map[string]any{"no_reply": true, "no-reply": true}, "", "conflicts with key"},
		{"unknown key with unsafe name", map[string]any{"a b\n": 1}, "", "?: unknown key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Parse(c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want it to contain %q", err, c.err)
				}
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("err %T is not a *ParseError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := canonJSON(t, p); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}

func TestParseAbsentIsNotMalformed(t *testing.T) {
	if _, err := Parse(nil); !errors.Is(err, ErrPolicyAbsent) {
		t.Fatalf("Parse(nil) = %v, want ErrPolicyAbsent", err)
	}
	for _, in := range []string{"", "  ", "null"} {
		if _, err := ParseJSON([]byte(in)); !errors.Is(err, ErrPolicyAbsent) {
			t.Fatalf("ParseJSON(%q) = %v, want ErrPolicyAbsent", in, err)
		}
	}
	for _, in := range []string{"{", "[]", `"x"`, `{"allow":1}`} {
		if _, err := ParseJSON([]byte(in)); err == nil || errors.Is(err, ErrPolicyAbsent) {
			t.Fatalf("ParseJSON(%q) = %v, want a malformed-policy error", in, err)
		}
	}
}

func TestParseJSONRules(t *testing.T) {
	cases := []struct {
		in, want, err string
	}{
		{`{}`, `{}`, ""},
		{`{"allow":["node.fs.read"],"deny":["capability:exec"]}`, `{"allow":["node.fs.read"],"deny":["capability:exec"]}`, ""},
		{`{"approvals":{"node.fs.*":"once"}}`, `{"approvals":{"node.fs.*":"once"}}`, ""},
		{`{"max_timeout_ms":60000,"allowed_commands":["make"]}`, `{"allowed_commands":["make"],"max_timeout_ms":60000}`, ""},
		{`{"max_timeout_ms":1e3}`, "", "max_timeout_ms: must be an integer"},
		{`{"max_timeout_ms":9007199254740992}`, "", "max_timeout_ms: must be an integer"},
		{`{"allow":["node.fs.read"],"allow":[]}`, "", "allow: key given twice"},
		{`{"approvals":{"node.fs.read":"once","node.fs.read":"always"}}`, "", "node.fs.read: key given twice"},
		{`{"allow":["node.fs.read"]} {}`, "", "trailing data"},
		{`{"allow":[],"\u0061llow":[]}`, "", "allow: key given twice"},
		{`{"approvals":{"a.b":"once","c.d":"once"},"deny":["x\"y"],"approvals":{}}`, "", "approvals: key given twice"},
		{`{"approvals":{"a.b":"once"},"blocked_tools":[{"a.b":1}]}`, "", "blocked_tools: must be a list of strings"},
		{`{"allow":["node.fs.read"]`, "", "malformed JSON"},
		{`{"Allow":["node.fs.read"],"allow":[]}`, "", "conflicts with key"},
		{`{"allow":null}`, "", "allow: must be"},
		{`{"deny":"node.fs.read"}`, "", "deny: must be a list of strings"},
		{`{"runId":"x"}`, "", "runId: unknown key"},
		{`[` + strings.Repeat(`[`, 40) + strings.Repeat(`]`, 40) + `]`, "", "nested deeper"},
		{`{"profile":"no_external"}`, `{"profile":"no_external","blocked_tools":["capability:exec","capability:secrets"]}`, ""},
		{`{"deny":["` + strings.Repeat("a", MaxPolicyBytes) + `"]}`, "", "policy longer than"},
	}
	for _, c := range cases {
		p, err := ParseJSON([]byte(c.in))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseJSON(%.60s) err = %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseJSON(%.60s): %v", c.in, err)
			continue
		}
		if got := canonJSON(t, p); got != c.want {
			t.Errorf("ParseJSON(%s) = %s, want %s", c.in, got, c.want)
		}
		// The canonical form parses back to itself.
		q, err := ParseJSON([]byte(c.want))
		if err != nil || !q.Equal(p) {
			t.Errorf("round trip of %s: %v", c.want, err)
		}
	}
}

func TestParseTOML(t *testing.T) {
	doc := `
[policy]
profile = "minimal_core"
allow = ["node.fs.*", "node.process.run"]
deny = ["node.fs.delete"]
blocked_tools = ["capability:secrets"]
require_approval = ["node.process.run"]
no_reply = false
allowed_commands = ["make", "/usr/bin/git"]
blocked_commands = ["rm"]
max_file_bytes = 1048576
max_timeout_ms = 60000
sandbox = true

[policy.approvals]
"node.fs.write" = "once"

[bad]
max_file_bytes = 1.5
[badmode]
approvals = { "node.fs.write" = "sometimes" }
[badlist]
deny = ["node.fs.read", 1]
`
	var m map[string]map[string]any
	if _, err := toml.Decode(doc, &m); err != nil {
		t.Fatal(err)
	}
	p, err := Parse(m["policy"])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"profile":"minimal_core","allow":["node.fs.*","node.process.run"],"deny":["node.fs.delete"],` +
		`"blocked_tools":["capability:secrets"],"require_approval":["node.process.run"],"approvals":{"node.fs.write":"once"},` +
		`"allowed_commands":["/usr/bin/git","make"],"blocked_commands":["rm"],"max_file_bytes":1048576,"max_timeout_ms":60000,"sandbox":true}`
	if got := canonJSON(t, p); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// The TOML table and its JSON form are one policy.
	q, err := ParseJSON([]byte(want))
	if err != nil || !q.Equal(p) {
		t.Fatalf("JSON form differs: %v", err)
	}
	for key, msg := range map[string]string{"bad": "max_file_bytes: must be an integer",
		"badmode": "unsupported approval mode", "badlist": "deny: must be a list of strings"} {
		if _, err := Parse(m[key]); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("[%s]: err = %v, want %q", key, err, msg)
		}
	}
}

func TestProfiles(t *testing.T) {
	for _, name := range ProfileNames {
		p, ok := Profile(name)
		if !ok {
			t.Fatalf("profile %s missing", name)
		}
		q, err := Parse(map[string]any{"profile": name})
		if err != nil || !q.Equal(p) || q.Profile != name {
			t.Fatalf("profile %s: parse gives %v %v", name, q, err)
		}
	}
	if _, ok := Profile("custom"); ok {
		t.Fatal("unknown profile accepted")
	}
	// What each profile decides for the built-in methods.
	want := map[string]map[string]Verdict{
		ProfileFullAccess:         {"node.fs.read": Allow, "node.fs.write": Allow, "node.process.run": Allow, "node.secrets.set": Allow, "node.kv.put": Allow},
		ProfileReadOnly:           {"node.fs.read": Allow, "node.fs.write": Deny, "node.process.run": Deny, "node.process.get": Allow, "node.secrets.set": Deny, "node.kv.put": Deny},
		ProfileSafeMode:           {"node.fs.read": Allow, "node.fs.write": NeedsApproval, "node.process.run": NeedsApproval, "node.host.info": Allow},
		ProfileMinimalCore:        {"node.fs.read": Allow, "node.fs.write": Allow, "node.process.run": Allow, "node.secrets.set": Deny, "node.kv.put": Deny},
		ProfileNoExternal:         {"node.fs.read": Allow, "node.fs.write": Allow, "node.process.run": Deny, "node.process.get": Deny, "node.secrets.list": Deny, "node.checksum.sha256": Allow},
		ProfileSubagentRestricted: {"node.fs.read": Allow, "node.fs.write": Allow, "node.fs.delete": Deny, "node.process.run": Deny, "node.host.info": Allow},
	}
	for prof, ms := range want {
		p, _ := Profile(prof)
		for name, v := range ms {
			if got := Decide(p, methodByName[name]).Verdict; got != v {
				t.Errorf("%s %s = %v, want %v", prof, name, got, v)
			}
		}
	}
}

// methods are declarations as the built-in families and examples make them.
var methods = []Method{
	{Name: "node.host.info", Capability: "hostinfo", Class: ClassRead},
	{Name: "node.fs.read", Capability: "read", Class: ClassRead},
	{Name: "node.fs.list", Capability: "read", Class: ClassRead},
	{Name: "node.fs.write", Capability: "write", Class: ClassMutation},
	{Name: "node.fs.delete", Capability: "write", Class: ClassMutation},
	{Name: "node.process.run", Capability: "exec", Class: ClassMutation},
	{Name: "node.process.get", Capability: "exec", Class: ClassRead},
	{Name: "node.secrets.set", Capability: "secrets", Class: ClassMutation},
	{Name: "node.secrets.list", Capability: "secrets", Class: ClassRead},
	{Name: "node.checksum.sha256", Capability: "checksum", Uses: []string{"read"}, Class: ClassRead},
	{Name: "node.kv.put", Capability: "kv", Uses: []string{"write"}},
	{Name: "node.rename", Class: ClassMutation},
}

var methodByName = func() map[string]Method {
	m := map[string]Method{}
	for _, x := range methods {
		m[x.Name] = x
	}
	return m
}()

func mustJSON(t testing.TB, s string) ToolPolicy {
	t.Helper()
	p, err := ParseJSON([]byte(s))
	if err != nil {
		t.Fatalf("ParseJSON(%s): %v", s, err)
	}
	return p
}

func TestRestrictRules(t *testing.T) {
	cases := []struct {
		name, a, b, want string
	}{
		{"full access is the identity", `{}`, `{"allow":["node.fs.read"],"deny":["class:mutation"]}`, `{"allow":["node.fs.read"],"deny":["class:mutation"]}`},
		{"allow lists intersect", `{"allow":["node.fs.*","node.host.info"]}`, `{"allow":["node.fs.read","node.process.*"]}`, `{"allow":["node.fs.read"]}`},
		{"allow globs intersect to the narrower", `{"allow":["node.*"]}`, `{"allow":["node.fs.*"]}`, `{"allow":["node.fs.*"]}`},
		{"disjoint allow lists give none", `{"allow":["node.fs.*"]}`, `{"allow":["node.process.*"]}`, `{"allow":[]}`},
		{"allow none stays none", `{"allow":[]}`, `{}`, `{"allow":[]}`},
		{"deny lists union", `{"deny":["node.fs.delete"]}`, `{"deny":["capability:exec"]}`, `{"deny":["capability:exec","node.fs.delete"]}`},
		{"deny union drops names a glob covers", `{"deny":["node.fs.delete"]}`, `{"deny":["node.fs.*"]}`, `{"deny":["node.fs.*"]}`},
		{"blocked lists union", `{"blocked_tools":["class:mutation"]}`, `{"blocked_tools":["node.secrets.*"]}`, `{"blocked_tools":["class:mutation","node.secrets.*"]}`},
		{"approvals union", `{"require_approval":["node.fs.write"]}`, `{"approvals":{"node.process.run":"once"}}`,
			`{"require_approval":["node.fs.write"],"approvals":{"node.process.run":"once"}}`},
		{"stricter approval mode wins", `{"approvals":{"node.fs.write":"once"}}`, `{"approvals":{"node.fs.write":"always"}}`, `{"require_approval":["node.fs.write"]}`},
		{"command allow lists intersect", `{"allowed_commands":["make","git"]}`, `{"allowed_commands":["make","/usr/bin/make"]}`, `{"allowed_commands":["make"]}`},
		{"a bare name and a path do not intersect", `{"allowed_commands":["true"]}`, `{"allowed_commands":["/tmp/x/true"]}`, `{"allowed_commands":[]}`},
		{"omitted commands is any", `{}`, `{"allowed_commands":["make"]}`, `{"allowed_commands":["make"]}`},
		{"no commands stays none", `{"allowed_commands":[]}`, `{"allowed_commands":"all"}`, `{"allowed_commands":[]}`},
		{"command block lists union", `{"blocked_commands":["rm"]}`, `{"blocked_commands":["dd","rm"]}`, `{"blocked_commands":["dd","rm"]}`},
		{"limits take the lower value", `{"max_file_bytes":100,"max_timeout_ms":5000}`, `{"max_file_bytes":50,"max_timeout_ms":9000}`, `{"max_file_bytes":50,"max_timeout_ms":5000}`},
		{"an unset limit takes the set one", `{"max_output_bytes":10}`, `{}`, `{"max_output_bytes":10}`},
		{"sandbox sticks", `{"sandbox":true}`, `{"sandbox":false}`, `{"sandbox":true}`},
		{"no_reply sticks", `{}`, `{"no_reply":true}`, `{"no_reply":true}`},
		{"profiles keep their rules", `{"profile":"read_only"}`, `{"profile":"minimal_core"}`, `{"allow":["node.fs.*","node.host.info","node.process.*"],"deny":["class:mutation"]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := mustJSON(t, c.a), mustJSON(t, c.b)
			for _, r := range []ToolPolicy{Restrict(a, b), Restrict(b, a)} {
				if got := canonJSON(t, r); got != c.want {
					t.Fatalf("got %s, want %s", got, c.want)
				}
			}
		})
	}
}

func TestWithin(t *testing.T) {
	cases := []struct {
		inner, outer string
		want         bool
	}{
		{`{}`, `{}`, true},
		{`{"allow":["node.fs.read"]}`, `{}`, true},
		{`{}`, `{"allow":["node.fs.read"]}`, false},
		{`{"allow":["node.fs.read"]}`, `{"allow":["node.fs.*"]}`, true},
		{`{"allow":["node.fs.*"]}`, `{"allow":["node.fs.read"]}`, false},
		{`{"deny":["node.fs.*"]}`, `{"deny":["node.fs.write"]}`, true},
		{`{"deny":["node.fs.write"]}`, `{"deny":["node.fs.*"]}`, false},
		{`{"require_approval":["node.fs.write"]}`, `{"approvals":{"node.fs.write":"once"}}`, true},
		{`{"approvals":{"node.fs.write":"once"}}`, `{"require_approval":["node.fs.write"]}`, false},
		{`{"allowed_commands":["make"]}`, `{"allowed_commands":["make","git"]}`, true},
		{`{"allowed_commands":["make","git"]}`, `{"allowed_commands":["make"]}`, false},
		{`{"allowed_commands":"all"}`, `{"allowed_commands":[]}`, false},
		{`{"max_timeout_ms":10}`, `{"max_timeout_ms":20}`, true},
		{`{"max_timeout_ms":30}`, `{"max_timeout_ms":20}`, false},
		{`{}`, `{"max_timeout_ms":20}`, false},
		{`{"sandbox":true}`, `{}`, true},
		{`{}`, `{"sandbox":true}`, false},
		{`{}`, `{"no_reply":true}`, false},
		{`{"blocked_commands":["rm"]}`, `{}`, true},
		{`{}`, `{"blocked_commands":["rm"]}`, false},
	}
	for _, c := range cases {
		if got := Within(mustJSON(t, c.inner), mustJSON(t, c.outer)); got != c.want {
			t.Errorf("Within(%s, %s) = %v, want %v", c.inner, c.outer, got, c.want)
		}
	}
}

func TestDecide(t *testing.T) {
	cases := []struct {
		policy, method string
		verdict        Verdict
		mode, rule     string
	}{
		{`{}`, "node.fs.write", Allow, "", ""},
		{`{"allow":["node.fs.*"]}`, "node.fs.write", Allow, "", ""},
		{`{"allow":["node.fs.*"]}`, "node.process.run", Deny, "", "allow"},
		{`{"allow":[]}`, "node.host.info", Deny, "", "allow"},
		{`{"deny":["node.fs.write"]}`, "node.fs.write", Deny, "", "deny"},
		{`{"deny":["node.fs.write"]}`, "node.fs.read", Allow, "", ""},
		{`{"blocked_tools":["node.fs.*"],"deny":["node.fs.write"]}`, "node.fs.write", Deny, "", "blocked_tools"},
		{`{"deny":["capability:read"]}`, "node.checksum.sha256", Deny, "", "deny"}, // uses read
		{`{"deny":["capability:write"]}`, "node.kv.put", Deny, "", "deny"},
		{`{"deny":["capability:exec"]}`, "node.process.get", Deny, "", "deny"},
		{`{"deny":["class:mutation"]}`, "node.kv.put", Deny, "", "deny"}, // undeclared class is a mutation
		{`{"deny":["class:mutation"]}`, "node.rename", Deny, "", "deny"},
		{`{"deny":["class:mutation"]}`, "node.process.get", Allow, "", ""},
		{`{"deny":["class:read"]}`, "node.fs.list", Deny, "", "deny"},
		{`{"allow":["node.fs.*"],"deny":["node.fs.read"]}`, "node.fs.read", Deny, "", "deny"},
		{`{"require_approval":["class:mutation"]}`, "node.fs.write", NeedsApproval, ModeAlways, "require_approval"},
		{`{"approvals":{"node.process.*":"once"}}`, "node.process.run", NeedsApproval, ModeOnce, "approvals"},
		{`{"approvals":{"node.process.*":"once"},"require_approval":["capability:exec"]}`, "node.process.run", NeedsApproval, ModeAlways, "require_approval"},
		{`{"deny":["node.process.run"],"require_approval":["node.process.run"]}`, "node.process.run", Deny, "", "deny"},
		{`{"allow":["node.fs.read"],"require_approval":["node.process.run"]}`, "node.process.run", Deny, "", "allow"},
	}
	for _, c := range cases {
		d := Decide(mustJSON(t, c.policy), methodByName[c.method])
		if d.Verdict != c.verdict || d.Mode != c.mode || d.Rule != c.rule {
			t.Errorf("Decide(%s, %s) = %+v, want %v %q %q", c.policy, c.method, d, c.verdict, c.mode, c.rule)
		}
	}
}

func TestAllowsCommand(t *testing.T) {
	cases := []struct {
		policy, argv0 string
		ok            bool
		rule          string
	}{
		{`{}`, "anything", true, ""},
		{`{}`, "", false, "allowed_commands"},
		{`{"allowed_commands":[]}`, "make", false, "allowed_commands"},
		{`{"allowed_commands":["make"]}`, "make", true, ""},
		{`{"allowed_commands":["make"]}`, "/usr/bin/make", false, "allowed_commands"}, // a bare name allows only itself
		{`{"allowed_commands":["make"]}`, "./make", false, "allowed_commands"},
		{`{"allowed_commands":["/usr/bin/make"]}`, "/usr/bin/make", true, ""},
		{`{"allowed_commands":["/usr/bin/make"]}`, "make", false, "allowed_commands"},
		{`{"allowed_commands":["/usr/bin/make"]}`, "/usr/local/bin/make", false, "allowed_commands"},
		{`{"blocked_commands":["rm"]}`, "rm", false, "blocked_commands"},
		{`{"blocked_commands":["rm"]}`, "/bin/rm", false, "blocked_commands"}, // blocked by base name too
		{`{"blocked_commands":["/bin/rm"]}`, "rm", false, "blocked_commands"},
		{`{"blocked_commands":["rm"]}`, "rmdir", true, ""},
		{`{"allowed_commands":["rm"],"blocked_commands":["rm"]}`, "rm", false, "blocked_commands"},
	}
	for _, c := range cases {
		ok, rule := AllowsCommand(mustJSON(t, c.policy), c.argv0)
		if ok != c.ok || rule != c.rule {
			t.Errorf("AllowsCommand(%s, %q) = %v %q, want %v %q", c.policy, c.argv0, ok, rule, c.ok, c.rule)
		}
	}
}

// TestAdv3CommandWhitespace: a tool policy's command entry with a stray
// space or a control character is refused (it would match no argv[0]).
func TestAdv3CommandWhitespace(t *testing.T) {
	for _, bad := range []string{`"rm "`, `" rm"`, `"rm\t"`, `"make\n"`, `"ma\u007fke"`} {
		for _, key := range []string{"allowed_commands", "blocked_commands"} {
			if _, err := ParseJSON([]byte(`{"` + key + `":[` + bad + `]}`)); err == nil {
				t.Errorf("%s [%s] accepted", key, bad)
			}
		}
	}
	if _, err := ParseJSON([]byte(`{"blocked_commands":["/opt/My Tools/rm"]}`)); err != nil {
		t.Errorf("an inner space refused: %v", err)
	}
}
