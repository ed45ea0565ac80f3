package controller

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/time/rate"

	"lemon/audit"
	"lemon/client"
	"lemon/protocol"
)

// This file is the web console served at /ui (docs/CONSOLE.md): sessions,
// login and logout, CSRF, the security headers and the login rate limit.
// The pages are in ui_pages.go, the templates and assets in ui/.
//
// A login opens an operator connection to this controller's own /ws
// handler in memory, with the token the browser posted: the token is
// checked exactly as /ws checks it (it is /ws), its scopes come from
// hello-ok, and every action and node request of the session goes through
// that connection, so scopes, operator policies, approvals, audit and
// metrics apply as they do to `lemon`. The token itself is not kept: the
// session holds the connection, and ends when it does.

//go:embed ui
var uiFiles embed.FS

// Console bounds and lifetimes (docs/CONSOLE.md, "Sessions").
var (
	// UISessionTTL is a console session's lifetime from login.
	UISessionTTL = 30 * time.Minute
	// UIMaxSessions bounds the live console sessions; a login beyond it
	// (after expired ones are dropped) is refused 503.
	UIMaxSessions = 64
	// UILoginBurst login attempts per source address are allowed at once,
	// then UILoginPerMinute a minute (429 beyond).
	UILoginBurst     = 5
	UILoginPerMinute = 5.0
	// uiMaxLoginAddrs bounds the per-address login limiter table.
	uiMaxLoginAddrs = 4096
	// uiAuditRing is how many recent controller audit records are kept.
	uiAuditRing = 2048
)

const (
	uiSessionCookie = "lemon_ui_session"
	uiLoginCookie   = "lemon_ui_login"
	uiCallTimeout   = 30 * time.Second
	// uiMaxForm bounds a posted form, in bytes.
	uiMaxForm = 16 << 10
)

// uiSession is one logged-in browser.
type uiSession struct {
	operator string
	scopes   []string
	csrf     string
	conn     *client.Conn
	expires  time.Time
	flash    string // one-shot message shown on the next page
}

func (u *uiSession) has(scope string) bool { return protocol.HasScope(u.scopes, scope) }

// console is the /ui handler's state, one per Server.
type console struct {
	s     *Server
	tmpl  *template.Template
	files http.Handler

	mu       sync.Mutex
	sessions map[[32]byte]*uiSession // by SHA-256 of the cookie value
	logins   map[string]*rate.Limiter

	ring    *auditRing
	samples *sampler
}

func newConsole(s *Server) *console {
	sub, _ := fs.Sub(uiFiles, "ui")
	static, _ := fs.Sub(uiFiles, "ui/static")
	cs := &console{
		s:        s,
		tmpl:     template.Must(template.New("").Funcs(uiFuncs).ParseFS(sub, "*.html")),
		files:    http.FileServerFS(static),
		sessions: map[[32]byte]*uiSession{},
		logins:   map[string]*rate.Limiter{},
		ring:     newAuditRing(uiAuditRing),
		samples:  newSampler(150),
	}
	return cs
}

// mount adds /ui to mux.
func (cs *console) mount(mux *http.ServeMux) {
	mux.Handle("/ui/", cs)
	mux.Handle("/ui", http.RedirectHandler("/ui/", http.StatusSeeOther))
	// A browser that asks for the site's icon at the root gets the
	// console's (docs/CONSOLE.md).
	mux.Handle("/favicon.ico", http.RedirectHandler("/ui/static/favicon.svg", http.StatusMovedPermanently))
}

// securityHeaders are set on every /ui answer (docs/CONSOLE.md).
func securityHeaders(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin") // "no-referrer" makes a browser send Origin: null on a form POST
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if r.TLS != nil {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
}

func (cs *console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w, r)
	p := strings.TrimPrefix(r.URL.Path, "/ui")
	if strings.HasPrefix(p, "/static/") {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if strings.HasSuffix(p, "/") { // no directory listings
			http.NotFound(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = strings.TrimPrefix(p, "/static")
		cs.files.ServeHTTP(w, r2)
		return
	}
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, uiMaxForm)
		if !sameOrigin(r) {
			http.Error(w, "cross-origin request refused", http.StatusForbidden)
			return
		}
	} else if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch p {
	case "/login":
		if r.Method == http.MethodPost {
			cs.login(w, r)
		} else {
			cs.loginPage(w, r, "", http.StatusOK)
		}
		return
	}
	sess, key := cs.session(r)
	if sess == nil {
		if r.Method == http.MethodPost || strings.HasPrefix(p, "/api/") {
			http.Error(w, "not logged in", http.StatusUnauthorized)
			return
		}
		http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
		return
	}
	if r.Method == http.MethodPost {
		if err := r.ParseForm(); err != nil {
			http.Error(w, "malformed form", http.StatusBadRequest)
			return
		}
		if !validCSRF(sess.csrf, r.PostForm.Get("csrf")) {
			http.Error(w, "CSRF token missing or invalid", http.StatusForbidden)
			return
		}
	}
	cs.route(w, r, p, sess, key)
}

// sameOrigin refuses a POST that a browser marks as coming from another
// site (Sec-Fetch-Site) or whose Origin is not this host.
func sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	return o == "http://"+r.Host || o == "https://"+r.Host
}

func validCSRF(want, got string) bool {
	return got != "" && len(got) == len(want) && subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}

func cookieKey(v string) [32]byte { return sha256.Sum256([]byte(v)) }

// session returns the request's live session, dropping an expired one.
func (cs *console) session(r *http.Request) (*uiSession, [32]byte) {
	ck, err := r.Cookie(uiSessionCookie)
	if err != nil || len(ck.Value) != 64 {
		return nil, [32]byte{}
	}
	key := cookieKey(ck.Value)
	cs.mu.Lock()
	sess := cs.sessions[key]
	if sess != nil && (!cs.s.now().Before(sess.expires) || connEnded(sess.conn)) {
		delete(cs.sessions, key)
		go sess.conn.Close()
		sess = nil
	}
	cs.mu.Unlock()
	return sess, key
}

func connEnded(c *client.Conn) bool {
	select {
	case <-c.Done():
		return true
	default:
		return false
	}
}

// allowLogin charges one login attempt to the request's address.
func (cs *console) allowLogin(r *http.Request) bool {
	addr := uiAddr(r)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	lim := cs.logins[addr]
	if lim == nil {
		if len(cs.logins) >= uiMaxLoginAddrs {
			// Drop the addresses whose bucket is full again (they are
			// indistinguishable from new ones); if none, refuse.
			now := cs.s.now()
			for a, l := range cs.logins {
				if l.TokensAt(now) >= float64(UILoginBurst) {
					delete(cs.logins, a)
				}
			}
			if len(cs.logins) >= uiMaxLoginAddrs {
				return false
			}
		}
		lim = rate.NewLimiter(rate.Limit(UILoginPerMinute/60), UILoginBurst)
		cs.logins[addr] = lim
	}
	return lim.AllowN(cs.s.now(), 1)
}

// uiAddr is the address key of a browser (as /ws keys its peers).
func uiAddr(r *http.Request) string {
	if ap, err := net.ResolveTCPAddr("tcp", r.RemoteAddr); err == nil {
		return addrKey(ap)
	}
	return r.RemoteAddr
}

func (cs *console) loginPage(w http.ResponseWriter, r *http.Request, msg string, status int) {
	v := randomHex(16)
	http.SetCookie(w, &http.Cookie{Name: uiLoginCookie, Value: v, Path: "/ui/login", HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, MaxAge: 600})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	cs.tmpl.ExecuteTemplate(w, "login.html", map[string]any{"CSRF": v, "Error": msg})
}

// login exchanges a posted operator token for a session.
func (cs *console) login(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "malformed form", http.StatusBadRequest)
		return
	}
	ck, err := r.Cookie(uiLoginCookie)
	if err != nil || !validCSRF(ck.Value, r.PostForm.Get("csrf")) {
		http.Error(w, "CSRF token missing or invalid", http.StatusForbidden)
		return
	}
	if !cs.allowLogin(r) {
		w.Header().Set("Retry-After", "60")
		cs.loginPage(w, r, "Too many login attempts from this address; wait a minute.", http.StatusTooManyRequests)
		return
	}
	token := r.PostForm.Get("token")
	if token == "" {
		cs.loginPage(w, r, "An operator token is required.", http.StatusUnauthorized)
		return
	}
	cs.mu.Lock()
	cs.dropExpiredLocked()
	full := len(cs.sessions) >= UIMaxSessions
	cs.mu.Unlock()
	if full {
		cs.loginPage(w, r, "Too many console sessions are open; try again later.", http.StatusServiceUnavailable)
		return
	}
	conn, err := cs.dial(r, token)
	if err != nil {
		var pe *protocol.Error
		msg, status := "The controller could not be reached.", http.StatusServiceUnavailable
		if errors.As(err, &pe) {
			switch {
			case pe.Code == protocol.CodeRateLimited:
				msg, status = "Too many failed logins from this address; retry later.", http.StatusTooManyRequests
			case pe.Code == protocol.CodeUnauthorized:
				msg, status = "The operator token was not accepted.", http.StatusUnauthorized
			}
		}
		cs.loginPage(w, r, msg, status)
		return
	}
	hello := conn.Hello()
	sess := &uiSession{operator: "", scopes: hello.Auth.Scopes, csrf: randomHex(32), conn: conn,
		expires: cs.s.now().Add(UISessionTTL)}
	sess.operator = cs.operatorName(hello.Server.ConnID)
	v := randomHex(32)
	cs.mu.Lock()
	if len(cs.sessions) >= UIMaxSessions {
		cs.mu.Unlock()
		conn.Close()
		cs.loginPage(w, r, "Too many console sessions are open; try again later.", http.StatusServiceUnavailable)
		return
	}
	cs.sessions[cookieKey(v)] = sess
	cs.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: uiSessionCookie, Value: v, Path: "/ui", HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, MaxAge: int(UISessionTTL / time.Second)})
	http.SetCookie(w, &http.Cookie{Name: uiLoginCookie, Value: "", Path: "/ui/login", MaxAge: -1})
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

// operatorName is the operator entry name of the server-side connection
// connID (the principal of its audit records).
func (cs *console) operatorName(connID string) string {
	cs.s.mu.Lock()
	defer cs.s.mu.Unlock()
	for c := range cs.s.conns {
		if c.id == connID && c.op != nil {
			return c.op.name
		}
	}
	return "operator"
}

func (cs *console) dropExpiredLocked() {
	now := cs.s.now()
	for k, sess := range cs.sessions {
		if !now.Before(sess.expires) || connEnded(sess.conn) {
			delete(cs.sessions, k)
			go sess.conn.Close()
		}
	}
}

func (cs *console) logout(w http.ResponseWriter, key [32]byte) {
	cs.mu.Lock()
	sess := cs.sessions[key]
	delete(cs.sessions, key)
	cs.mu.Unlock()
	if sess != nil {
		sess.conn.Close()
	}
	http.SetCookie(w, &http.Cookie{Name: uiSessionCookie, Value: "", Path: "/ui", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode})
}

// dial opens the session's operator connection to this controller's /ws
// handler over an in-memory pipe whose remote address is the browser's,
// so the /ws auth-failure throttle counts the browser's address.
func (cs *console) dial(r *http.Request, token string) (*client.Conn, error) {
	remote, _ := net.ResolveTCPAddr("tcp", r.RemoteAddr)
	d := &websocket.Dialer{HandshakeTimeout: 10 * time.Second,
		NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			a, b := net.Pipe()
			var ra net.Addr = remote
			if remote == nil {
				ra = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}
			}
			srv := &http.Server{Handler: http.HandlerFunc(cs.s.serveWS), ReadHeaderTimeout: 10 * time.Second,
				ErrorLog: slog.NewLogLogger(cs.s.log.Handler(), slog.LevelDebug)}
			go srv.Serve(&oneConnListener{c: &addrConn{Conn: b, remote: ra}})
			return a, nil
		}}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	return client.Dial(ctx, "ws://console.internal/ws", client.Options{Token: token, ClientID: "lemon-console",
		Dialer: d, PingInterval: 25 * time.Second})
}

// addrConn is a net.Conn with another remote address.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (a *addrConn) RemoteAddr() net.Addr { return a.remote }

// oneConnListener hands out one connection, then reports closed: the
// http.Server serving it returns while the connection's handler runs on.
type oneConnListener struct {
	mu sync.Mutex
	c  net.Conn
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c == nil {
		return nil, net.ErrClosed
	}
	c := l.c
	l.c = nil
	return c, nil
}
func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// call makes one request on the session's operator connection.
func (sess *uiSession) call(ctx context.Context, method string, params any, out any) *protocol.Error {
	ctx, cancel := context.WithTimeout(ctx, uiCallTimeout)
	defer cancel()
	raw, perr := sess.conn.Call(ctx, method, params)
	if perr != nil {
		return perr
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return protocol.Errorf(protocol.CodeInternal, "malformed result")
		}
	}
	return nil
}

// auditRing keeps the most recent controller audit records for the
// console's Audit page and node detail (docs/CONSOLE.md).
type auditRing struct {
	mu   sync.Mutex
	recs []ringRecord
	next int
	seq  uint64
}

type ringRecord struct {
	Seq uint64 `json:"seq"`
	audit.Record
}

func newAuditRing(n int) *auditRing { return &auditRing{recs: make([]ringRecord, 0, n)} }

func (a *auditRing) add(r audit.Record) {
	if a == nil {
		return
	}
	r.Scopes = append([]string(nil), r.Scopes...)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	rr := ringRecord{Seq: a.seq, Record: r}
	if len(a.recs) < cap(a.recs) {
		a.recs = append(a.recs, rr)
		return
	}
	a.recs[a.next] = rr
	a.next = (a.next + 1) % len(a.recs)
}

// since returns the records after seq that match keep, oldest first, at
// most max (the newest ones).
func (a *auditRing) since(seq uint64, max int, keep func(*audit.Record) bool) []ringRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := []ringRecord{}
	n := len(a.recs)
	for i := 0; i < n; i++ {
		r := &a.recs[(a.next+i)%n]
		if r.Seq > seq && keep(&r.Record) {
			out = append(out, *r)
		}
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return out
}
