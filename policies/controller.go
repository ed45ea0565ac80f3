package policies

import (
	"encoding/hex"
	"fmt"
	"net"
	"sort"
	"strings"

	"lemon/protocol"
)

// Controller is the controller policy (docs/POLICY.md), decoded strictly from
// TOML. Example:
//
//	listen = "127.0.0.1:7777"
//	max_payload = 1048576          # bytes of one frame
//	module_set = "/srv/lemon/modules"
//	state_dir = "/var/lib/lemon"   # durable node registry and pairings
//
//	[tls]
//	cert_file = "/etc/lemon/cert.pem"
//	key_file  = "/etc/lemon/key.pem"
//
//	[[operators]]
//	name = "backend"
//	token_sha256 = "<64 hex digits: sha256 of the token>"   # or token_env = "VAR"
//	scopes = ["operator.read", "operator.admin"]
//
//	[[node_tokens]]               # interim node tokens: an explicit operator choice;
//	name = "worker-1"             # pairing (node.pair.*) is the default way to join
//	token_env = "WORKER1_TOKEN"
//
//	[limits]
//	requests_per_second = 50.0    # per operator credential; 0 = unlimited
//	burst = 100
//	max_inflight = 256            # requests in flight per connection
//	max_unauthenticated = 256     # sockets not yet past connect, in all
//	max_unauthenticated_per_address = 32   # ... from one IPv4 address or IPv6 /64
//	handshake_timeout_ms = 10000  # upgrade to connect; one plain HTTP request
//	http_idle_timeout_ms = 30000  # idle keep-alive HTTP socket
//	auth_failure_burst = 10       # failed connects per address before throttling
//	auth_failures_per_minute = 30 # then regained per minute
//
// Tokens never appear in the policy in clear: either their SHA-256 (hex) or
// the name of an environment variable that holds them.
type Controller struct {
	Listen     string           `toml:"listen"`
	MaxPayload int              `toml:"max_payload"`
	ModuleSet  string           `toml:"module_set"`
	StateDir   string           `toml:"state_dir"`
	TLS        ControllerTLS    `toml:"tls"`
	Operators  []OperatorToken  `toml:"operators"`
	NodeTokens []NodeToken      `toml:"node_tokens"`
	Limits     ControllerLimits `toml:"limits"`
	source     string           // file the policy came from, for String
}

// ControllerTLS names the PEM certificate and key files; both or neither.
type ControllerTLS struct {
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
}

// OperatorToken is one operator credential: exactly one of TokenSHA256
// (64 hex digits) and TokenEnv (an environment variable name), and the
// operator scopes it grants.
type OperatorToken struct {
	Name        string   `toml:"name"`
	TokenSHA256 string   `toml:"token_sha256"`
	TokenEnv    string   `toml:"token_env"`
	Scopes      []string `toml:"scopes"`
}

// NodeToken is one interim node credential bound to a node name.
type NodeToken struct {
	Name        string `toml:"name"`
	TokenSHA256 string `toml:"token_sha256"`
	TokenEnv    string `toml:"token_env"`
}

// ControllerLimits are per-operator, per-connection and connection-level
// limits; 0 means the default. RequestsPerSecond (0 = unlimited) and Burst
// apply per operator credential; MaxInflight per connection (default
// 256). MaxUnauthenticated (default 256, 1–65536) caps the sockets that
// have not completed connect, MaxUnauthenticatedPerAddress (default 32,
// at most MaxUnauthenticated) the same per source address.
// HandshakeTimeoutMs (default 10000, 100–60000) bounds the time from
// upgrade to connect and the reading of one plain HTTP request;
// HTTPIdleTimeoutMs (default 30000, 100–600000) closes an idle
// keep-alive HTTP socket. AuthFailureBurst (default 10, 1–10000) failed
// connects from one address are checked; then AuthFailuresPerMinute
// (default 30, at most 60000) a minute, the rest are refused unchecked.
type ControllerLimits struct {
	RequestsPerSecond            float64 `toml:"requests_per_second"`
	Burst                        int     `toml:"burst"`
	MaxInflight                  int     `toml:"max_inflight"`
	MaxUnauthenticated           int     `toml:"max_unauthenticated"`
	MaxUnauthenticatedPerAddress int     `toml:"max_unauthenticated_per_address"`
	HandshakeTimeoutMs           int     `toml:"handshake_timeout_ms"`
	HTTPIdleTimeoutMs            int     `toml:"http_idle_timeout_ms"`
	AuthFailureBurst             int     `toml:"auth_failure_burst"`
	AuthFailuresPerMinute        float64 `toml:"auth_failures_per_minute"`
}

// Bounds of controller policy values.
const (
	// MinMaxPayload and MaxMaxPayload bound max_payload, in bytes.
	MinMaxPayload = 64 << 10
	MaxMaxPayload = 64 << 20
	// DefaultMaxInflight is the per-connection in-flight request bound.
	DefaultMaxInflight = 256
	// Connection-limit defaults and bounds (see ControllerLimits).
	DefaultMaxUnauthenticated           = 256
	MaxMaxUnauthenticated               = 65536
	DefaultMaxUnauthenticatedPerAddress = 32
	DefaultHandshakeTimeoutMs           = 10000
	MinHandshakeTimeoutMs               = 100
	MaxHandshakeTimeoutMs               = 60000
	DefaultHTTPIdleTimeoutMs            = 30000
	MinHTTPIdleTimeoutMs                = 100
	MaxHTTPIdleTimeoutMs                = 600000
	DefaultAuthFailureBurst             = 10
	MaxAuthFailureBurst                 = 10000
	DefaultAuthFailuresPerMinute        = 30
	MaxAuthFailuresPerMinute            = 60000
	// MaxOperators and MaxNodeTokens bound the credential lists.
	MaxOperators  = 256
	MaxNodeTokens = 4096
)

// LoadController reads, strictly decodes and validates a controller
// policy file. Errors name the offending key, never a token.
func LoadController(path string) (*Controller, error) {
	var c Controller
	if err := decodeFile(path, &c); err != nil {
		return nil, err
	}
	c.source = path
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

// ParseController strictly decodes and validates policy TOML.
func ParseController(data []byte) (*Controller, error) {
	var c Controller
	if err := decodeStrict(data, &c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks every field and fills defaults (max_payload,
// limits.max_inflight).
func (c *Controller) Validate() error {
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return fmt.Errorf("listen: not host:port")
		}
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = protocol.DefaultMaxPayload
	}
	if c.MaxPayload < MinMaxPayload || c.MaxPayload > MaxMaxPayload {
		return fmt.Errorf("max_payload: must be between %d and %d bytes", MinMaxPayload, MaxMaxPayload)
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return fmt.Errorf("tls: cert_file and key_file go together")
	}
	if len(c.Operators) > MaxOperators {
		return fmt.Errorf("operators: at most %d entries", MaxOperators)
	}
	names := map[string]bool{}
	for i := range c.Operators {
		o := &c.Operators[i]
		key := fmt.Sprintf("operators[%d]", i)
		o.Name = strings.TrimSpace(o.Name)
		if o.Name == "" || len(o.Name) > 64 {
			return fmt.Errorf("%s.name: required, at most 64 bytes", key)
		}
		if names[o.Name] {
			return fmt.Errorf("%s.name: duplicate", key)
		}
		names[o.Name] = true
		if err := checkTokenSource(key, o.TokenSHA256, o.TokenEnv); err != nil {
			return err
		}
		if len(o.Scopes) == 0 {
			return fmt.Errorf("%s.scopes: at least one operator scope", key)
		}
		for _, s := range o.Scopes {
			if !validOperatorScope(s) {
				return fmt.Errorf("%s.scopes: unknown scope (allowed: %s)", key, strings.Join(protocol.OperatorScopes, ", "))
			}
		}
	}
	if len(c.NodeTokens) > MaxNodeTokens {
		return fmt.Errorf("node_tokens: at most %d entries", MaxNodeTokens)
	}
	nodeNames := map[string]bool{}
	for i := range c.NodeTokens {
		n := &c.NodeTokens[i]
		key := fmt.Sprintf("node_tokens[%d]", i)
		name, perr := protocol.NormalizeNodeName("name", n.Name)
		if perr != nil {
			return fmt.Errorf("%s.name: %s", key, perr.Message)
		}
		n.Name = name
		if nodeNames[strings.ToLower(name)] {
			return fmt.Errorf("%s.name: duplicate (names are unique, case-insensitively)", key)
		}
		nodeNames[strings.ToLower(name)] = true
		if err := checkTokenSource(key, n.TokenSHA256, n.TokenEnv); err != nil {
			return err
		}
	}
	l := &c.Limits
	if l.RequestsPerSecond < 0 || l.Burst < 0 || l.MaxInflight < 0 || l.MaxUnauthenticated < 0 ||
		l.MaxUnauthenticatedPerAddress < 0 || l.HandshakeTimeoutMs < 0 || l.HTTPIdleTimeoutMs < 0 ||
		l.AuthFailureBurst < 0 || l.AuthFailuresPerMinute < 0 {
		return fmt.Errorf("limits: values must not be negative")
	}
	if err := l.validateConnLimits(); err != nil {
		return err
	}
	if c.Limits.RequestsPerSecond > 0 && c.Limits.Burst == 0 {
		c.Limits.Burst = max(1, int(c.Limits.RequestsPerSecond))
	}
	if c.Limits.MaxInflight == 0 {
		c.Limits.MaxInflight = DefaultMaxInflight
	}
	if c.Limits.MaxInflight > 65536 {
		return fmt.Errorf("limits.max_inflight: at most 65536")
	}
	return nil
}

// validateConnLimits fills the connection-limit defaults and checks
// their bounds.
func (l *ControllerLimits) validateConnLimits() error {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.MaxUnauthenticated, DefaultMaxUnauthenticated)
	def(&l.MaxUnauthenticatedPerAddress, min(DefaultMaxUnauthenticatedPerAddress, l.MaxUnauthenticated))
	def(&l.HandshakeTimeoutMs, DefaultHandshakeTimeoutMs)
	def(&l.HTTPIdleTimeoutMs, DefaultHTTPIdleTimeoutMs)
	def(&l.AuthFailureBurst, DefaultAuthFailureBurst)
	if l.AuthFailuresPerMinute == 0 {
		l.AuthFailuresPerMinute = DefaultAuthFailuresPerMinute
	}
	switch {
	case l.MaxUnauthenticated > MaxMaxUnauthenticated:
		return fmt.Errorf("limits.max_unauthenticated: at most %d", MaxMaxUnauthenticated)
	case l.MaxUnauthenticatedPerAddress > l.MaxUnauthenticated:
		return fmt.Errorf("limits.max_unauthenticated_per_address: at most max_unauthenticated (%d)", l.MaxUnauthenticated)
	case l.HandshakeTimeoutMs < MinHandshakeTimeoutMs || l.HandshakeTimeoutMs > MaxHandshakeTimeoutMs:
		return fmt.Errorf("limits.handshake_timeout_ms: must be between %d and %d", MinHandshakeTimeoutMs, MaxHandshakeTimeoutMs)
	case l.HTTPIdleTimeoutMs < MinHTTPIdleTimeoutMs || l.HTTPIdleTimeoutMs > MaxHTTPIdleTimeoutMs:
		return fmt.Errorf("limits.http_idle_timeout_ms: must be between %d and %d", MinHTTPIdleTimeoutMs, MaxHTTPIdleTimeoutMs)
	case l.AuthFailureBurst > MaxAuthFailureBurst:
		return fmt.Errorf("limits.auth_failure_burst: at most %d", MaxAuthFailureBurst)
	case l.AuthFailuresPerMinute > MaxAuthFailuresPerMinute:
		return fmt.Errorf("limits.auth_failures_per_minute: at most %d", MaxAuthFailuresPerMinute)
	}
	return nil
}

func checkTokenSource(key, sha, env string) error {
	switch {
	case sha != "" && env != "":
		return fmt.Errorf("%s: token_sha256 and token_env conflict; give one", key)
	case sha == "" && env == "":
		return fmt.Errorf("%s: token_sha256 or token_env is required", key)
	case sha != "":
		b, err := hex.DecodeString(sha)
		if err != nil || len(b) != 32 {
			return fmt.Errorf("%s.token_sha256: must be 64 hex digits", key)
		}
	default:
		if !validEnvName(env) {
			return fmt.Errorf("%s.token_env: not an environment variable name", key)
		}
	}
	return nil
}

func validEnvName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i, r := range s {
		ok := r == '_' || (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z') || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}

func validOperatorScope(s string) bool {
	for _, o := range protocol.OperatorScopes {
		if s == o {
			return true
		}
	}
	return false
}

// String prints the effective policy as TOML. Token hashes are shortened
// to their first 8 hex digits; environment variable names are printed, not
// their values.
func (c *Controller) String() string {
	var b strings.Builder
	if c.source != "" {
		fmt.Fprintf(&b, "# effective controller policy from %s\n", c.source)
	}
	fmt.Fprintf(&b, "listen = %q\n", c.Listen)
	fmt.Fprintf(&b, "max_payload = %d\n", c.MaxPayload)
	fmt.Fprintf(&b, "module_set = %q\n", c.ModuleSet)
	fmt.Fprintf(&b, "state_dir = %q\n", c.StateDir)
	fmt.Fprintf(&b, "\n[tls]\ncert_file = %q\nkey_file = %q\n", c.TLS.CertFile, c.TLS.KeyFile)
	fmt.Fprintf(&b, "\n[limits]\nrequests_per_second = %g\nburst = %d\nmax_inflight = %d\n",
		c.Limits.RequestsPerSecond, c.Limits.Burst, c.Limits.MaxInflight)
	fmt.Fprintf(&b, "max_unauthenticated = %d\nmax_unauthenticated_per_address = %d\nhandshake_timeout_ms = %d\n"+
		"http_idle_timeout_ms = %d\nauth_failure_burst = %d\nauth_failures_per_minute = %g\n",
		c.Limits.MaxUnauthenticated, c.Limits.MaxUnauthenticatedPerAddress, c.Limits.HandshakeTimeoutMs,
		c.Limits.HTTPIdleTimeoutMs, c.Limits.AuthFailureBurst, c.Limits.AuthFailuresPerMinute)
	for _, o := range c.Operators {
		scopes := append([]string(nil), o.Scopes...)
		sort.Strings(scopes)
		fmt.Fprintf(&b, "\n[[operators]]\nname = %q\n%s\nscopes = [%s]\n", o.Name,
			tokenSourceLine(o.TokenSHA256, o.TokenEnv), quoteList(scopes))
	}
	for _, n := range c.NodeTokens {
		fmt.Fprintf(&b, "\n[[node_tokens]]\nname = %q\n%s\n", n.Name, tokenSourceLine(n.TokenSHA256, n.TokenEnv))
	}
	return b.String()
}

func tokenSourceLine(sha, env string) string {
	if sha != "" {
		return fmt.Sprintf("token_sha256 = %q # shortened", strings.ToLower(sha[:8])+"…")
	}
	return fmt.Sprintf("token_env = %q", env)
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}
