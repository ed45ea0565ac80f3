package controller

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"lemon/audit"
	"lemon/protocol"
)

// uiBrowser is an HTTP client with a cookie jar that does not follow
// redirects, against a test server's /ui.
type uiBrowser struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

func newUIBrowser(t *testing.T, ts *testServer) *uiBrowser {
	jar, _ := cookiejar.New(nil)
	base := "http://" + strings.TrimSuffix(strings.TrimPrefix(ts.url, "ws://"), "/ws")
	return &uiBrowser{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func (b *uiBrowser) get(path string) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.c.Get(b.base + path)
	if err != nil {
		b.t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if m := csrfRE.FindSubmatch(body); m != nil && path != "/ui/login" {
		b.csrf = string(m[1])
	}
	return resp, string(body)
}

func (b *uiBrowser) post(path string, form url.Values) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.c.PostForm(b.base+path, form)
	if err != nil {
		b.t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// login posts token through the login form and returns the answer.
func (b *uiBrowser) login(token string) (*http.Response, string) {
	b.t.Helper()
	_, page := b.get("/ui/login")
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("login page has no CSRF field:\n%s", page)
	}
	resp, body := b.post("/ui/login", url.Values{"token": {token}, "csrf": {m[1]}})
	if resp.StatusCode == http.StatusSeeOther {
		b.get("/ui/nodes") // learn the session's CSRF token
	}
	return resp, body
}

func mustLogin(t *testing.T, b *uiBrowser, token string) {
	t.Helper()
	resp, body := b.login(token)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("login: %d %s", resp.StatusCode, body)
	}
	if b.csrf == "" {
		t.Fatal("no CSRF token after login")
	}
}

func TestUISecurityHeadersOnEveryAnswer(t *testing.T) {
	ts := startServer(t, testConfig())
	b := newUIBrowser(t, ts)
	check := func(path string, resp *http.Response) {
		t.Helper()
		h := resp.Header
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"script-src 'self'", "frame-ancestors 'none'", "default-src 'none'", "form-action 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: CSP allows inline script: %q", path, csp)
		}
		if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" ||
			h.Get("Referrer-Policy") != "same-origin" || h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: headers %v", path, h)
		}
	}
	for _, p := range []string{"/ui/login", "/ui/static/app.js", "/ui/nodes", "/ui/api/overview", "/ui/nope"} {
		resp, _ := b.get(p)
		check(p, resp)
	}
	mustLogin(t, b, adminToken)
	for _, p := range []string{"/ui/", "/ui/nodes", "/ui/modules", "/ui/pairings", "/ui/approvals", "/ui/audit", "/ui/api/audit"} {
		resp, body := b.get(p)
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", p, resp.StatusCode, body)
		}
		check(p, resp)
		if strings.Contains(body, "<script>") || regexp.MustCompile(`<script[^>]*>[^<]`).MatchString(body) {
			t.Errorf("%s: inline script in page", p)
		}
	}
	if resp, _ := b.get("/ui/static/"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("static directory listing: %d", resp.StatusCode)
	}
	resp, _ := b.get("/ui/static/app.js")
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") {
		t.Errorf("app.js content type %q", ct)
	}
}

func TestUILoginSessionCookieAndLogout(t *testing.T) {
	var logs syncWriter
	cfg := testConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ts := startServer(t, cfg)
	defer func() {
		for _, canary := range []string{adminToken, "wrong-token-0123456789"} {
			if strings.Contains(logs.String(), canary) {
				t.Errorf("a token reached the log:\n%s", logs.String())
			}
		}
		if !strings.Contains(logs.String(), "operator connect refused") {
			t.Errorf("the refused console login is not logged as /ws logs it:\n%s", logs.String())
		}
	}()
	b := newUIBrowser(t, ts)
	resp, body := b.get("/ui/nodes")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
		t.Fatalf("unauthenticated page: %d", resp.StatusCode)
	}
	resp, body = b.login("wrong-token-0123456789")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "was not accepted") ||
		strings.Contains(body, "wrong-token") {
		t.Fatalf("wrong token: %d %s", resp.StatusCode, body)
	}
	resp, body = b.login(adminToken)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d %s", resp.StatusCode, body)
	}
	var sc *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == uiSessionCookie && c.Value != "" {
			sc = c
		}
	}
	if sc == nil || !sc.HttpOnly || sc.SameSite != http.SameSiteStrictMode || sc.Path != "/ui" ||
		sc.Secure || sc.MaxAge != int(UISessionTTL/time.Second) || len(sc.Value) != 64 {
		t.Fatalf("session cookie %+v", sc)
	}
	if strings.Contains(sc.Value, adminToken) {
		t.Fatal("the cookie holds the token")
	}
	_, body = b.get("/ui/nodes")
	if strings.Contains(body, adminToken) || !strings.Contains(body, ">admin<") {
		t.Fatalf("nodes page: %s", body)
	}
	resp, _ = b.post("/ui/logout", url.Values{"csrf": {b.csrf}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	resp, _ = b.get("/ui/nodes")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after logout: %d", resp.StatusCode)
	}
	// The old cookie value is dead server-side too.
	b2 := newUIBrowser(t, ts)
	u, _ := url.Parse(b.base + "/ui/")
	b2.c.Jar.SetCookies(u, []*http.Cookie{{Name: uiSessionCookie, Value: sc.Value, Path: "/ui"}})
	if resp, _ := b2.get("/ui/nodes"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("replayed cookie after logout: %d", resp.StatusCode)
	}
}

func TestUICSRFRefused(t *testing.T) {
	ts := startServer(t, testConfig())
	b := newUIBrowser(t, ts)
	// Login without the login form's token.
	if resp, _ := b.post("/ui/login", url.Values{"token": {adminToken}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("login without CSRF: %d", resp.StatusCode)
	}
	mustLogin(t, b, adminToken)
	for _, form := range []url.Values{{}, {"csrf": {""}}, {"csrf": {strings.Repeat("0", len(b.csrf))}}, {"csrf": {b.csrf[:10]}}} {
		form.Set("pairingId", "p-1")
		resp, body := b.post("/ui/pairings/approve", form)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "CSRF") {
			t.Fatalf("approve with csrf %q: %d %s", form.Get("csrf"), resp.StatusCode, body)
		}
	}
	// A cross-site POST is refused even with the token.
	req, _ := http.NewRequest("POST", b.base+"/ui/logout", strings.NewReader("csrf="+b.csrf))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin logout: %d", resp.StatusCode)
	}
	// With the token it goes through (the pairing does not exist).
	resp, _ = b.post("/ui/pairings/approve", url.Values{"csrf": {b.csrf}, "pairingId": {"p-1"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve with CSRF: %d", resp.StatusCode)
	}
	if _, body := b.get("/ui/pairings"); !strings.Contains(body, "Not decided: NOT_FOUND") {
		t.Fatalf("flash: %s", body)
	}
}

func TestUIReadScopeSeesNoActionsAndIsRefused(t *testing.T) {
	ts := startServer(t, testConfig())
	b := newUIBrowser(t, ts)
	mustLogin(t, b, readToken)
	_, body := b.get("/ui/nodes")
	if strings.Contains(body, "/ui/pairings") || strings.Contains(body, "/ui/audit") {
		t.Fatalf("read-only nav shows pairings or audit:\n%s", body)
	}
	for _, p := range []string{"/ui/pairings", "/ui/approvals", "/ui/audit", "/ui/api/audit"} {
		resp, body := b.get(p)
		if resp.StatusCode != http.StatusForbidden || strings.Contains(body, `class="approve"`) {
			t.Fatalf("%s: %d", p, resp.StatusCode)
		}
	}
	for _, p := range []string{"/ui/pairings/approve", "/ui/pairings/reject"} {
		resp, body := b.post(p, url.Values{"csrf": {b.csrf}, "pairingId": {"p-1"}})
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, protocol.ScopeApprovals) {
			t.Fatalf("%s: %d %s", p, resp.StatusCode, body)
		}
	}
	resp, body := b.post("/ui/approvals/decide", url.Values{"csrf": {b.csrf}, "approvalId": {"a-1"}, "decision": {"approve"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("approvals decide: %d %s", resp.StatusCode, body)
	}
}

func TestUILoginRateLimitBoundary(t *testing.T) {
	ts := startServer(t, testConfig())
	b := newUIBrowser(t, ts)
	for i := 0; i < UILoginBurst; i++ {
		if resp, _ := b.login(""); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d", i+1, resp.StatusCode)
		}
	}
	resp, body := b.login(adminToken) // one past the burst, even with the right token
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("attempt %d: %d %s", UILoginBurst+1, resp.StatusCode, body)
	}
}

func TestUISessionExpiry(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	cfg := testConfig()
	cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ts := startServer(t, cfg)
	b := newUIBrowser(t, ts)
	mustLogin(t, b, adminToken)
	mu.Lock()
	now = now.Add(UISessionTTL - time.Millisecond)
	mu.Unlock()
	if resp, _ := b.get("/ui/nodes"); resp.StatusCode != 200 {
		t.Fatalf("just before expiry: %d", resp.StatusCode)
	}
	mu.Lock()
	now = now.Add(time.Millisecond)
	mu.Unlock()
	if resp, _ := b.get("/ui/nodes"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("at expiry: %d", resp.StatusCode)
	}
	if resp, _ := b.post("/ui/logout", url.Values{"csrf": {b.csrf}}); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST at expiry: %d", resp.StatusCode)
	}
}

func TestUISessionTableBound(t *testing.T) {
	old := UIMaxSessions
	UIMaxSessions = 2
	defer func() { UIMaxSessions = old }()
	ts := startServer(t, testConfig())
	bs := []*uiBrowser{newUIBrowser(t, ts), newUIBrowser(t, ts), newUIBrowser(t, ts)}
	mustLogin(t, bs[0], adminToken)
	mustLogin(t, bs[1], readToken)
	if resp, _ := bs[2].login(adminToken); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("session %d: %d", UIMaxSessions+1, resp.StatusCode)
	}
	bs[0].post("/ui/logout", url.Values{"csrf": {bs[0].csrf}})
	mustLogin(t, bs[2], adminToken)
}

func TestUINodeNameRendersInert(t *testing.T) {
	const evil = `<img src=x onerror=alert(1)>`
	cfg := testConfig()
	cfg.NodeTokens = append(cfg.NodeTokens, NodeCredential{Name: evil, TokenHash: HashToken("evil-node-token-0123456789")})
	ts := startServer(t, cfg)
	connectNode(t, ts.url, "evil-node-token-0123456789", protocol.NodeAdvertise{}, echoHandler)
	b := newUIBrowser(t, ts)
	mustLogin(t, b, adminToken)
	_, body := b.get("/ui/nodes?q=" + url.QueryEscape(`"><b>`))
	if strings.Contains(body, `"><b>`) {
		t.Fatal("the search query is echoed unescaped")
	}
	_, body = b.get("/ui/nodes")
	if strings.Contains(body, "<img") || strings.Contains(body, "<script>x") {
		t.Fatalf("unescaped value in page:\n%s", body)
	}
	if !strings.Contains(body, "&lt;img src=x onerror=alert(1)&gt;") {
		t.Fatalf("node name not shown escaped:\n%s", body)
	}
	_, body = b.get("/ui/node?id=" + url.QueryEscape(nodeIDOf(evil)))
	if strings.Contains(body, "<img") || !strings.Contains(body, "&lt;img") {
		t.Fatalf("node page:\n%s", body)
	}
}

func TestUIFilterNodes(t *testing.T) {
	nodes := make([]protocol.NodeSummary, 10000)
	for i := range nodes {
		nodes[i] = protocol.NodeSummary{NodeID: fmt.Sprintf("node-%032x", i), Name: fmt.Sprintf("Web-%05d", i), Online: i%3 == 0}
	}
	if n := len(filterNodes(nodes, "", "")); n != 10000 {
		t.Fatalf("all: %d", n)
	}
	if n := len(filterNodes(nodes, "", "online")); n != 3334 {
		t.Fatalf("online: %d", n)
	}
	if n := len(filterNodes(nodes, "", "offline")); n != 6666 {
		t.Fatalf("offline: %d", n)
	}
	if got := filterNodes(nodes, " web-0999 ", ""); len(got) != 10 || got[0].Name != "Web-09990" {
		t.Fatalf("search: %v", got)
	}
	if got := filterNodes(nodes, fmt.Sprintf("%032x", 42), "online"); len(got) != 1 || got[0].Name != "Web-00042" {
		t.Fatalf("by id: %v", got)
	}
}

func TestUIAuditRingKeepsTheNewest(t *testing.T) {
	r := newAuditRing(4)
	all := func(*audit.Record) bool { return true }
	for i := 1; i <= 4; i++ {
		r.add(audit.Record{Method: fmt.Sprint("m", i), NodeID: fmt.Sprint("n", i%2)})
	}
	if got := r.since(0, 100, all); len(got) != 4 || got[0].Method != "m1" {
		t.Fatalf("at capacity: %v", got)
	}
	r.add(audit.Record{Method: "m5"})
	got := r.since(0, 100, all)
	if len(got) != 4 || got[0].Method != "m2" || got[3].Method != "m5" || got[3].Seq != 5 {
		t.Fatalf("one past capacity: %v", got)
	}
	if got := r.since(3, 100, all); len(got) != 2 || got[0].Seq != 4 {
		t.Fatalf("since 3: %v", got)
	}
	if got := r.since(0, 1, all); len(got) != 1 || got[0].Method != "m5" {
		t.Fatalf("max 1: %v", got)
	}
	if got := r.since(0, 100, func(a *audit.Record) bool { return a.NodeID == "n1" }); len(got) != 1 || got[0].Method != "m3" {
		t.Fatalf("by node: %v", got)
	}
}

func TestUIAuditTailSeesConsoleRequests(t *testing.T) {
	ts := startServer(t, testConfig())
	connectNode(t, ts.url, nodeToken, protocol.NodeAdvertise{}, echoHandler)
	b := newUIBrowser(t, ts)
	mustLogin(t, b, adminToken)
	b.get("/ui/node?id=" + nodeIDOf("worker-1")) // node.host.info through the session
	_, body := b.get("/ui/api/audit?method=node.host.info&principal=admin")
	if !strings.Contains(body, `"nodeId":"`+nodeIDOf("worker-1")+`"`) || !strings.Contains(body, `"principal":"admin"`) {
		t.Fatalf("audit tail: %s", body)
	}
	_, body = b.get("/ui/api/audit?method=node.host.info&principal=reader")
	if body != "{\"records\":[]}\n" {
		t.Fatalf("filtered tail: %s", body)
	}
}

// addUINodes puts n offline paired nodes named web-00000… into the
// registry (as a restarted controller loads them from its store).
func addUINodes(s *Server, n int) {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("node-%032x", i)
		name := fmt.Sprintf("web-%05d", i)
		s.reg.nodes[id] = &nodeEntry{rec: nodeRecord{ID: id, Name: name, Identity: protocol.NodeIdentityPaired,
			LastSeenAtMs: 1, ModuleSetDigest: strings.Repeat("ab", 32), Capabilities: []string{"read"},
			Client:  &protocol.ConnectClient{ID: "lemon-node", Version: "2026.11.0"},
			Modules: []protocol.ModuleStatus{{Family: "fs", Version: "1", SHA256: strings.Repeat("cd", 32), State: "loaded"}}}}
		s.reg.names[name] = id
	}
}

var uiRowRE = regexp.MustCompile(`<tr data-node-id="node-[0-9a-f]+">`)

func TestUINodesPageAt10000Nodes(t *testing.T) {
	ts := startServer(t, testConfig())
	addUINodes(ts.Server, 10000)
	connectNode(t, ts.url, nodeToken, protocol.NodeAdvertise{}, echoHandler)
	b := newUIBrowser(t, ts)
	mustLogin(t, b, adminToken)
	_, body := b.get("/ui/nodes")
	if n := len(uiRowRE.FindAllString(body, -1)); n != uiNodesPerPage || !strings.Contains(body, "10002 known, 1 online; 10002 match.") ||
		!strings.Contains(body, "Page 1 of 201") {
		t.Fatalf("first page: %d rows\n%.2000s", n, body)
	}
	_, body = b.get("/ui/nodes?page=201")
	if n := len(uiRowRE.FindAllString(body, -1)); n != 2 || !strings.Contains(body, ">worker-1<") || !strings.Contains(body, ">worker-2<") {
		t.Fatalf("last page: %d rows", n)
	}
	_, body = b.get("/ui/nodes?page=202") // past the end: the last page
	if !strings.Contains(body, "Page 201 of 201") {
		t.Fatal("page past the end")
	}
	_, body = b.get("/ui/nodes?q=WEB-0999&state=offline")
	if n := len(uiRowRE.FindAllString(body, -1)); n != 10 || !strings.Contains(body, "10 match.") || !strings.Contains(body, ">web-09995<") {
		t.Fatalf("search: %d rows", n)
	}
	_, body = b.get("/ui/nodes?state=online")
	if n := len(uiRowRE.FindAllString(body, -1)); n != 1 || !strings.Contains(body, ">worker-1<") {
		t.Fatalf("online: %d rows", n)
	}
}

// BenchmarkUINodesPage10000 renders a filtered Nodes page over 10,000
// nodes (docs/BENCHMARKS.md).
func BenchmarkUINodesPage10000(b *testing.B) {
	s, err := New(testConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	addUINodes(s, 10000)
	sess := &uiSession{operator: "admin", scopes: []string{protocol.ScopeAdmin}, csrf: "x"}
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		s.ui.nodesPage(rec, httptest.NewRequest("GET", "/ui/nodes?q=web-0&state=offline&page=3", nil), sess)
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}

// syncWriter is a bytes.Buffer safe for concurrent writes.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func TestUIOverTLSSecureCookieAndHSTS(t *testing.T) {
	cfg := testConfig()
	tc, pool := selfSigned(t)
	cfg.TLS = tc
	ts := startServer(t, cfg)
	b := newUIBrowser(t, ts)
	b.base = strings.Replace(b.base, "http://", "https://", 1)
	b.c.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	resp, body := b.login(adminToken)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login over TLS: %d %s", resp.StatusCode, body)
	}
	var sc *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == uiSessionCookie {
			sc = c
		}
	}
	if sc == nil || !sc.Secure || !sc.HttpOnly || sc.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie over TLS: %+v", sc)
	}
	resp, _ = b.get("/ui/nodes")
	if resp.StatusCode != 200 || resp.Header.Get("Strict-Transport-Security") == "" {
		t.Fatalf("page over TLS: %d %v", resp.StatusCode, resp.Header)
	}
}
