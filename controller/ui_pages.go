package controller

import (
	"encoding/json"
	"html/template"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"lemon/audit"
	"lemon/protocol"
)

// The console's pages (docs/CONSOLE.md, "Pages"). Reads of the registry
// and module set are made here, after the session's scope is checked;
// every action and every node request goes through the session's
// operator connection (ui.go), where /ws checks it again.

// uiNodesPerPage is the Nodes page's page size.
const uiNodesPerPage = 50

var uiFuncs = template.FuncMap{
	"ms": func(v int64) string {
		if v == 0 {
			return "never"
		}
		return time.UnixMilli(v).UTC().Format("2006-01-02 15:04:05Z")
	},
	"short": func(s string) string {
		if len(s) > 12 {
			return s[:12]
		}
		return s
	},
	"join": strings.Join,
}

type uiPage struct {
	Title, Active       string
	Operator            string
	Scopes              []string
	CSRF                string
	Flash               string
	CanRead, CanApprove bool
	CanAdmin            bool
	Data                any
}

func (cs *console) render(w http.ResponseWriter, sess *uiSession, name, title string, status int, data any) {
	cs.mu.Lock()
	flash := sess.flash
	sess.flash = ""
	cs.mu.Unlock()
	p := uiPage{Title: title, Active: strings.TrimSuffix(name, ".html"), Operator: sess.operator, Scopes: sess.scopes,
		CSRF: sess.csrf, Flash: flash, CanRead: sess.has(protocol.ScopeRead),
		CanApprove: sess.has(protocol.ScopeApprovals), CanAdmin: sess.has(protocol.ScopeAdmin), Data: data}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	cs.tmpl.ExecuteTemplate(w, name, p)
}

func (cs *console) setFlash(sess *uiSession, msg string) {
	cs.mu.Lock()
	sess.flash = msg
	cs.mu.Unlock()
}

// need answers 403 when sess lacks scope: the server refuses, whatever
// the page showed.
func (cs *console) need(w http.ResponseWriter, r *http.Request, sess *uiSession, scope string) bool {
	if sess.has(scope) {
		return true
	}
	if r.Method == http.MethodPost || strings.HasPrefix(r.URL.Path, "/ui/api/") {
		http.Error(w, "this action needs "+scope, http.StatusForbidden)
		return false
	}
	cs.render(w, sess, "denied.html", "Not allowed", http.StatusForbidden, scope)
	return false
}

func (cs *console) route(w http.ResponseWriter, r *http.Request, p string, sess *uiSession, key [32]byte) {
	post := r.Method == http.MethodPost
	switch {
	case p == "/logout" && post:
		cs.logout(w, key)
		http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
	case p == "/" && !post:
		if cs.need(w, r, sess, protocol.ScopeRead) {
			cs.render(w, sess, "overview.html", "Overview", 200, nil)
		}
	case p == "/api/overview" && !post:
		if cs.need(w, r, sess, protocol.ScopeRead) {
			writeJSON(w, cs.samples.points())
		}
	case p == "/nodes" && !post:
		if cs.need(w, r, sess, protocol.ScopeRead) {
			cs.nodesPage(w, r, sess)
		}
	case p == "/node" && !post:
		if cs.need(w, r, sess, protocol.ScopeRead) {
			cs.nodePage(w, r, sess)
		}
	case p == "/modules" && !post:
		if cs.need(w, r, sess, protocol.ScopeRead) {
			cs.modulesPage(w, sess)
		}
	case p == "/pairings" && !post:
		if cs.need(w, r, sess, protocol.ScopeApprovals) {
			cs.pairingsPage(w, r, sess)
		}
	case (p == "/pairings/approve" || p == "/pairings/reject") && post:
		if cs.need(w, r, sess, protocol.ScopeApprovals) {
			cs.decidePairing(w, r, sess, p == "/pairings/approve")
		}
	case p == "/approvals" && !post:
		if cs.need(w, r, sess, protocol.ScopeApprovals) {
			cs.approvalsPage(w, r, sess)
		}
	case p == "/approvals/decide" && post:
		if cs.need(w, r, sess, protocol.ScopeApprovals) {
			cs.decideApproval(w, r, sess)
		}
	case p == "/audit" && !post:
		if cs.need(w, r, sess, protocol.ScopeAdmin) {
			cs.render(w, sess, "audit.html", "Audit", 200, nil)
		}
	case p == "/api/audit" && !post:
		if cs.need(w, r, sess, protocol.ScopeAdmin) {
			cs.auditAPI(w, r)
		}
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// uiNodeRow is one row of the Nodes page.
type uiNodeRow struct {
	protocol.NodeDescription
	Version string
}

type uiNodesData struct {
	Query, State     string
	Rows             []uiNodeRow
	Total, Matched   int
	Page, Pages      int
	PrevPage, NextPg int
	Online           int
}

// filterNodes applies the Nodes page's search (a case-insensitive
// substring of the name or node ID) and state filter ("online",
// "offline", anything else all) to nodes, in order.
func filterNodes(nodes []protocol.NodeSummary, q, state string) []protocol.NodeSummary {
	q = strings.ToLower(strings.TrimSpace(q))
	out := nodes[:0:0]
	for _, n := range nodes {
		if (state == "online" && !n.Online) || (state == "offline" && n.Online) {
			continue
		}
		if q != "" && !strings.Contains(strings.ToLower(n.Name), q) && !strings.Contains(n.NodeID, q) {
			continue
		}
		out = append(out, n)
	}
	return out
}

func (cs *console) nodesPage(w http.ResponseWriter, r *http.Request, sess *uiSession) {
	q := r.URL.Query()
	all := cs.s.reg.list().Nodes
	d := uiNodesData{Query: q.Get("q"), State: q.Get("state"), Total: len(all)}
	if len(d.Query) > 256 {
		d.Query = d.Query[:256]
	}
	for _, n := range all {
		if n.Online {
			d.Online++
		}
	}
	m := filterNodes(all, d.Query, d.State)
	d.Matched = len(m)
	d.Pages = max(1, (len(m)+uiNodesPerPage-1)/uiNodesPerPage)
	d.Page, _ = strconv.Atoi(q.Get("page"))
	d.Page = min(max(d.Page, 1), d.Pages)
	start := (d.Page - 1) * uiNodesPerPage
	for _, n := range m[start:min(len(m), start+uiNodesPerPage)] {
		desc, e := cs.s.reg.describe(n.NodeID)
		if e != nil {
			continue
		}
		row := uiNodeRow{NodeDescription: desc}
		if desc.Client != nil {
			row.Version = desc.Client.Version
		}
		d.Rows = append(d.Rows, row)
	}
	if d.Page > 1 {
		d.PrevPage = d.Page - 1
	}
	if d.Page < d.Pages {
		d.NextPg = d.Page + 1
	}
	cs.render(w, sess, "nodes.html", "Nodes", 200, d)
}

type uiNodeData struct {
	Node     uiNodeRow
	HostInfo string
	InfoErr  string
	Audit    []ringRecord
}

func (cs *console) nodePage(w http.ResponseWriter, r *http.Request, sess *uiSession) {
	id := r.URL.Query().Get("id")
	desc, e := cs.s.reg.describe(id)
	if e != nil {
		cs.render(w, sess, "denied.html", "Not found", http.StatusNotFound, "")
		return
	}
	d := uiNodeData{Node: uiNodeRow{NodeDescription: desc}}
	if desc.Client != nil {
		d.Node.Version = desc.Client.Version
	}
	if desc.Online {
		var info json.RawMessage
		if perr := sess.call(r.Context(), "node.host.info", map[string]string{"nodeId": id}, &info); perr != nil {
			d.InfoErr = errText(perr)
		} else {
			var v any
			if json.Unmarshal(info, &v) == nil {
				b, _ := json.MarshalIndent(v, "", "  ")
				d.HostInfo = string(b)
			}
		}
	} else {
		d.InfoErr = "the node is offline"
	}
	if sess.has(protocol.ScopeAdmin) {
		d.Audit = cs.ring.since(0, 50, func(a *audit.Record) bool { return a.NodeID == id })
	}
	cs.render(w, sess, "node.html", "Node", 200, d)
}

// errText is a protocol error for a page: code, domain code and message
// (all bounded and content-free by the controller).
func errText(e *protocol.Error) string {
	s := e.Code
	if d := e.DomainCode(); d != "" {
		s += " " + d
	}
	return s + ": " + e.Message
}

type uiDigestGroup struct {
	Digest         string
	Current        bool
	Nodes, Online  int
	Names          []string
	More           int
	RefusedModules int
}

type uiModulesData struct {
	Pinned *protocol.PinnedSet
	Groups []uiDigestGroup
}

func (cs *console) modulesPage(w http.ResponseWriter, sess *uiSession) {
	st := cs.s.reg.modulesStatus(1 << 30)
	d := uiModulesData{Pinned: st.Pinned}
	by := map[string]*uiDigestGroup{}
	for _, n := range st.Nodes {
		g := by[n.ModuleSetDigest]
		if g == nil {
			g = &uiDigestGroup{Digest: n.ModuleSetDigest, Current: n.Current}
			by[n.ModuleSetDigest] = g
		}
		g.Nodes++
		if n.Online {
			g.Online++
		}
		g.RefusedModules += len(n.Refused)
		if len(g.Names) < 20 {
			g.Names = append(g.Names, n.Name)
		} else {
			g.More++
		}
	}
	for _, g := range by {
		d.Groups = append(d.Groups, *g)
	}
	sort.Slice(d.Groups, func(i, j int) bool {
		if d.Groups[i].Current != d.Groups[j].Current {
			return d.Groups[i].Current
		}
		return d.Groups[i].Nodes > d.Groups[j].Nodes
	})
	cs.render(w, sess, "modules.html", "Module set", 200, d)
}

type uiPairingsData struct {
	Pairings []protocol.PairingInfo
	Err      string
}

func (cs *console) pairingsPage(w http.ResponseWriter, r *http.Request, sess *uiSession) {
	var res protocol.PairListResult
	d := uiPairingsData{}
	if perr := sess.call(r.Context(), "node.pair.list", struct{}{}, &res); perr != nil {
		d.Err = errText(perr)
	}
	for _, p := range res.Pairings {
		if p.Status == protocol.PairStatusPending {
			d.Pairings = append(d.Pairings, p)
		}
	}
	cs.render(w, sess, "pairings.html", "Pairings", 200, d)
}

// decidePairing approves or rejects one pairing with node.pair.approve or
// node.pair.reject on the session's connection (the same code path, scope
// and self-decision rules as `lemon nodes approve`).
func (cs *console) decidePairing(w http.ResponseWriter, r *http.Request, sess *uiSession, approve bool) {
	id := r.PostForm.Get("pairingId")
	if id == "" || len(id) > maxIDBytes {
		http.Error(w, "pairingId is required", http.StatusBadRequest)
		return
	}
	method := "node.pair.reject"
	if approve {
		method = "node.pair.approve"
	}
	var res protocol.PairDecisionResult
	if perr := sess.call(r.Context(), method, protocol.PairDecisionParams{PairingID: id}, &res); perr != nil {
		cs.setFlash(sess, "Not decided: "+errText(perr))
	} else {
		cs.setFlash(sess, "Pairing "+res.Status+": "+res.Name)
	}
	http.Redirect(w, r, "/ui/pairings", http.StatusSeeOther)
}

type uiApprovalsData struct {
	Approvals []protocol.ApprovalInfo
	Err       string
}

func (cs *console) approvalsPage(w http.ResponseWriter, r *http.Request, sess *uiSession) {
	var res protocol.ApprovalListResult
	d := uiApprovalsData{}
	if perr := sess.call(r.Context(), protocol.MethodApprovalList, protocol.ApprovalListParams{}, &res); perr != nil {
		d.Err = errText(perr)
	}
	d.Approvals = res.Approvals
	cs.render(w, sess, "approvals.html", "Approvals", 200, d)
}

// decideApproval approves or denies one held request with
// approval.decide on the session's connection.
func (cs *console) decideApproval(w http.ResponseWriter, r *http.Request, sess *uiSession) {
	id, dec := r.PostForm.Get("approvalId"), r.PostForm.Get("decision")
	if id == "" || len(id) > maxIDBytes || (dec != protocol.DecisionApprove && dec != protocol.DecisionDeny) {
		http.Error(w, `approvalId and decision ("approve" or "deny") are required`, http.StatusBadRequest)
		return
	}
	var res protocol.ApprovalDecideResult
	if perr := sess.call(r.Context(), protocol.MethodApprovalDecide, protocol.ApprovalDecideParams{ApprovalID: id, Decision: dec}, &res); perr != nil {
		cs.setFlash(sess, "Not decided: "+errText(perr))
	} else {
		cs.setFlash(sess, "Request "+res.Status)
	}
	http.Redirect(w, r, "/ui/approvals", http.StatusSeeOther)
}

// auditAPI answers the Audit page's poll: the records after ?after=SEQ
// matching the filters (exact principal, method, nodeId, outcome), at
// most 200, oldest first.
func (cs *console) auditAPI(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, _ := strconv.ParseUint(q.Get("after"), 10, 64)
	principal, method, node, outcome := q.Get("principal"), q.Get("method"), q.Get("node"), q.Get("outcome")
	recs := cs.ring.since(after, 200, func(a *audit.Record) bool {
		return (principal == "" || a.Principal == principal) && (method == "" || a.Method == method) &&
			(node == "" || a.NodeID == node) && (outcome == "" || a.Outcome == outcome)
	})
	writeJSON(w, map[string]any{"records": recs})
}

// sampler keeps the Overview's recent points, one per sampleEvery.
type sampler struct {
	mu   sync.Mutex
	pts  []uiPoint
	max  int
	last struct {
		ok                   bool
		at                   time.Time
		reqs, errs, sum, cnt float64
	}
}

const sampleEvery = 2 * time.Second

// uiPoint is one Overview sample: requests and errors per second and the
// mean latency (ms) over the interval before T (Unix ms), nodes online at T.
type uiPoint struct {
	T         int64   `json:"t"`
	RPS       float64 `json:"rps"`
	ErrPS     float64 `json:"errps"`
	LatencyMs float64 `json:"latencyMs"`
	Online    float64 `json:"online"`
}

func newSampler(n int) *sampler { return &sampler{max: n} }

func (sp *sampler) points() []uiPoint {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return append([]uiPoint{}, sp.pts...)
}

// run samples until the server closes.
func (cs *console) run() {
	defer cs.s.wg.Done()
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	cs.sample()
	for {
		select {
		case <-cs.s.closedCh:
			cs.mu.Lock()
			for k, sess := range cs.sessions {
				delete(cs.sessions, k)
				go sess.conn.Close()
			}
			cs.mu.Unlock()
			return
		case <-t.C:
			cs.sample()
		}
	}
}

// sample reads the controller's own metrics (docs/OPERATIONS.md).
func (cs *console) sample() {
	mfs, err := cs.s.metrics.reg.Gather()
	if err != nil {
		return
	}
	var reqs, errs, sum, cnt, online float64
	for _, mf := range mfs {
		switch mf.GetName() {
		case "lemon_controller_requests_total":
			for _, m := range mf.GetMetric() {
				v := m.GetCounter().GetValue()
				reqs += v
				for _, l := range m.GetLabel() {
					if l.GetName() == "outcome" && l.GetValue() != "ok" {
						errs += v
					}
				}
			}
		case "lemon_controller_request_duration_seconds":
			for _, m := range mf.GetMetric() {
				sum += m.GetHistogram().GetSampleSum()
				cnt += float64(m.GetHistogram().GetSampleCount())
			}
		case "lemon_controller_nodes":
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "state" && l.GetValue() == "online" {
						online += m.GetGauge().GetValue()
					}
				}
			}
		}
	}
	now := time.Now()
	sp := cs.samples
	sp.mu.Lock()
	defer sp.mu.Unlock()
	p := uiPoint{T: now.UnixMilli(), Online: online}
	if sp.last.ok {
		dt := now.Sub(sp.last.at).Seconds()
		if dt > 0 {
			p.RPS = (reqs - sp.last.reqs) / dt
			p.ErrPS = (errs - sp.last.errs) / dt
		}
		if dc := cnt - sp.last.cnt; dc > 0 {
			p.LatencyMs = (sum - sp.last.sum) / dc * 1000
		}
	}
	sp.last.ok, sp.last.at, sp.last.reqs, sp.last.errs, sp.last.sum, sp.last.cnt = true, now, reqs, errs, sum, cnt
	sp.pts = append(sp.pts, p)
	if len(sp.pts) > sp.max {
		sp.pts = sp.pts[len(sp.pts)-sp.max:]
	}
}
