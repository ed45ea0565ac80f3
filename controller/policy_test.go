package controller

import (
	"strings"
	"testing"

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
