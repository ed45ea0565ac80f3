package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	neturl "net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"lemon/client"
	"lemon/host/moduleset"
	"lemon/protocol"
	"lemon/version"
)

// Config configures a Worker. ControllerURL, Token and either Dispatcher
// or LoadModules are required.
type Config struct {
	// ControllerURL is the controller's /ws endpoint, ws:// or wss://.
	// ws:// to a host that is not loopback is refused unless
	// AllowInsecureController (docs/PROTOCOL.md, "Transport").
	ControllerURL string
	// FailoverURLs are further controllers of the same cluster
	// (docs/CLUSTER.md, "Failover"), tried in order after ControllerURL:
	// each reconnect starts from ControllerURL (the preferred one) and
	// moves to the next URL at once after a failure, with the backoff
	// applied once a whole round has failed.
	FailoverURLs            []string
	AllowInsecureController bool
	// Name is advertised in connect (node.name). With a paired session the
	// controller keeps its own name for the node.
	Name string
	// NodeID is the durable node ID of a paired session; when set, the
	// controller's hello-ok must confirm it, and invocations for another
	// node ID are refused.
	NodeID string
	// Token is the node token (interim policy token or paired session
	// token). It is never logged.
	Token string
	// Dispatcher serves methods. It may be nil when LoadModules is set:
	// the node then advertises no methods until it has the module set.
	Dispatcher Dispatcher
	// ModuleCacheDir caches the controller's pinned module set
	// (docs/PROTOCOL.md, "Module set"); with LoadModules set, the worker fetches what the cache lacks,
	// verifies it and builds a new Dispatcher from it.
	ModuleCacheDir string
	LoadModules    func(ctx context.Context, set *ModuleSet) (Dispatcher, error)
	// InitialSet, with LoadModules, is served when the cache holds no set
	// (a binary's embedded default set); the controller's pinned set
	// replaces it when the digests differ.
	InitialSet *ModuleSet
	// Capabilities are advertised in connect (node.capabilities).
	Capabilities []string
	// MaxPayload is the largest frame this node accepts, in bytes,
	// advertised in connect; results must also fit the controller's
	// hello-ok policy.maxPayload (default protocol.DefaultMaxPayload).
	MaxPayload int
	// MaxConcurrent bounds invocations in flight (default 256); more are
	// answered UNAVAILABLE with retrySafe:true.
	MaxConcurrent int
	// PingInterval is the WebSocket ping period (default 25 s); the
	// connection is dropped after IdleTimeout without any frame (default
	// three ping periods).
	PingInterval time.Duration
	IdleTimeout  time.Duration
	// Backoff shapes reconnects (defaults: 500 ms initial, 30 s cap).
	Backoff Backoff
	// ResultTimeout bounds delivery of one node.invoke.result (default 30 s).
	ResultTimeout time.Duration
	// Logger receives connection events; nil discards them. No token,
	// argument or result content is ever logged.
	Logger *slog.Logger
	// Dialer overrides the WebSocket dialer (TLS roots, proxies).
	Dialer *websocket.Dialer
	// CAFile is a PEM bundle trusted for wss:// besides the system roots
	// (--ca-file); empty means $LEMON_CA_FILE (client.Options.CAFile).
	CAFile string
	// OnConnected, if set, is called after each successful handshake.
	OnConnected func(hello protocol.NodeHelloOK)
}

// Worker keeps one node connected to its controller. Create with New,
// run with Run.
type Worker struct {
	cfg Config
	log *slog.Logger

	// online is set while a session with the controller is up (Ready).
	online atomic.Bool

	mu      sync.Mutex
	disp    Dispatcher
	set     *ModuleSet
	digest  string
	retired []closer
}

type closer interface{ Close(context.Context) error }

// ErrFatal wraps every handshake refusal that retrying cannot fix
// (UNAUTHORIZED, FORBIDDEN, INVALID_PARAMS, CONFLICT, identity mismatch).
// Run returns it instead of reconnecting; the wrapped *protocol.Error
// says why.
var ErrFatal = errors.New("worker: controller refused this node")

// New validates cfg and returns a Worker. It does no I/O except reading
// the module cache, when configured.
func New(cfg Config) (*Worker, error) {
	if err := CheckControllerURL(cfg.ControllerURL, cfg.AllowInsecureController); err != nil {
		return nil, err
	}
	if len(cfg.FailoverURLs) > MaxControllerURLs-1 {
		return nil, fmt.Errorf("worker: at most %d controller URLs", MaxControllerURLs)
	}
	for _, u := range cfg.FailoverURLs {
		if err := CheckControllerURL(u, cfg.AllowInsecureController); err != nil {
			return nil, err
		}
	}
	if cfg.Token == "" {
		return nil, errors.New("worker: a node token is required")
	}
	if cfg.Dispatcher == nil && cfg.LoadModules == nil {
		return nil, errors.New("worker: a dispatcher or a module loader is required")
	}
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = protocol.DefaultMaxPayload
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = 256
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = protocol.PingIntervalMs * time.Millisecond
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 3 * cfg.PingInterval
	}
	if cfg.ResultTimeout <= 0 {
		cfg.ResultTimeout = 30 * time.Second
	}
	cfg.Backoff = cfg.Backoff.withDefaults()
	w := &Worker{cfg: cfg, log: cfg.Logger, disp: cfg.Dispatcher}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	return w, nil
}

// Run connects, serves and reconnects until ctx ends (returning nil) or
// the controller refuses the node for good (returning an error wrapping
// ErrFatal). It loads a cached module set first when one is configured.
func (w *Worker) Run(ctx context.Context) error {
	if w.cfg.LoadModules != nil {
		var set *ModuleSet
		if w.cfg.ModuleCacheDir != "" {
			set, _ = readCachedSet(w.cfg.ModuleCacheDir)
		}
		if set == nil {
			set = w.cfg.InitialSet
		}
		if set != nil {
			if err := w.install(ctx, set); err != nil {
				w.log.Warn("module set not loaded", "reason", safeReason(err))
			}
		}
	}
	defer w.closeDispatcher()
	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	attempt := 0
	urls := append([]string{w.cfg.ControllerURL}, w.cfg.FailoverURLs...)
	idx := 0
	for {
		res := w.session(ctx, urls[idx])
		if ctx.Err() != nil {
			return nil
		}
		if res.fatal != nil {
			return res.fatal
		}
		if res.reload {
			attempt = 0
			continue
		}
		if res.stable {
			attempt = 0
		}
		// Failover: a session that stayed up starts the next round at the
		// preferred URL; a failure moves to the next URL after a short
		// jitter, and a failed round waits the backoff.
		if res.stable || res.replaced {
			idx = 0
		} else {
			idx = (idx + 1) % len(urls)
		}
		d := w.cfg.Backoff.Delay(attempt, rnd)
		if idx != 0 && !res.replaced {
			d = time.Duration(rnd.Int64N(int64(w.cfg.Backoff.Initial) + 1))
		}
		if res.replaced {
			// Another process holds this identity: wait between half and
			// all of the longest backoff before taking it back, so two
			// copies of one node do not keep swapping and failing each
			// other's calls.
			half := w.cfg.Backoff.Max / 2
			d = half + time.Duration(rnd.Int64N(int64(half)+1))
		}
		if idx == 0 {
			attempt++
		}
		level := slog.LevelInfo
		if res.trust {
			level = slog.LevelWarn
		}
		w.log.Log(ctx, level, "controller connection lost; reconnecting", "reason", res.reason, "delay", d.Round(time.Millisecond))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// declarations returns the method declarations of the installed set
// (nil without one).
func (w *Worker) declarations() map[string]moduleset.Method {
	w.mu.Lock()
	set := w.set
	w.mu.Unlock()
	if set == nil {
		return nil
	}
	out := map[string]moduleset.Method{}
	for _, mod := range set.Manifest.Modules {
		for _, ms := range mod.Methods {
			out[ms.Name] = ms
		}
	}
	return out
}

func (w *Worker) current() (Dispatcher, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.disp, w.digest
}

func (w *Worker) closeDispatcher() {
	w.mu.Lock()
	d := w.disp
	w.mu.Unlock()
	if c, ok := d.(closer); ok && d != w.cfg.Dispatcher {
		c.Close(context.Background())
	}
	w.closeRetired()
}

// install builds a dispatcher for set and makes it current. The previous
// dispatcher, when the worker built it, is closed once its invocations
// have drained (the caller ends the connection that served them).
func (w *Worker) install(ctx context.Context, set *ModuleSet) error {
	d, err := w.cfg.LoadModules(ctx, set)
	if err != nil {
		return err
	}
	w.mu.Lock()
	old := w.disp
	w.disp, w.set, w.digest = d, set, set.Digest
	w.mu.Unlock()
	if old != nil && old != w.cfg.Dispatcher {
		if c, ok := old.(closer); ok {
			w.mu.Lock()
			w.retired = append(w.retired, c)
			w.mu.Unlock()
		}
	}
	return nil
}

// closeRetired closes dispatchers replaced by a newer module set. It runs
// after a session has ended and its invocations have returned, so no call
// is still inside them.
func (w *Worker) closeRetired() {
	w.mu.Lock()
	old := w.retired
	w.retired = nil
	w.mu.Unlock()
	for _, c := range old {
		c.Close(context.Background())
	}
}

type sessionResult struct {
	reason string // bounded, for the log
	trust  bool   // a TLS set-up failure (client.TrustFailure): logged at warn
	stable bool   // the connection stayed up long enough to reset backoff
	reload bool   // a new module set was installed: reconnect at once
	// replaced: the controller closed this session because another
	// connection took over the same node identity (close code 4001).
	replaced bool
	fatal    error
}

// closeSessionReplaced is the close code the controller sends a node
// connection that another connection of the same identity replaced.
const closeSessionReplaced = 4001

// fatalCodes are handshake refusals retrying cannot fix.
var fatalCodes = map[string]bool{
	protocol.CodeUnauthorized:  true,
	protocol.CodeForbidden:     true,
	protocol.CodeInvalidParams: true,
	protocol.CodeConflict:      true,
}

// MaxControllerURLs bounds the controller URLs a worker takes.
const MaxControllerURLs = 16

// logURL is a controller URL as logged: scheme, host and path, without
// userinfo, query or fragment (which could carry a credential), e.g.
// "wss://b.example:7777/ws"; "(invalid URL)" if it does not parse.
func logURL(raw string) string {
	u, err := neturl.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

func (w *Worker) session(ctx context.Context, url string) sessionResult {
	defer w.online.Store(false)
	disp, digest := w.current()
	methods := map[string]int{}
	var statuses []protocol.ModuleStatus
	if disp != nil {
		methods = disp.Methods()
		if mr, ok := disp.(ModuleReporter); ok {
			statuses = mr.ModuleStatuses()
		}
	}
	s := &session{w: w, disp: disp, inflight: map[string]context.CancelFunc{},
		sem: make(chan struct{}, w.cfg.MaxConcurrent), readyCh: make(chan struct{}),
		decl: w.declarations(), changed: make(chan string, 1)}
	s.ctx, s.cancel = context.WithCancel(ctx)
	defer s.cancel()

	conn, err := client.Dial(ctx, url, client.Options{
		Role:          protocol.RoleNode,
		Token:         w.cfg.Token,
		ClientID:      "lemon-node",
		ClientVersion: version.Version,
		Node: &protocol.NodeAdvertise{
			Name:            w.cfg.Name,
			NodeID:          w.cfg.NodeID,
			Methods:         methods,
			ModuleSetDigest: digest,
			MaxPayload:      w.cfg.MaxPayload,
			Capabilities:    w.cfg.Capabilities,
			Modules:         statuses,
		},
		OnEvent:      s.onEvent,
		ReadLimit:    int64(w.cfg.MaxPayload) + client.EnvelopeSlack,
		Dialer:       w.cfg.Dialer,
		CAFile:       w.cfg.CAFile,
		PingInterval: w.cfg.PingInterval,
		IdleTimeout:  w.cfg.IdleTimeout,
	})
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			if fatalCodes[pe.Code] {
				return sessionResult{fatal: fmt.Errorf("%w: %w", ErrFatal, pe)}
			}
			return sessionResult{reason: pe.Code}
		}
		if errors.Is(err, client.ErrCAFile) {
			// Retrying cannot help: the file is the operator's to fix.
			return sessionResult{fatal: fmt.Errorf("%w: %w", ErrFatal, err)}
		}
		return sessionResult{reason: safeReason(err), trust: client.TrustFailure(err)}
	}
	var hello protocol.NodeHelloOK
	if json.Unmarshal(conn.HelloRaw(), &hello) != nil {
		hello.HelloOK = conn.Hello()
	}
	if w.cfg.NodeID != "" && hello.Auth.NodeID != "" && hello.Auth.NodeID != w.cfg.NodeID {
		conn.Close()
		return sessionResult{fatal: fmt.Errorf("%w: %w", ErrFatal, protocol.DomainError(protocol.CodeUnauthorized,
			protocol.DomainNodeIdentityMismatch, "the token authenticates as a different node"))}
	}
	s.conn = conn
	s.nodeID = w.cfg.NodeID
	if s.nodeID == "" {
		s.nodeID = hello.Auth.NodeID
	}
	s.limit = min(w.cfg.MaxPayload, conn.MaxPayload())
	// The log line comes first, so whoever sees this session serve a call
	// also finds the line. Invocations that arrived before Dial returned
	// start now.
	w.log.Info("connected to controller", "url", logURL(url), "connId", hello.Server.ConnID, "nodeId", s.nodeID, "methods", len(methods))
	w.online.Store(true)
	close(s.readyCh)
	connectedAt := time.Now()
	if w.cfg.OnConnected != nil {
		w.cfg.OnConnected(hello)
	}

	// A module-set sync runs beside the session; the session waits for it
	// before returning, so no fetch writes the cache and no dispatcher is
	// installed after Run has returned. One starts when hello-ok names
	// another set, and again at each node.modules.changed (the controller
	// re-pinned) naming a set not yet installed.
	reload := make(chan error, 1)
	syncing, pending := false, ""
	startSync := func(want string) {
		syncing = true
		go func() { reload <- w.syncModules(s.ctx, conn, want) }()
	}
	if hello.ModuleSet != nil && hello.ModuleSet.Digest != digest && w.cfg.LoadModules != nil {
		startSync(hello.ModuleSet.Digest)
	}

	res := sessionResult{}
	var drained <-chan struct{}
loop:
	for {
		select {
		case <-ctx.Done():
			res.reason = "stopping"
			break loop
		case <-conn.Done():
			res.reason = safeReason(conn.Err())
			var ce *websocket.CloseError
			if errors.As(conn.Err(), &ce) && ce.Code == closeSessionReplaced {
				res.replaced, res.reason = true, "replaced by another connection of this node"
			}
			break loop
		case want := <-s.changed:
			if w.cfg.LoadModules == nil || drained != nil {
				continue
			}
			if _, cur := w.current(); want == cur {
				continue
			}
			if syncing {
				pending = want
				continue
			}
			startSync(want)
		case err := <-reload:
			syncing = false
			if err != nil {
				// Keep serving what we have; the controller routes only the
				// methods we advertised.
				w.log.Warn("module set not updated", "reason", safeReason(err))
				if pending != "" {
					want := pending
					pending = ""
					startSync(want)
				}
				continue
			}
			// Installed: finish the calls in flight on this connection
			// (new ones are refused, retry-safe), then reconnect
			// advertising the new set's methods.
			res.reload = true
			res.reason = "module set updated"
			drained = s.startDrain()
		case <-drained:
			break loop
		}
	}
	res.stable = time.Since(connectedAt) >= w.cfg.Backoff.Max
	// A disconnect cancels every invocation in flight.
	s.cancel()
	conn.Close()
	if syncing {
		<-reload
	}
	s.wg.Wait()
	w.closeRetired()
	return res
}
