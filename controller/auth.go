package controller

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"

	"golang.org/x/time/rate"

	"lemon/policies/authority"
	"lemon/protocol"
)

// OperatorCredential is one operator token, held only as its SHA-256, the
// operator scopes it grants (operator.admin implies the others), and its
// authority (docs/POLICY.md, "Operator policies"): nil is full_access.
// Name is the principal of every request made with it.
type OperatorCredential struct {
	Name      string
	TokenHash [32]byte
	Scopes    []string
	Policy    *authority.OperatorPolicy
}

// NodeCredential is one interim node token (held as its SHA-256) bound to
// a node name. Interim tokens are an explicit operator choice; pairing is
// the default way for a node to join.
type NodeCredential struct {
	Name      string
	TokenHash [32]byte
}

// HashToken returns the SHA-256 of a token, the only form a credential is stored in.
func HashToken(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// ParseTokenHash parses 64 hex digits into a token hash.
func ParseTokenHash(s string) ([32]byte, error) {
	var h [32]byte
	b, err := hex.DecodeString(strings.ToLower(s))
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("token hash must be 64 hex digits")
	}
	copy(h[:], b)
	return h, nil
}

// MaxTokenBytes bounds a presented token; a longer one is refused unread.
const MaxTokenBytes = 4096

type operatorEntry struct {
	name    string
	hash    [32]byte
	scopes  []string
	policy  authority.OperatorPolicy
	limiter *rate.Limiter // nil: unlimited
}

type authenticator struct {
	ops   []*operatorEntry
	nodes []NodeCredential
}

func newAuthenticator(ops []OperatorCredential, nodes []NodeCredential, lim func() *rate.Limiter) (*authenticator, error) {
	a := &authenticator{}
	seen := map[[32]byte]bool{}
	principals := map[string]bool{}
	for _, o := range ops {
		if seen[o.TokenHash] {
			return nil, fmt.Errorf("controller: operator credential %q repeats another token", o.Name)
		}
		seen[o.TokenHash] = true
		if !authority.ValidPrincipal(o.Name) {
			// Every node request builds a context with this principal.
			return nil, fmt.Errorf("controller: an operator credential name must be 1 to %d bytes without control characters", authority.MaxPrincipalBytes)
		}
		// The name is the principal of the entry's requests (approvals,
		// run ownership): two entries may not share one.
		if principals[o.Name] {
			return nil, fmt.Errorf("controller: operator credential name %q repeats another (the %s environment token is named %q)",
				o.Name, EnvOperatorToken, "env")
		}
		principals[o.Name] = true
		for _, sc := range o.Scopes {
			if !isOperatorScope(sc) {
				return nil, fmt.Errorf("controller: operator credential %q: unknown scope", o.Name)
			}
		}
		e := &operatorEntry{name: o.Name, hash: o.TokenHash, scopes: append([]string(nil), o.Scopes...),
			policy: authority.FullAccessOperator()}
		if o.Policy != nil {
			e.policy = *o.Policy
		}
		if lim != nil {
			e.limiter = lim()
		}
		a.ops = append(a.ops, e)
	}
	names := map[string]bool{}
	for _, n := range nodes {
		if seen[n.TokenHash] {
			return nil, fmt.Errorf("controller: node token %q repeats another token", n.Name)
		}
		seen[n.TokenHash] = true
		name, perr := protocol.NormalizeNodeName("name", n.Name)
		if perr != nil {
			return nil, fmt.Errorf("controller: node token name: %s", perr.Message)
		}
		if names[strings.ToLower(name)] {
			return nil, fmt.Errorf("controller: node token name %q repeated", name)
		}
		names[strings.ToLower(name)] = true
		a.nodes = append(a.nodes, NodeCredential{Name: name, TokenHash: n.TokenHash})
	}
	return a, nil
}

func (a *authenticator) hasOperators() bool { return len(a.ops) > 0 }

// operator finds the operator credential of token. Every entry is compared
// in constant time, so timing does not reveal which (if any) matched.
func (a *authenticator) operator(token string) (*operatorEntry, *protocol.Error) {
	if len(a.ops) == 0 {
		return nil, protocol.DomainError(protocol.CodeUnauthorized, protocol.DomainAuthNotConfigured,
			"the controller has no operator authentication configured")
	}
	if token == "" {
		return nil, protocol.DomainError(protocol.CodeUnauthorized, protocol.DomainOperatorAuthMissing,
			"an operator token is required")
	}
	if len(token) > MaxTokenBytes {
		return nil, protocol.DomainError(protocol.CodeUnauthorized, protocol.DomainOperatorAuthInvalid,
			"the operator token was not accepted")
	}
	h := HashToken(token)
	var found *operatorEntry
	for _, e := range a.ops {
		if subtle.ConstantTimeCompare(h[:], e.hash[:]) == 1 {
			found = e
		}
	}
	if found == nil {
		return nil, protocol.DomainError(protocol.CodeUnauthorized, protocol.DomainOperatorAuthInvalid,
			"the operator token was not accepted")
	}
	return found, nil
}

// nodeToken finds the interim node credential of token, in constant time.
func (a *authenticator) nodeToken(h [32]byte) (NodeCredential, bool) {
	var found NodeCredential
	ok := false
	for _, n := range a.nodes {
		if subtle.ConstantTimeCompare(h[:], n.TokenHash[:]) == 1 {
			found, ok = n, true
		}
	}
	return found, ok
}

func isOperatorScope(s string) bool {
	for _, o := range protocol.OperatorScopes {
		if s == o {
			return true
		}
	}
	return false
}

// grantScopes returns the scopes a connection holds: all the credential's
// scopes when none were requested, else the requested scopes the
// credential covers (operator.admin covers every operator scope).
func grantScopes(cred []string, requested []string) ([]string, *protocol.Error) {
	if len(requested) == 0 {
		return append([]string(nil), cred...), nil
	}
	if len(requested) > 16 {
		return nil, protocol.InvalidParams("scopes", "too many scopes requested")
	}
	var out []string
	seen := map[string]bool{}
	for _, r := range requested {
		if !isOperatorScope(r) {
			return nil, protocol.InvalidParams("scopes", "unknown scope requested")
		}
		if protocol.HasScope(cred, r) && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil, protocol.Errorf(protocol.CodeForbidden, "none of the requested scopes is granted to this credential")
	}
	return out, nil
}
