package policies

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goodHash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func TestControllerPolicyValid(t *testing.T) {
	src := `
listen = "127.0.0.1:7777"
max_payload = 2097152
module_set = "/srv/modules"
state_dir = "/var/lib/lemon"
[tls]
cert_file = "c.pem"
key_file = "k.pem"
[[operators]]
name = "backend"
token_sha256 = "` + goodHash + `"
scopes = ["operator.read", "operator.admin"]
[[operators]]
name = "ci"
token_env = "CI_TOKEN"
scopes = ["operator.pairing"]
[[node_tokens]]
name = "  worker-1 "
token_env = "W1"
[limits]
requests_per_second = 5.0
max_inflight = 10
`
	c, err := ParseController([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxPayload != 2097152 || c.NodeTokens[0].Name != "worker-1" || c.Limits.Burst != 5 || c.Limits.MaxInflight != 10 ||
		len(c.Operators) != 2 || c.Operators[1].TokenEnv != "CI_TOKEN" {
		t.Fatalf("decoded: %+v", c)
	}
	out := c.String()
	for _, want := range []string{`listen = "127.0.0.1:7777"`, `token_env = "CI_TOKEN"`, `name = "worker-1"`, "max_inflight = 10", `"operator.admin", "operator.read"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("String lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, goodHash) {
		t.Fatal("String prints the full token hash")
	}
}

func TestControllerPolicyDefaults(t *testing.T) {
	c, err := ParseController(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxPayload != 1<<20 || c.Limits.MaxInflight != DefaultMaxInflight || c.Limits.RequestsPerSecond != 0 {
		t.Fatalf("defaults: %+v", c)
	}
	want := ControllerLimits{MaxInflight: DefaultMaxInflight, MaxUnauthenticated: 256, MaxUnauthenticatedPerAddress: 32,
		HandshakeTimeoutMs: 10000, HTTPIdleTimeoutMs: 30000, AuthFailureBurst: 10, AuthFailuresPerMinute: 30,
		ApprovalTimeoutMs: 300000, MaxPendingApprovals: 64, MaxPendingApprovalsPerPrincipal: 8}
	if c.Limits != want {
		t.Fatalf("limits defaults: %+v, want %+v", c.Limits, want)
	}
	for _, line := range []string{"max_unauthenticated = 256", "max_unauthenticated_per_address = 32", "handshake_timeout_ms = 10000",
		"http_idle_timeout_ms = 30000", "auth_failure_burst = 10", "auth_failures_per_minute = 30"} {
		if !strings.Contains(c.String(), line+"\n") {
			t.Fatalf("effective policy lacks %q:\n%s", line, c.String())
		}
	}
	// A cap below the per-address default lowers that default with it.
	c, err = ParseController([]byte("[limits]\nmax_unauthenticated = 8\n"))
	if err != nil || c.Limits.MaxUnauthenticatedPerAddress != 8 {
		t.Fatalf("per-address default under a cap of 8: %v %+v", err, c)
	}
}

func TestControllerPolicyErrors(t *testing.T) {
	op := func(extra string) string {
		return "[[operators]]\nname = \"a\"\nscopes = [\"operator.read\"]\n" + extra
	}
	cases := []struct{ name, src, want string }{
		{"unknown key", "listen = \"127.0.0.1:1\"\nlisten_port = 3\n", "listen_port"},
		{"unknown nested key", "[tls]\ncert = \"x\"\n", "tls.cert"},
		{"wrong type", "max_payload = \"big\"\n", "max_payload"},
		{"payload below min", "max_payload = 65535\n", "max_payload"},
		{"payload at min", "max_payload = 65536\n", ""},
		{"payload at max", "max_payload = 67108864\n", ""},
		{"payload above max", "max_payload = 67108865\n", "max_payload"},
		{"bad listen", "listen = \"nope\"\n", "listen"},
		{"tls half", "[tls]\ncert_file = \"c\"\n", "tls"},
		{"no token", op(""), "token_sha256 or token_env"},
		{"both token forms", op("token_sha256 = \"" + goodHash + "\"\ntoken_env = \"X\"\n"), "conflict"},
		{"short hash", op("token_sha256 = \"abcd\"\n"), "64 hex"},
		{"bad env name", op("token_env = \"1X\"\n"), "token_env"},
		{"bad scope", "[[operators]]\nname = \"a\"\ntoken_env = \"X\"\nscopes = [\"operator.root\"]\n", "unknown scope"},
		{"no scopes", "[[operators]]\nname = \"a\"\ntoken_env = \"X\"\n", "scopes"},
		{"dup operator", op("token_env = \"X\"\n") + op("token_env = \"Y\"\n"), "duplicate"},
		{"dup node name", "[[node_tokens]]\nname = \"W\"\ntoken_env = \"X\"\n[[node_tokens]]\nname = \" w \"\ntoken_env = \"Y\"\n", "duplicate"},
		{"empty node name", "[[node_tokens]]\nname = \"  \"\ntoken_env = \"X\"\n", "name"},
		{"negative limit", "[limits]\nburst = -1\n", "negative"},
		{"negative conn limit", "[limits]\nauth_failures_per_minute = -1.0\n", "negative"},
		{"unauth at max", "[limits]\nmax_unauthenticated = 65536\n", ""},
		{"unauth above max", "[limits]\nmax_unauthenticated = 65537\n", "max_unauthenticated"},
		{"per address at cap", "[limits]\nmax_unauthenticated = 64\nmax_unauthenticated_per_address = 64\n", ""},
		{"per address above cap", "[limits]\nmax_unauthenticated = 64\nmax_unauthenticated_per_address = 65\n", "max_unauthenticated_per_address"},
		{"handshake below min", "[limits]\nhandshake_timeout_ms = 99\n", "handshake_timeout_ms"},
		{"handshake at min", "[limits]\nhandshake_timeout_ms = 100\n", ""},
		{"handshake at max", "[limits]\nhandshake_timeout_ms = 60000\n", ""},
		{"handshake above max", "[limits]\nhandshake_timeout_ms = 60001\n", "handshake_timeout_ms"},
		{"idle below min", "[limits]\nhttp_idle_timeout_ms = 99\n", "http_idle_timeout_ms"},
		{"idle at min", "[limits]\nhttp_idle_timeout_ms = 100\n", ""},
		{"idle at max", "[limits]\nhttp_idle_timeout_ms = 600000\n", ""},
		{"idle above max", "[limits]\nhttp_idle_timeout_ms = 600001\n", "http_idle_timeout_ms"},
		{"auth burst at max", "[limits]\nauth_failure_burst = 10000\n", ""},
		{"auth burst above max", "[limits]\nauth_failure_burst = 10001\n", "auth_failure_burst"},
		{"auth rate at max", "[limits]\nauth_failures_per_minute = 60000.0\n", ""},
		{"auth rate above max", "[limits]\nauth_failures_per_minute = 60000.5\n", "auth_failures_per_minute"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseController([]byte(tc.src))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want error containing %q, got %v", tc.want, err)
			}
		})
	}
}

func TestLoadControllerNamesFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.toml")
	os.WriteFile(p, []byte("bogus = 1\n"), 0o600)
	_, err := LoadController(p)
	if err == nil || !strings.Contains(err.Error(), "bogus") || !strings.Contains(err.Error(), p) {
		t.Fatalf("err: %v", err)
	}
	os.WriteFile(p, []byte("listen = \"127.0.0.1:9\"\n"), 0o600)
	c, err := LoadController(p)
	if err != nil || !strings.Contains(c.String(), p) {
		t.Fatalf("load: %v", err)
	}
}

func TestOperatorPolicyTable(t *testing.T) {
	head := "[[operators]]\nname = \"ci\"\ntoken_sha256 = \"" + goodHash + "\"\nscopes = [\"operator.admin\"]\n"
	c, err := ParseController([]byte(head + `
[operators.policy]
profile = "minimal_core"
allowed_commands = ["make"]
max_timeout_ms = 60000
capabilities = ["exec", "read"]
[operators.policy.workspace]
root = "/srv/ci"
[operators.policy.approvals]
"node.fs.write" = "once"
`))
	if err != nil {
		t.Fatal(err)
	}
	op := c.Operators[0].OperatorPolicy()
	if op.Workspace == nil || op.Workspace.Root != "/srv/ci" || op.Workspace.Mode != "read_write" ||
		strings.Join(op.Capabilities, ",") != "exec,read" || op.Policy.Limits.MaxTimeoutMs != 60000 ||
		strings.Join(op.Policy.AllowedCommands, ",") != "make" || op.Policy.Profile != "minimal_core" {
		t.Fatalf("operator policy %+v", op)
	}
	if !strings.Contains(c.String(), "[operators.policy]\n") || !strings.Contains(c.String(), `allowed_commands = ["make"]`) {
		t.Fatalf("String lacks the policy:\n%s", c.String())
	}
	// The effective policy printed is a policy that parses to the same.
	again, err := ParseController([]byte(strings.ReplaceAll(c.String(), `token_sha256 = "9f86d081…" # shortened`, `token_sha256 = "`+goodHash+`"`)))
	if err != nil {
		t.Fatalf("String does not parse: %v\n%s", err, c.String())
	}
	if got := again.Operators[0].OperatorPolicy(); !got.Policy.Equal(op.Policy) || got.Workspace == nil ||
		*got.Workspace != *op.Workspace || strings.Join(got.Capabilities, ",") != "exec,read" {
		t.Fatalf("reparsed %+v", got)
	}
	// Absent is full access, and is printed as such.
	c, err = ParseController([]byte(head))
	if err != nil {
		t.Fatal(err)
	}
	if op := c.Operators[0].OperatorPolicy(); op.Capabilities != nil || op.Workspace != nil || op.Policy.Allow != nil {
		t.Fatalf("absent policy: %+v", op)
	}
	if !strings.Contains(c.String(), "no [operators.policy]: full_access") {
		t.Fatal("String does not say full_access")
	}
	// Malformed refuses the whole policy, naming the entry and the key.
	for body, want := range map[string]string{
		"[operators.policy]\nprofile = \"root\"":                      "operators[0] (ci).policy.profile: unknown profile",
		"[operators.policy]\nallow = [\"capability:exec\"]":           "operators[0] (ci).policy.allow[0]: allow takes",
		"[operators.policy]\nallowed_commands = [\"all\"]":            `operators[0] (ci).policy.allowed_commands[0]: "all" is not a list item`,
		"[operators.policy]\ncapabilities = [\"all\"]":                "operators[0] (ci).policy.capabilities[0]: malformed",
		"[operators.policy]\ncapabilities = \"some\"":                 "operators[0] (ci).policy.capabilities: must be",
		"[operators.policy]\nsudo = true":                             "operators[0] (ci).policy.sudo: unknown key",
		"[operators.policy.workspace]\nroot = \"rel\"":                "operators[0] (ci).policy.workspace.root: must be a clean absolute path",
		"[operators.policy.workspace]\nroot = \"/a\"\nmode = \"rw\"":  "operators[0] (ci).policy.workspace.mode",
		"[operators.policy.workspace]\nmode = \"read_only\"":          "operators[0] (ci).policy.workspace.root: required",
		"[operators.policy.approvals]\n\"node.fs.write\" = \"twice\"": "operators[0] (ci).policy.approvals.node.fs.write: unsupported approval mode",
		"[operators.policy]\nrequire_approval = [\"node.rename\"]":    "operators[0] (ci).policy.require_approval: node.rename names only controller methods",
		"[operators.policy.approvals]\n\"node.pair.*\" = \"once\"":    "operators[0] (ci).policy.approvals.node.pair.*: node.pair.* names only controller methods",
		"[operators.policy]\nmax_timeout_ms = -1":                     "operators[0] (ci).policy.max_timeout_ms: must be an integer",
		"[operators.policy]\ndeny = [\"node.fs.read\"]\nDeny = []":    "operators[0] (ci).policy.Deny: conflicts with key deny",
	} {
		if _, err := ParseController([]byte(head + body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", body, err, want)
		}
	}
}

func TestApprovalLimits(t *testing.T) {
	for body, want := range map[string]string{
		"approval_timeout_ms = 1000":                                         "",
		"approval_timeout_ms = 999":                                          "limits.approval_timeout_ms: must be between 1000 and 3600000",
		"approval_timeout_ms = 3600000":                                      "",
		"approval_timeout_ms = 3600001":                                      "limits.approval_timeout_ms",
		"max_pending_approvals = 4096":                                       "",
		"max_pending_approvals = 4097":                                       "limits.max_pending_approvals: at most 4096",
		"max_pending_approvals = 2":                                          "",
		"max_pending_approvals = 2\nmax_pending_approvals_per_principal = 3": "limits.max_pending_approvals_per_principal: at most max_pending_approvals (2)",
		"max_pending_approvals_per_principal = -1":                           "limits: values must not be negative",
	} {
		_, err := ParseController([]byte("[limits]\n" + body))
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: err = %v, want %q", body, err, want)
		}
	}
	c, _ := ParseController([]byte("[limits]\nmax_pending_approvals = 2"))
	if c.Limits.MaxPendingApprovalsPerPrincipal != 2 {
		t.Fatalf("per-principal default not capped: %d", c.Limits.MaxPendingApprovalsPerPrincipal)
	}
}

// admission_wait_ms at its bound passes, one past fails; it is off by default.
func TestAdmissionWaitBounds(t *testing.T) {
	c, err := ParseController([]byte("[limits]\nadmission_wait_ms = 10000\n"))
	if err != nil || c.Limits.AdmissionWaitMs != MaxAdmissionWaitMs {
		t.Fatalf("at the bound: %v", err)
	}
	if _, err := ParseController([]byte("[limits]\nadmission_wait_ms = 10001\n")); err == nil || !strings.Contains(err.Error(), "admission_wait_ms") {
		t.Fatalf("one past the bound: %v", err)
	}
	if _, err := ParseController([]byte("[limits]\nadmission_wait_ms = -1\n")); err == nil {
		t.Fatal("a negative wait was accepted")
	}
	if c, err := ParseController(nil); err != nil || c.Limits.AdmissionWaitMs != 0 {
		t.Fatalf("default: %v", err)
	}
}
