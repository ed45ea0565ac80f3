package controller

import (
	"crypto/tls"
	"fmt"
	"time"

	"lemon/policies"
	"lemon/protocol"
)

// EnvOperatorToken names the environment variable holding an operator
// token that is granted every operator scope.
const EnvOperatorToken = "LEMON_CONTROL_PLANE_OPERATOR_TOKEN"

// FromPolicy builds a Config from a validated controller policy. getenv
// resolves EnvOperatorToken and every token_env; an empty variable named
// by the policy is an error that names the variable (never a value). The
// module set is loaded and verified; the TLS key pair is loaded.
func FromPolicy(p *policies.Controller, getenv func(string) string) (Config, error) {
	cfg := Config{
		MaxPayload:        p.MaxPayload,
		MaxInflight:       p.Limits.MaxInflight,
		RequestsPerSecond: p.Limits.RequestsPerSecond,
		Burst:             p.Limits.Burst,
		StateDir:          p.StateDir,

		MaxUnauthenticated:           p.Limits.MaxUnauthenticated,
		MaxUnauthenticatedPerAddress: p.Limits.MaxUnauthenticatedPerAddress,
		HandshakeTimeout:             time.Duration(p.Limits.HandshakeTimeoutMs) * time.Millisecond,
		HTTPIdleTimeout:              time.Duration(p.Limits.HTTPIdleTimeoutMs) * time.Millisecond,
		AdmissionWait:                time.Duration(p.Limits.AdmissionWaitMs) * time.Millisecond,
		AuthFailureBurst:             p.Limits.AuthFailureBurst,
		AuthFailuresPerMinute:        p.Limits.AuthFailuresPerMinute,

		ApprovalTimeout:                 time.Duration(p.Limits.ApprovalTimeoutMs) * time.Millisecond,
		MaxPendingApprovals:             p.Limits.MaxPendingApprovals,
		MaxPendingApprovalsPerPrincipal: p.Limits.MaxPendingApprovalsPerPrincipal,
	}
	if tok := getenv(EnvOperatorToken); tok != "" {
		cfg.Operators = append(cfg.Operators, OperatorCredential{
			Name: "env", TokenHash: HashToken(tok), Scopes: append([]string(nil), protocol.OperatorScopes...),
		})
	}
	for i, o := range p.Operators {
		h, err := resolveToken(fmt.Sprintf("operators[%d]", i), o.TokenSHA256, o.TokenEnv, getenv)
		if err != nil {
			return Config{}, err
		}
		op := o.OperatorPolicy()
		cfg.Operators = append(cfg.Operators, OperatorCredential{Name: o.Name, TokenHash: h, Scopes: o.Scopes, Policy: &op})
	}
	for i, n := range p.NodeTokens {
		h, err := resolveToken(fmt.Sprintf("node_tokens[%d]", i), n.TokenSHA256, n.TokenEnv, getenv)
		if err != nil {
			return Config{}, err
		}
		cfg.NodeTokens = append(cfg.NodeTokens, NodeCredential{Name: n.Name, TokenHash: h})
	}
	if p.ModuleSet != "" {
		ms, err := LoadModuleSetDir(p.ModuleSet)
		if err != nil {
			return Config{}, fmt.Errorf("module_set: %w", err)
		}
		cfg.ModuleSet = ms
	}
	if p.TLS.CertFile != "" {
		tc, err := LoadTLS(p.TLS.CertFile, p.TLS.KeyFile)
		if err != nil {
			return Config{}, err
		}
		cfg.TLS = tc
	}
	return cfg, nil
}

// LoadTLS loads a PEM certificate and key into a TLS 1.2+ server config.
func LoadTLS(certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: cannot load the certificate and key")
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}

func resolveToken(key, sha, env string, getenv func(string) string) ([32]byte, error) {
	if sha != "" {
		return ParseTokenHash(sha)
	}
	tok := getenv(env)
	if tok == "" {
		return [32]byte{}, fmt.Errorf("%s: environment variable %s is empty or unset", key, env)
	}
	return HashToken(tok), nil
}
