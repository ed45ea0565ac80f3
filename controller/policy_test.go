package controller

import (
	"strings"
	"testing"
	"time"

	"lemon/policies"
	"lemon/protocol"
)

func TestFromPolicy(t *testing.T) {
	pol, err := policies.ParseController([]byte(`
[[operators]]
name = "backend"
token_env = "BACKEND_TOKEN"
scopes = ["operator.read"]
[[node_tokens]]
name = "worker-1"
token_sha256 = "` + strings.Repeat("ab", 32) + `"
[limits]
requests_per_second = 3.0
`))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{EnvOperatorToken: "env-secret-1", "BACKEND_TOKEN": "backend-secret-2"}
	cfg, err := FromPolicy(pol, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Operators) != 2 || cfg.Operators[0].TokenHash != HashToken("env-secret-1") ||
		len(cfg.Operators[0].Scopes) != len(protocol.OperatorScopes) ||
		cfg.Operators[1].TokenHash != HashToken("backend-secret-2") || cfg.Operators[1].Scopes[0] != protocol.ScopeRead ||
		cfg.NodeTokens[0].TokenHash[0] != 0xab || cfg.RequestsPerSecond != 3 || cfg.Burst != 3 {
		t.Fatalf("config: %+v", cfg)
	}
	// An empty variable is named, no value printed.
	delete(env, "BACKEND_TOKEN")
	_, err = FromPolicy(pol, func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "BACKEND_TOKEN") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("err: %v", err)
	}
	// The module set is loaded and verified.
	pol.ModuleSet = t.TempDir()
	if _, err := FromPolicy(pol, func(k string) string { return "x" }); err == nil || !strings.Contains(err.Error(), "module_set") {
		t.Fatalf("missing module set: %v", err)
	}
}

// The connection limits reach the Config, and the policy's defaults are
// the controller's.
func TestFromPolicyConnectionLimits(t *testing.T) {
	pol, err := policies.ParseController([]byte(`
[limits]
max_unauthenticated = 100
max_unauthenticated_per_address = 7
handshake_timeout_ms = 1500
http_idle_timeout_ms = 2500
auth_failure_burst = 4
auth_failures_per_minute = 12.5
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := FromPolicy(pol, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxUnauthenticated != 100 || cfg.MaxUnauthenticatedPerAddress != 7 || cfg.HandshakeTimeout != 1500*time.Millisecond ||
		cfg.HTTPIdleTimeout != 2500*time.Millisecond || cfg.AuthFailureBurst != 4 || cfg.AuthFailuresPerMinute != 12.5 {
		t.Fatalf("config: %+v", cfg)
	}
	def, err := policies.ParseController(nil)
	if err != nil {
		t.Fatal(err)
	}
	l := def.Limits
	if l.MaxUnauthenticated != DefaultMaxUnauthenticated || l.MaxUnauthenticatedPerAddress != DefaultMaxUnauthenticatedPerAddress ||
		time.Duration(l.HandshakeTimeoutMs)*time.Millisecond != DefaultHandshakeTimeout ||
		time.Duration(l.HTTPIdleTimeoutMs)*time.Millisecond != DefaultHTTPIdleTimeout ||
		l.AuthFailureBurst != DefaultAuthFailureBurst || l.AuthFailuresPerMinute != DefaultAuthFailuresPerMinute {
		t.Fatalf("policy defaults %+v differ from the controller's", l)
	}
}
