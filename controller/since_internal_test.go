package controller

import (
	"strings"
	"testing"
	"time"

	"lemon/protocol"
)

// A node another controller holds lists the holder's connect stamp as its
// connect time (lemon nodes SINCE, the console's "Online since").
func TestSummaryRemoteHeldHasConnectTime(t *testing.T) {
	e := &nodeEntry{rec: nodeRecord{ID: "n-1", Name: "a", LastSeenAtMs: 1700000000123}, remoteOnline: true}
	if s := e.summary(); !s.Online || s.ConnectedAtMs != 1700000000123 {
		t.Fatalf("remote-held: %+v", s)
	}
	e.remoteOnline = false
	if s := e.summary(); s.Online || s.ConnectedAtMs != 0 || s.LastSeenAtMs != 1700000000123 {
		t.Fatalf("offline: %+v", s)
	}
}

// The console shows an online node's connect time under "Online since",
// not "Last seen".
func TestUIOnlineSince(t *testing.T) {
	ts := startServer(t, testConfig())
	connectNode(t, ts.url, nodeToken, protocol.NodeAdvertise{}, echoHandler)
	b := newUIBrowser(t, ts)
	mustLogin(t, b, adminToken)
	var n protocol.NodeSummary
	for _, x := range ts.Server.reg.list().Nodes {
		if x.Online {
			n = x
		}
	}
	want := time.UnixMilli(n.ConnectedAtMs).UTC().Format("2006-01-02 15:04:05Z")
	_, body := b.get("/ui/nodes")
	if n.ConnectedAtMs == 0 || !strings.Contains(body, "<th>Online since / last seen</th>") || !strings.Contains(body, `<td class="since">`+want+`</td>`) {
		t.Fatalf("nodes page, want %s:\n%.3000s", want, body)
	}
	_, body = b.get("/ui/node?id=" + n.NodeID)
	if !strings.Contains(body, `<dt>Online since</dt><dd id="since">`+want+`</dd>`) {
		t.Fatalf("node page, want %s:\n%.3000s", want, body)
	}
}

// The console has an embedded SVG icon under 1 KB, linked from every
// page, and /favicon.ico points to it: no 404 in the browser.
func TestUIFavicon(t *testing.T) {
	ts := startServer(t, testConfig())
	b := newUIBrowser(t, ts)
	resp, body := b.get("/ui/static/favicon.svg")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/svg+xml" || len(body) >= 1024 || !strings.HasPrefix(body, "<svg ") {
		t.Fatalf("icon: %d %q, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
	if _, body = b.get("/ui/login"); !strings.Contains(body, `<link rel="icon" href="/ui/static/favicon.svg" type="image/svg+xml">`) {
		t.Fatalf("login page has no icon link:\n%.1000s", body)
	}
	if resp, _ = b.get("/favicon.ico"); resp.StatusCode != 301 || resp.Header.Get("Location") != "/ui/static/favicon.svg" {
		t.Fatalf("/favicon.ico: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}
