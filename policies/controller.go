package policies

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"

	"lemon/policies/authority"
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
//	[operators.policy]            # this entry's authority (docs/POLICY.md,
//	profile = "read_only"         # "Operator policies"); absent = full_access
//	capabilities = ["read", "hostinfo"]
//	[operators.policy.workspace]
//	root = "/srv/ws"
//	mode = "read_only"
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
//	admission_wait_ms = 0         # a socket past a cap waits for a slot (0: closed at once)
//	auth_failure_burst = 10       # failed connects per address before throttling
//	auth_failures_per_minute = 30 # then regained per minute
//	approval_timeout_ms = 300000  # a held request waits at most this long
//	max_pending_approvals = 64    # held requests in all
//	max_pending_approvals_per_principal = 8
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
// (64 hex digits) and TokenEnv (an environment variable name), the
// operator scopes it grants, and its policy table ([operators.policy]:
// the tool-policy keys plus capabilities and [workspace] root/mode),
// parsed strictly by Validate; absent is full_access.
type OperatorToken struct {
	Name        string      `toml:"name"`
	TokenSHA256 string      `toml:"token_sha256"`
	TokenEnv    string      `toml:"token_env"`
	Scopes      []string    `toml:"scopes"`
	Policy      PolicyTable `toml:"policy"`
	parsed      *authority.OperatorPolicy
}

// PolicyTable is a TOML table kept as decoded (string, bool, int64,
// float64, []any, map[string]any) for the authority package's strict
// parser, which reports unknown keys itself.
type PolicyTable map[string]any

// UnmarshalTOML takes the table whole.
func (t *PolicyTable) UnmarshalTOML(v any) error {
	m, ok := v.(map[string]any)
	if !ok {
		return errors.New("policy: must be a table")
	}
	*t = m
	return nil
}

// OperatorPolicy returns the entry's validated policy (full_access when
// the table is absent). Call it only on a validated Controller.
func (o OperatorToken) OperatorPolicy() authority.OperatorPolicy {
	if o.parsed == nil {
		return authority.FullAccessOperator()
	}
	return *o.parsed
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
	// AdmissionWaitMs (default 0: off, at most 10000): a socket past
	// either unauthenticated cap waits this long for a slot before it is
	// closed, up to 16 × MaxUnauthenticated sockets at once, each holding
	// a descriptor (docs/SCALE.md, "The reconnect herd").
	AdmissionWaitMs int `toml:"admission_wait_ms"`
	// ApprovalTimeoutMs bounds how long a request held for approval waits
	// (default 300000, 1000–3600000); MaxPendingApprovals (default 64,
	// 1–4096) and MaxPendingApprovalsPerPrincipal (default 8, at most
	// MaxPendingApprovals) bound the requests held at once.
	ApprovalTimeoutMs               int `toml:"approval_timeout_ms"`
	MaxPendingApprovals             int `toml:"max_pending_approvals"`
	MaxPendingApprovalsPerPrincipal int `toml:"max_pending_approvals_per_principal"`
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
	MaxAdmissionWaitMs                  = 10000
	// Approval bounds (see ControllerLimits).
	DefaultApprovalTimeoutMs               = 300000
	MinApprovalTimeoutMs                   = 1000
	MaxApprovalTimeoutMs                   = 3600000
	DefaultMaxPendingApprovals             = 64
	MaxMaxPendingApprovals                 = 4096
	DefaultMaxPendingApprovalsPerPrincipal = 8
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
		o.parsed = nil
		if o.Policy != nil {
			op, err := authority.ParseOperatorPolicy(o.Policy)
			if err != nil {
				var pe *authority.ParseError
				if errors.As(err, &pe) && pe.Key != "" {
					return fmt.Errorf("%s (%s).policy.%s: %s", key, o.Name, pe.Key, pe.Reason)
				}
				return fmt.Errorf("%s (%s).policy: %v", key, o.Name, err)
			}
			if err := checkApprovalSelectors(op); err != nil {
				return fmt.Errorf("%s (%s).policy.%v", key, o.Name, err)
			}
			o.parsed = &op
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
		l.AuthFailureBurst < 0 || l.AuthFailuresPerMinute < 0 || l.ApprovalTimeoutMs < 0 ||
		l.MaxPendingApprovals < 0 || l.MaxPendingApprovalsPerPrincipal < 0 || l.AdmissionWaitMs < 0 {
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
	def(&l.ApprovalTimeoutMs, DefaultApprovalTimeoutMs)
	def(&l.MaxPendingApprovals, DefaultMaxPendingApprovals)
	def(&l.MaxPendingApprovalsPerPrincipal, min(DefaultMaxPendingApprovalsPerPrincipal, l.MaxPendingApprovals))
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
	case l.AdmissionWaitMs > MaxAdmissionWaitMs:
		return fmt.Errorf("limits.admission_wait_ms: at most %d", MaxAdmissionWaitMs)
	case l.AuthFailureBurst > MaxAuthFailureBurst:
		return fmt.Errorf("limits.auth_failure_burst: at most %d", MaxAuthFailureBurst)
	case l.AuthFailuresPerMinute > MaxAuthFailuresPerMinute:
		return fmt.Errorf("limits.auth_failures_per_minute: at most %d", MaxAuthFailuresPerMinute)
	case l.ApprovalTimeoutMs < MinApprovalTimeoutMs || l.ApprovalTimeoutMs > MaxApprovalTimeoutMs:
		return fmt.Errorf("limits.approval_timeout_ms: must be between %d and %d", MinApprovalTimeoutMs, MaxApprovalTimeoutMs)
	case l.MaxPendingApprovals > MaxMaxPendingApprovals:
		return fmt.Errorf("limits.max_pending_approvals: at most %d", MaxMaxPendingApprovals)
	case l.MaxPendingApprovalsPerPrincipal > l.MaxPendingApprovals:
		return fmt.Errorf("limits.max_pending_approvals_per_principal: at most max_pending_approvals (%d)", l.MaxPendingApprovals)
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
	fmt.Fprintf(&b, "approval_timeout_ms = %d\nmax_pending_approvals = %d\nmax_pending_approvals_per_principal = %d\n",
		c.Limits.ApprovalTimeoutMs, c.Limits.MaxPendingApprovals, c.Limits.MaxPendingApprovalsPerPrincipal)
	for _, o := range c.Operators {
		scopes := append([]string(nil), o.Scopes...)
		sort.Strings(scopes)
		fmt.Fprintf(&b, "\n[[operators]]\nname = %q\n%s\nscopes = [%s]\n", o.Name,
			tokenSourceLine(o.TokenSHA256, o.TokenEnv), quoteList(scopes))
		if o.parsed == nil {
			b.WriteString("# no [operators.policy]: full_access\n")
		} else {
			fmt.Fprintf(&b, "[operators.policy]\n%s", o.OperatorPolicy().String())
		}
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

// controllerOnly are the controller's own methods and namespaces: the
// controller never holds them for approval (docs/POLICY.md, "Controller
// methods"), so an approval selector that can name only them is an error.
var controllerOnly = []string{protocol.MethodNodeRename, protocol.MethodNodeList, protocol.MethodNodeDescribe,
	protocol.MethodNodeInvoke, protocol.MethodNodeFanout, protocol.MethodModulesStatus, protocol.MethodApprovalList, protocol.MethodApprovalDecide,
	"node.pair.*", "approval.*", "connect.*"}

func checkApprovalSelectors(op authority.OperatorPolicy) error {
	check := func(key, sel string) error {
		for _, c := range controllerOnly {
			if sel == c || (strings.HasSuffix(c, ".*") && strings.HasPrefix(sel, strings.TrimSuffix(c, "*"))) {
				return fmt.Errorf("%s: %s names only controller methods, which are never held for approval (deny them instead)", key, sel)
			}
		}
		return nil
	}
	for _, sel := range op.Policy.RequireApproval {
		if err := check("require_approval", sel); err != nil {
			return err
		}
	}
	for _, sel := range op.Policy.ApproveOnce {
		if err := check("approvals."+sel, sel); err != nil {
			return err
		}
	}
	return nil
}
