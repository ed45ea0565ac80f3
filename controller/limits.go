package controller

import (
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Connection limits (see docs/PROTOCOL.md, Connection limits). A socket
// is unauthenticated from the moment it is accepted (TLS and HTTP
// included: an idle keep-alive /healthz socket counts) until its
// WebSocket completes connect; it is closed after HandshakeTimeout
// (WebSocket) or the HTTP timeouts otherwise.

// Defaults of the connection limits.
const (
	DefaultMaxUnauthenticated           = 256
	DefaultMaxUnauthenticatedPerAddress = 32
	DefaultHTTPIdleTimeout              = 30 * time.Second
	DefaultAuthFailureBurst             = 10
	DefaultAuthFailuresPerMinute        = 30
	// maxAuthFailureAddresses bounds the auth-failure table; addresses
	// beyond it share one bucket.
	maxAuthFailureAddresses = 4096
	// maxHeaderBytes bounds an HTTP request's header.
	maxHeaderBytes = 64 << 10
)

// addrKey is the source a limit is counted against: the IP of an IPv4
// peer, the /64 prefix of an IPv6 one (a host is commonly given a whole
// /64), or the address string when it is not IP.
func addrKey(a net.Addr) string {
	var ip net.IP
	switch t := a.(type) {
	case *net.TCPAddr:
		ip = t.IP
	default:
		host, _, err := net.SplitHostPort(a.String())
		if err != nil {
			return a.String()
		}
		ip = net.ParseIP(host)
	}
	if ip == nil {
		return a.String()
	}
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// connGuard counts the unauthenticated sockets of every listener of a
// Server and refuses (closes at once, unanswered) a socket past the
// global or the per-address cap. Its table holds only addresses with a
// socket open, so it is bounded by the global cap.
type connGuard struct {
	max, perAddr int

	mu       sync.Mutex
	total    int
	byAddr   map[string]int
	freed    chan struct{} // closed (and replaced) when a slot is released
	waiting  int           // sockets waiting for a slot (admission.go)
	refused  atomic.Uint64
	onRefuse func() // called outside the lock (logging)
}

func newConnGuard(max, perAddr int, onRefuse func()) *connGuard {
	return &connGuard{max: max, perAddr: perAddr, byAddr: map[string]int{}, onRefuse: onRefuse,
		freed: make(chan struct{})}
}

// admit takes a slot for key; false when a cap is reached.
func (g *connGuard) admit(key string) bool {
	ok, _ := g.tryAdmit(key, false)
	return ok
}

// tryAdmit takes a slot for key. When it cannot (a cap is reached, or
// sockets already wait and queued is false: a new socket does not pass
// them), it returns the channel closed at the next release.
func (g *connGuard) tryAdmit(key string, queued bool) (bool, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.total >= g.max || g.byAddr[key] >= g.perAddr || (!queued && g.waiting > 0) {
		return false, g.freed
	}
	g.total++
	g.byAddr[key]++
	return true, nil
}

func (g *connGuard) release(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.total--
	if g.byAddr[key]--; g.byAddr[key] <= 0 {
		delete(g.byAddr, key)
	}
	close(g.freed)
	g.freed = make(chan struct{})
}

// unauthenticated reports the sockets counted now (all, and from key).
func (g *connGuard) unauthenticated(key string) (total, fromKey int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.total, g.byAddr[key]
}

// refuse closes a socket past the caps without an answer (an HTTP answer
// would need the descriptor and time the cap is there to save).
func (g *connGuard) refuse(c net.Conn) {
	g.refused.Add(1) // counted before the peer can see the close
	c.Close()
	if g.onRefuse != nil {
		g.onRefuse()
	}
}

// guardedConn holds an unauthenticated slot until authenticated or Close.
type guardedConn struct {
	net.Conn
	g    *connGuard
	key  string
	once sync.Once
}

func (c *guardedConn) authenticated() { c.once.Do(func() { c.g.release(c.key) }) }

func (c *guardedConn) Close() error {
	err := c.Conn.Close()
	c.authenticated() // the slot is free either way
	return err
}

// guardedOf finds the guardedConn under a WebSocket's net.Conn (plain or
// TLS), or nil for a connection not accepted by Serve.
func guardedOf(nc net.Conn) *guardedConn {
	if t, ok := nc.(*tls.Conn); ok {
		nc = t.NetConn()
	}
	g, _ := nc.(*guardedConn)
	return g
}

// authThrottle counts authentication failures per source address in a
// token bucket each (burst failures, then perMinute a minute). An
// address with no failure left is refused before its credential is
// looked at. The table holds at most maxAuthFailureAddresses entries;
// when full, entries whose bucket has refilled (they carry no
// information) are dropped, at most once a second, and failures of
// addresses that still find no room share one overflow bucket.
type authThrottle struct {
	limit rate.Limit
	burst int
	max   int

	mu        sync.Mutex
	m         map[string]*rate.Limiter
	overflow  *rate.Limiter
	lastSweep time.Time
}

func newAuthThrottle(perMinute float64, burst, max int) *authThrottle {
	l := rate.Limit(perMinute / 60)
	return &authThrottle{limit: l, burst: burst, max: max, m: map[string]*rate.Limiter{},
		overflow: rate.NewLimiter(l, burst)}
}

// blocked reports whether key has no failure left at now.
func (a *authThrottle) blocked(key string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	lim, ok := a.m[key]
	if !ok {
		if len(a.m) < a.max {
			return false
		}
		lim = a.overflow
	}
	return lim.TokensAt(now) < 1
}

// failed charges one failure to key at now; it reports whether key is
// blocked from now on.
func (a *authThrottle) failed(key string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	lim, ok := a.m[key]
	if !ok {
		if len(a.m) >= a.max && now.Sub(a.lastSweep) >= time.Second {
			a.lastSweep = now
			for k, l := range a.m {
				if l.TokensAt(now) >= float64(a.burst) {
					delete(a.m, k)
				}
			}
		}
		if len(a.m) < a.max {
			lim = rate.NewLimiter(a.limit, a.burst)
			a.m[key] = lim
		} else {
			lim = a.overflow
		}
	}
	lim.AllowN(now, 1)
	return lim.TokensAt(now) < 1
}

func (a *authThrottle) size() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.m)
}
