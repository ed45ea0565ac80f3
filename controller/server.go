// Package controller is the control plane's /ws server (docs/PROTOCOL.md):
// the connect/hello-ok handshake, operator authentication and scopes, the
// node registry (online/offline, durable node IDs, unique trimmed names),
// routing of node methods to the node's pinned live connection as
// node.invoke.request events and node.invoke.result replies, deadlines and
// cancellation, payload limits, and serving the pinned module set to nodes.
//
// Use New with a Config, then Serve on a listener (or mount Handler on your
// own HTTP server), and Close to stop. Every WebSocket has one writer
// goroutine; requests on one connection are handled concurrently.
package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/time/rate"

	"lemon/audit"
	"lemon/protocol"
)

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	// Operators are the operator credentials (token hashes and scopes).
	Operators []OperatorCredential
	// NodeTokens are the interim node credentials, bound to node names.
	NodeTokens []NodeCredential
	// MaxPayload is the largest frame accepted, in bytes (default 1 MiB).
	MaxPayload int
	// MaxBufferedBytes bounds the bytes queued for one connection's writer
	// (default 16 MiB, at least MaxPayload). A frame that does not fit
	// waits for room; see SlowConsumerTimeout.
	MaxBufferedBytes int
	// SlowConsumerTimeout: a peer whose write queue is full and makes no
	// progress (no frame finishes writing) for this long while a frame
	// waits for room is closed with 1008 "slow consumer" (default 5 s).
	SlowConsumerTimeout time.Duration
	// MaxInflight bounds concurrent requests per connection (default 256);
	// beyond it a request gets RATE_LIMITED with retrySafe:true.
	MaxInflight int
	// RequestsPerSecond and Burst rate-limit each operator credential
	// across its connections; 0 means unlimited.
	RequestsPerSecond float64
	Burst             int
	// ModuleSet is the pinned module set served to nodes; nil serves none.
	ModuleSet *ModuleSet
	// SessionTTL is the lifetime of a paired node's session token
	// (default protocol.SessionTTL, 7 days). An operator may shorten it,
	// down to MinSessionTTL; it cannot be made longer than the default.
	SessionTTL time.Duration
	// StateDir holds the durable store (node registry, pairings, hashed
	// session and recovery credentials). Empty keeps state in memory only.
	StateDir string
	// TLS, when set, makes Serve speak TLS (wss://).
	TLS *tls.Config
	// Version is reported in hello-ok server.version.
	Version string
	// IdleTimeout closes a connection that sends nothing, not even a ping,
	// for this long (default 75 s: three 25 s ping intervals).
	IdleTimeout time.Duration
	// HandshakeTimeout closes a WebSocket that has not connected in time
	// (default 10 s); it also bounds reading one plain HTTP request.
	HandshakeTimeout time.Duration
	// HTTPIdleTimeout closes a keep-alive HTTP connection (e.g. after
	// /healthz) that sends no next request for this long (default 30 s).
	HTTPIdleTimeout time.Duration
	// MaxUnauthenticated caps the sockets Serve holds that have not
	// completed connect: TLS and HTTP ones, idle keep-alive ones, and
	// upgraded WebSockets before connect (default 256). A socket past it
	// is closed at once. MaxUnauthenticatedPerAddress is the same cap per
	// source address (IPv4 address or IPv6 /64; default 32, at most
	// MaxUnauthenticated).
	MaxUnauthenticated           int
	MaxUnauthenticatedPerAddress int
	// AdmissionWait: a socket past either cap waits up to this long for a
	// slot before it is closed (default 0: closed at once), so a
	// reconnect herd queues instead of backing off (docs/SCALE.md). At
	// most 16 × MaxUnauthenticated sockets wait, each holding a
	// descriptor; past that they are closed at once.
	AdmissionWait time.Duration
	// AuthFailureBurst and AuthFailuresPerMinute throttle failed connects
	// per source address: after AuthFailureBurst failures (default 10) an
	// address regains AuthFailuresPerMinute attempts a minute (default 30);
	// a connect from an address with none left is refused RATE_LIMITED /
	// auth_rate_limited before its credential is checked.
	AuthFailureBurst      int
	AuthFailuresPerMinute float64
	// Logger receives content-free connection events (default: discard;
	// docs/OPERATIONS.md, "Logs").
	Logger *slog.Logger
	// Audit receives one record per operator request (nil: none). When it
	// is fail-closed, requests are refused UNAVAILABLE audit_unavailable
	// while it cannot write, and /readyz answers 503 (docs/OPERATIONS.md).
	// The caller closes it after Close.
	Audit *audit.Sink
	// Now is the clock (default time.Now); tests move it for expiry.
	Now func() time.Time
	// ApprovalTimeout bounds how long a request held for approval waits
	// (default 5 min); MaxPendingApprovals (default 64) and
	// MaxPendingApprovalsPerPrincipal (default 8) bound the requests held
	// at once (docs/POLICY.md, "Approvals").
	ApprovalTimeout                 time.Duration
	MaxPendingApprovals             int
	MaxPendingApprovalsPerPrincipal int
	// Cluster, when set, makes the controller one of a cluster federated
	// on NATS: its registry, pairings and sessions live in JetStream KV
	// (StateDir is then not used for them) and calls reach nodes held by
	// other controllers (docs/CLUSTER.md).
	Cluster *ClusterConfig
	// MaxFanoutNodes bounds the nodes one node.fanout reaches (default
	// protocol.DefaultMaxFanoutNodes, 10,000); MaxFanoutsPerConn the
	// fan-outs one operator connection runs at once (default 4). See
	// docs/PROTOCOL.md, "Fan-out".
	MaxFanoutNodes    int
	MaxFanoutsPerConn int
}

// Defaults.
const (
	DefaultMaxBufferedBytes = 16 << 20
	DefaultMaxInflight      = 256
	DefaultIdleTimeout      = 75 * time.Second
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultSlowConsumerTimeout is Config.SlowConsumerTimeout's default.
	DefaultSlowConsumerTimeout = 5 * time.Second
	writeTimeout               = 10 * time.Second
	// MinSessionTTL is the shortest Config.SessionTTL accepted.
	MinSessionTTL = time.Second
	// Approval defaults (Config.ApprovalTimeout, MaxPendingApprovals,
	// MaxPendingApprovalsPerPrincipal).
	DefaultApprovalTimeout                 = 5 * time.Minute
	DefaultMaxPendingApprovals             = 64
	DefaultMaxPendingApprovalsPerPrincipal = 8
)

// ErrInsecureListen is returned by Serve for a non-loopback listener when
// no operator credential is configured: a remote controller fails closed.
var ErrInsecureListen = errors.New("controller: refusing a non-loopback listener without operator authentication")

// Server is the controller. It is safe for concurrent use.
type Server struct {
	cfg      Config
	log      *slog.Logger
	now      func() time.Time
	upgrader websocket.Upgrader
	// transfers pairs bulk data connections (bulk.go).
	transfers *transferHub
	auth      *authenticator
	reg       *registry
	// modules is the pinned set (nil: none); SetModuleSet replaces it.
	modules atomic.Pointer[ModuleSet]
	// protoTable routes protocol's methods when no set is pinned.
	protoTable methodTable
	store      *store
	// fed is the cluster side (federation.go), nil when standalone.
	fed       *federation
	metrics   *metrics
	audit     *audit.Sink
	approvals *approvalBook
	guard     *connGuard
	throttle  *authThrottle
	// ui is the web console at /ui (ui.go, docs/CONSOLE.md).
	ui *console
	// refusedLog rate-limits the log line for sockets refused by the caps.
	refusedLog *rate.Limiter

	mu       sync.Mutex
	conns    map[*conn]struct{}
	servers  []*http.Server
	closed   bool
	closedCh chan struct{}
	wg       sync.WaitGroup

	// hookAfterResult, when set (tests only), runs after a node's result
	// arrives and before the session recheck.
	hookAfterResult atomic.Pointer[func()]
	// hookAfterTake, when set (tests only), runs after a node's result has
	// taken its call and before the outcome is delivered.
	hookAfterTake atomic.Pointer[func()]
}

// New validates cfg and builds a Server (opening the durable store when
// cfg.StateDir is set).
func New(cfg Config) (*Server, error) {
	if cfg.MaxPayload == 0 {
		cfg.MaxPayload = protocol.DefaultMaxPayload
	}
	if cfg.MaxPayload < 1024 {
		return nil, fmt.Errorf("controller: MaxPayload below 1024 bytes")
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = protocol.SessionTTL
	}
	if cfg.SessionTTL < MinSessionTTL || cfg.SessionTTL > protocol.SessionTTL {
		return nil, fmt.Errorf("controller: the session TTL must be between %s and %s", MinSessionTTL, protocol.SessionTTL)
	}
	if cfg.MaxBufferedBytes == 0 {
		cfg.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if cfg.MaxBufferedBytes < cfg.MaxPayload {
		cfg.MaxBufferedBytes = cfg.MaxPayload
	}
	if cfg.SlowConsumerTimeout <= 0 {
		cfg.SlowConsumerTimeout = DefaultSlowConsumerTimeout
	}
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = DefaultMaxInflight
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.HTTPIdleTimeout <= 0 {
		cfg.HTTPIdleTimeout = DefaultHTTPIdleTimeout
	}
	if cfg.MaxUnauthenticated <= 0 {
		cfg.MaxUnauthenticated = DefaultMaxUnauthenticated
	}
	if cfg.MaxUnauthenticatedPerAddress <= 0 {
		cfg.MaxUnauthenticatedPerAddress = DefaultMaxUnauthenticatedPerAddress
	}
	cfg.MaxUnauthenticatedPerAddress = min(cfg.MaxUnauthenticatedPerAddress, cfg.MaxUnauthenticated)
	if cfg.AuthFailureBurst <= 0 {
		cfg.AuthFailureBurst = DefaultAuthFailureBurst
	}
	if cfg.AuthFailuresPerMinute <= 0 {
		cfg.AuthFailuresPerMinute = DefaultAuthFailuresPerMinute
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.ApprovalTimeout <= 0 {
		cfg.ApprovalTimeout = DefaultApprovalTimeout
	}
	if cfg.MaxPendingApprovals <= 0 {
		cfg.MaxPendingApprovals = DefaultMaxPendingApprovals
	}
	if cfg.MaxPendingApprovalsPerPrincipal <= 0 {
		cfg.MaxPendingApprovalsPerPrincipal = DefaultMaxPendingApprovalsPerPrincipal
	}
	cfg.MaxPendingApprovalsPerPrincipal = min(cfg.MaxPendingApprovalsPerPrincipal, cfg.MaxPendingApprovals)
	if cfg.MaxFanoutNodes <= 0 {
		cfg.MaxFanoutNodes = protocol.DefaultMaxFanoutNodes
	}
	if cfg.MaxFanoutsPerConn <= 0 {
		cfg.MaxFanoutsPerConn = protocol.DefaultMaxFanoutsPerConn
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var lim func() *rate.Limiter
	if cfg.RequestsPerSecond > 0 {
		burst := cfg.Burst
		if burst <= 0 {
			burst = max(1, int(cfg.RequestsPerSecond))
		}
		lim = func() *rate.Limiter { return rate.NewLimiter(rate.Limit(cfg.RequestsPerSecond), burst) }
	}
	auth, err := newAuthenticator(cfg.Operators, cfg.NodeTokens, lim)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:        cfg,
		log:        log,
		now:        cfg.Now,
		auth:       auth,
		protoTable: protocolTable(),
		conns:      map[*conn]struct{}{},
		closedCh:   make(chan struct{}),
		throttle:   newAuthThrottle(cfg.AuthFailuresPerMinute, cfg.AuthFailureBurst, maxAuthFailureAddresses),
		refusedLog: rate.NewLimiter(rate.Every(time.Second), 1),
		audit:      cfg.Audit,
	}
	s.metrics = newMetrics(s)
	s.modules.Store(cfg.ModuleSet)
	s.approvals = newApprovalBook(s)
	s.guard = newConnGuard(cfg.MaxUnauthenticated, cfg.MaxUnauthenticatedPerAddress, func() {
		if s.refusedLog.Allow() {
			s.log.Warn("unauthenticated connection cap reached; refusing sockets", "refusedTotal", s.guard.refused.Load())
		}
	})
	s.upgrader = websocket.Upgrader{
		// Small buffers and a shared write-buffer pool keep an idle node
		// connection cheap (a thousand nodes stay connected).
		ReadBufferSize:  4 << 10,
		WriteBufferSize: 4 << 10,
		WriteBufferPool: &sync.Pool{},
		// Default CheckOrigin: a browser page from another origin cannot open a socket.
	}
	s.transfers = newTransferHub()
	var st *store
	var kvb *kvBackend
	if cc := cfg.Cluster; cc != nil {
		// Clustered: the registry lives in JetStream KV (docs/CLUSTER.md).
		if cc.Conn == nil || cc.Name == "" {
			return nil, errors.New("controller: a cluster needs a NATS connection and a controller name")
		}
		kvb, err = openKV(cc.Conn, cc.Name, min(max(cc.Replicas, 1), 5))
		if err != nil {
			return nil, err
		}
		st = &store{be: kvb}
	} else if st, err = openStore(cfg.StateDir); err != nil {
		return nil, err
	}
	s.store = st
	s.reg, err = newRegistry(s, st)
	if err != nil {
		st.close()
		return nil, err
	}
	if kvb != nil {
		s.fed = newFederation(s, cfg.Cluster, kvb)
		if err := s.fed.start(); err != nil {
			s.fed.stop()
			return nil, fmt.Errorf("controller: cannot watch the cluster state: %w", err)
		}
	}
	for _, n := range cfg.NodeTokens {
		if err := s.reg.ensureTokenNode(n.Name); err != nil {
			st.close()
			return nil, err
		}
	}
	s.wg.Add(2)
	go s.janitor()
	s.ui = newConsole(s)
	go s.ui.run()
	return s, nil
}

// Handler serves /ws (the WebSocket endpoint), /healthz (liveness: 200
// "ok"), /readyz (readiness: 200 "ready", or 503 naming the failing
// checks), /metrics (Prometheus text format; see docs/OPERATIONS.md) and
// the web console at /ui (docs/CONSOLE.md).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", s.serveWS)
	mux.HandleFunc("/ws"+protocol.DataPath, s.serveData)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", s.serveReadyz)
	mux.Handle("/metrics", s.metricsHandler())
	if s.ui != nil {
		s.ui.mount(mux)
	}
	return mux
}

// Serve accepts connections on ln until ctx ends or Close is called; it
// returns nil then. A non-loopback listener without operator credentials
// is refused with ErrInsecureListen. With Config.TLS set it serves TLS.
// Sockets are subject to the unauthenticated caps and the HTTP timeouts
// of Config (shared by every listener of the Server).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if !s.auth.hasOperators() && !IsLoopback(ln.Addr()) {
		return ErrInsecureListen
	}
	ln = newGuardedListener(ln, s.guard, s.cfg.AdmissionWait)
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	hs := &http.Server{Handler: s.Handler(),
		ReadHeaderTimeout: s.cfg.HandshakeTimeout,
		ReadTimeout:       s.cfg.HandshakeTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       s.cfg.HTTPIdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.servers = append(s.servers, hs)
	s.mu.Unlock()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-ctx.Done():
			hs.Close()
		case <-stop:
		}
	}()
	err := hs.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) || ctx.Err() != nil {
		return nil
	}
	return err
}

// Close stops every listener started by Serve, closes every connection
// (failing calls in flight with UNAVAILABLE) and the durable store.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closedCh)
	servers := s.servers
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, hs := range servers {
		hs.Close()
	}
	s.transfers.close()
	for _, c := range conns {
		c.closeWith(websocket.CloseGoingAway, "controller shutting down")
	}
	for _, c := range conns {
		<-c.finished
	}
	s.wg.Wait()
	s.reg.flush()
	if s.fed != nil {
		s.fed.stop()
	}
	return s.store.close()
}

// IsLoopback reports whether addr is a loopback IP address (127.0.0.0/8, ::1).
func IsLoopback(addr net.Addr) bool {
	var ip net.IP
	switch a := addr.(type) {
	case *net.TCPAddr:
		ip = a.IP
	default:
		host, _, err := net.SplitHostPort(addr.String())
		if err != nil {
			return false
		}
		ip = net.ParseIP(host)
	}
	return ip != nil && ip.IsLoopback()
}

// janitor flushes non-critical registry writes every second and deletes
// expired pairings, challenges and sessions every 30 s.
func (s *Server) janitor() {
	defer s.wg.Done()
	flush := time.NewTicker(time.Second)
	defer flush.Stop()
	expire := time.NewTicker(30 * time.Second)
	defer expire.Stop()
	for {
		select {
		case <-s.closedCh:
			return
		case <-flush.C:
			s.reg.flush()
		case <-expire.C:
			s.reg.expire()
		}
	}
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	c := newConn(s, ws)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ws.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	c.run()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}
