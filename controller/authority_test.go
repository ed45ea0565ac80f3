package controller

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"lemon/policies/authority"
	"lemon/protocol"
)

const (
	roToken        = "ro-token-0123456789abcdef"
	ciToken        = "ci-token-0123456789abcdef"
	askToken       = "ask-token-0123456789abcdef"
	apprToken      = "approver-token-0123456789abcdef"
	roApproveToken = "ro-approver-token-0123456789abcdef"
)

func opPolicy(t testing.TB, m map[string]any) *authority.OperatorPolicy {
	t.Helper()
	p, err := authority.ParseOperatorPolicy(m)
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

// authorityConfig: admin (full access), ro (profile read_only), ci (make
// only, runs up to 1000 ms and 64 output bytes, capability exec only), ask
// (node.fs.write held "always", node.process.run held "once"; also holds
// operator.approvals), approver (operator.approvals), ro-approver
// (operator.approvals under read_only).
func authorityConfig(t testing.TB) Config {
	cfg := testConfig()
	admin := []string{protocol.ScopeAdmin}
	cfg.Operators = append(cfg.Operators,
		OperatorCredential{Name: "ro", TokenHash: HashToken(roToken), Scopes: admin,
			Policy: opPolicy(t, map[string]any{"profile": "read_only"})},
		OperatorCredential{Name: "ci", TokenHash: HashToken(ciToken), Scopes: admin,
			Policy: opPolicy(t, map[string]any{"allowed_commands": []any{"make"}, "max_timeout_ms": int64(1000),
				"max_output_bytes": int64(64), "capabilities": []any{"exec"}})},
		OperatorCredential{Name: "ask", TokenHash: HashToken(askToken), Scopes: admin,
			Policy: opPolicy(t, map[string]any{"require_approval": []any{"node.fs.write"},
				"approvals": map[string]any{"node.process.run": "once"}, "max_file_bytes": int64(4)})},
		OperatorCredential{Name: "approver", TokenHash: HashToken(apprToken), Scopes: []string{protocol.ScopeApprovals}},
		OperatorCredential{Name: "ro-approver", TokenHash: HashToken(roApproveToken), Scopes: []string{protocol.ScopeApprovals},
			Policy: opPolicy(t, map[string]any{"profile": "read_only"})},
	)
	return cfg
}

func authorityNode(t testing.TB, url string) *fakeNode {
	m := defaultMethods()
	for _, x := range []string{"node.fs.read", "node.fs.write", "node.process.run"} {
		m[x] = 1
	}
	return connectNode(t, url, nodeToken, protocol.NodeAdvertise{Methods: m}, echoHandler)
}

// startCtx sends a request with an executionContext member.
func (p *peer) startCtx(method string, params any, ec string) chan frame {
	id := fmt.Sprintf("x%d", p.nextID.Add(1))
	ch := make(chan frame, 1)
	p.mu.Lock()
	p.waiters[id] = ch
	p.mu.Unlock()
	p.writeJSON(protocol.Request{Type: protocol.FrameReq, ID: id, Method: method, Params: mustJSON(p.t, params),
		ExecutionContext: json.RawMessage(ec)})
	return ch
}

func runParams(nodeID, pid string, argv ...string) map[string]any {
	return map[string]any{"nodeId": nodeID, "processId": pid, "cwd": "/tmp", "argv": argv, "stdinBase64": "",
		"timeoutMs": 1000, "maxOutputBytes": 64}
}

func writeParams(nodeID, data string) map[string]any {
	return map[string]any{"nodeId": nodeID, "path": "/tmp/x", "dataBase64": data}
}

// nothingSent fails if the node got a request.
func nothingSent(t *testing.T, n *fakeNode) {
	t.Helper()
	select {
	case r := <-n.requests:
		t.Fatalf("the node got %s", r.Method)
	default:
	}
}

func received(t *testing.T, n *fakeNode) (protocol.InvokeRequest, authority.ExecutionContext) {
	t.Helper()
	select {
	case r := <-n.requests:
		ctx, err := authority.ParseContext(r.ExecutionContext)
		if err != nil {
			t.Fatalf("context of %s: %v (%s)", r.Method, err, r.ExecutionContext)
		}
		if ctx.RunID != r.InvokeID {
			t.Fatalf("runId %s, invokeId %s", ctx.RunID, r.InvokeID)
		}
		return r, ctx
	case <-timeAfter():
		t.Fatal("the node got nothing")
	}
	return protocol.InvokeRequest{}, authority.ExecutionContext{}
}

func TestAuthorityContextOnEveryRequest(t *testing.T) {
	s := startServer(t, authorityConfig(t))
	n := authorityNode(t, s.url)
	nid := nodeIDOf("worker-1")
	admin := connectOperator(t, s.url, adminToken)
	if f := admin.call("node.host.info", map[string]any{"nodeId": nid}); !f.OK {
		t.Fatalf("host.info: %s", f.raw)
	}
	_, ctx := received(t, n)
	if ctx.Principal != "admin" || ctx.Provenance != "controller" || strings.Join(ctx.Capabilities, ",") != "hostinfo" ||
		ctx.Policy.Allow != nil || ctx.Workspace != nil {
		t.Fatalf("context %+v", ctx)
	}
	// Least authority: a write carries write only.
	if f := admin.call("node.fs.write", writeParams(nid, "aGk=")); !f.OK {
		t.Fatalf("write: %s", f.raw)
	}
	if _, ctx = received(t, n); strings.Join(ctx.Capabilities, ",") != "write" {
		t.Fatalf("write context caps %v", ctx.Capabilities)
	}
	// Through node.invoke too.
	if f := admin.call(protocol.MethodNodeInvoke, map[string]any{"nodeId": nid, "method": "node.host.info"}); !f.OK {
		t.Fatalf("invoke: %s", f.raw)
	}
	if _, ctx = received(t, n); ctx.Principal != "admin" {
		t.Fatalf("invoke context %+v", ctx)
	}
}

func TestAuthorityReadOnlyProfile(t *testing.T) {
	s := startServer(t, authorityConfig(t))
	n := authorityNode(t, s.url)
	nid := nodeIDOf("worker-1")
	ro := connectOperator(t, s.url, roToken)
	if f := ro.call("node.fs.read", map[string]any{"nodeId": nid, "path": "/tmp/x"}); !f.OK {
		t.Fatalf("read: %s", f.raw)
	}
	if _, ctx := received(t, n); !strings.Contains(string(mustJSON(t, ctx.Policy)), `"deny":["class:mutation"]`) {
		t.Fatalf("policy not carried: %+v", ctx.Policy)
	}
	for _, c := range []struct {
		method string
		params any
	}{
		{"node.fs.write", writeParams(nid, "aGk=")},
		{"node.process.run", runParams(nid, "p1", "true")},
		{protocol.MethodNodeInvoke, map[string]any{"nodeId": nid, "method": "node.fs.write", "args": writeParams(nid, "aGk=")}},
		{protocol.MethodNodeRename, map[string]any{"nodeId": nid, "name": "other"}},
	} {
		f := ro.call(c.method, c.params)
		wantError(t, f, protocol.CodeForbidden, protocol.DomainPolicyDenied)
		wantRetry(t, f, false, false)
	}
	nothingSent(t, n)
}

func TestAuthorityCommandsAndLimits(t *testing.T) {
	s := startServer(t, authorityConfig(t))
	n := authorityNode(t, s.url)
	nid := nodeIDOf("worker-1")
	ci := connectOperator(t, s.url, ciToken)
	if f := ci.call("node.process.run", runParams(nid, "p1", "make", "test")); !f.OK {
		t.Fatalf("make: %s", f.raw)
	}
	if _, ctx := received(t, n); strings.Join(ctx.Capabilities, ",") != "exec" || ctx.Limits.MaxTimeoutMs != 1000 {
		t.Fatalf("context %+v", ctx)
	}
	for _, argv0 := range []string{"sh", "/usr/bin/make", "makes", "Make"} {
		wantError(t, ci.call("node.process.run", runParams(nid, "p2", argv0)), protocol.CodeForbidden, protocol.DomainCommandDenied)
	}
	over := runParams(nid, "p3", "make")
	over["timeoutMs"] = 1001
	f := ci.call("node.process.run", over)
	wantError(t, f, protocol.CodeForbidden, protocol.DomainLimitExceeded)
	if f.Error.Details.Field != "timeoutMs" {
		t.Fatalf("field %q", f.Error.Details.Field)
	}
	over = runParams(nid, "p3", "make")
	over["maxOutputBytes"] = 65
	wantError(t, ci.call("node.process.run", over), protocol.CodeForbidden, protocol.DomainLimitExceeded)
	// Its capabilities are exec only.
	wantError(t, ci.call("node.fs.read", map[string]any{"nodeId": nid, "path": "/tmp/x"}), protocol.CodeForbidden, protocol.DomainCapabilityDenied)
	nothingSent(t, n)
	// At the limits it passes.
	at := runParams(nid, "p4", "make")
	at["maxOutputBytes"] = 64
	if f := ci.call("node.process.run", at); !f.OK {
		t.Fatalf("at the limits: %s", f.raw)
	}
}

func TestAuthorityNarrowing(t *testing.T) {
	s := startServer(t, authorityConfig(t))
	n := authorityNode(t, s.url)
	nid := nodeIDOf("worker-1")
	ci := connectOperator(t, s.url, ciToken)
	admin := connectOperator(t, s.url, adminToken)
	cases := []struct {
		name, ec, code, domain string
	}{
		{"wider capabilities", `{"capabilities":["exec","write"]}`, protocol.CodeForbidden, protocol.DomainContextWider},
		{"wider limit", `{"limits":{"maxTimeoutMs":1001}}`, protocol.CodeForbidden, protocol.DomainContextWider},
		{"other principal", `{"principal":"admin"}`, protocol.CodeForbidden, protocol.DomainPrincipalMismatch},
		{"malformed", `{"capabilities":"exec"}`, protocol.CodeInvalidRequest, protocol.DomainContextInvalid},
		{"runId is the controller's", `{"runId":"mine"}`, protocol.CodeInvalidRequest, protocol.DomainContextInvalid},
		{"not an object", `[1]`, protocol.CodeInvalidRequest, protocol.DomainContextInvalid},
		{"narrower commands refuse make", `{"policy":{"allowed_commands":["git"]}}`, protocol.CodeForbidden, protocol.DomainCommandDenied},
		{"no capabilities", `{"capabilities":[]}`, protocol.CodeForbidden, protocol.DomainCapabilityDenied},
	}
	for _, c := range cases {
		f := ci.await(ci.startCtx("node.process.run", runParams(nid, "p1", "make"), c.ec))
		if f.OK {
			t.Fatalf("%s: accepted", c.name)
		}
		wantError(t, f, c.code, c.domain)
	}
	nothingSent(t, n)
	// A narrower context reaches the node as narrowed.
	f := ci.await(ci.startCtx("node.process.run", runParams(nid, "p1", "make"),
		`{"principal":"ci","policy":{"allowed_commands":["make","git"],"sandbox":true},"workspace":{"root":"/srv/ws","mode":"read_only"},"limits":{"maxTimeoutMs":1000}}`))
	if !f.OK {
		t.Fatalf("narrowed: %s", f.raw)
	}
	_, ctx := received(t, n)
	if strings.Join(ctx.Policy.AllowedCommands, ",") != "make" || !ctx.Policy.Sandbox || ctx.Workspace == nil ||
		ctx.Workspace.Root != "/srv/ws" || !ctx.ReadOnly() || ctx.Provenance != "caller" {
		t.Fatalf("narrowed context %+v", ctx)
	}
	// A caller's narrowing applies to controller mutations too.
	f = admin.await(admin.startCtx(protocol.MethodNodeRename, map[string]any{"nodeId": nid, "name": "w2"}, `{"policy":{"profile":"read_only"}}`))
	wantError(t, f, protocol.CodeForbidden, protocol.DomainPolicyDenied)
	f = admin.await(admin.startCtx(protocol.MethodNodeList, map[string]any{}, `{"principal":"ci"}`))
	wantError(t, f, protocol.CodeForbidden, protocol.DomainPrincipalMismatch)
}

// approvalEvent waits for the requester's approval.requested event.
func approvalEvent(t *testing.T, p *peer, name string) protocol.ApprovalInfo {
	t.Helper()
	for {
		f := p.next()
		if f.Type == protocol.FrameEvent && f.Event == name {
			var info protocol.ApprovalInfo
			if err := json.Unmarshal(f.Payload, &info); err != nil {
				t.Fatal(err)
			}
			return info
		}
	}
}

func TestApprovalFlow(t *testing.T) {
	s := startServer(t, authorityConfig(t))
	n := authorityNode(t, s.url)
	nid := nodeIDOf("worker-1")
	ask := connectOperator(t, s.url, askToken)
	approver := connectOperator(t, s.url, apprToken)
	roApprover := connectOperator(t, s.url, roApproveToken)

	// Approve.
	ch := ask.start("node.fs.write", writeParams(nid, "aGk="))
	info := approvalEvent(t, ask, protocol.EventApprovalRequested)
	if info.Method != "node.fs.write" || info.NodeID != nid || info.Principal != "ask" || info.Mode != "always" ||
		info.Status != protocol.ApprovalPending || len(info.ParamsSHA256) != 64 || info.ArgvSHA256 != "" {
		t.Fatalf("approval info %+v", info)
	}
	nothingSent(t, n)
	var list protocol.ApprovalListResult
	f := approver.call(protocol.MethodApprovalList, nil)
	if json.Unmarshal(f.Payload, &list) != nil || len(list.Approvals) != 1 || list.Approvals[0].ApprovalID != info.ApprovalID {
		t.Fatalf("list: %s", f.raw)
	}
	if strings.Contains(string(f.raw), "aGk=") || strings.Contains(string(f.raw), "/tmp/x") {
		t.Fatalf("list carries content: %s", f.raw)
	}
	// The requester cannot decide its own request, even holding operator.approvals.
	wantError(t, ask.call(protocol.MethodApprovalDecide, protocol.ApprovalDecideParams{ApprovalID: info.ApprovalID, Decision: "approve"}),
		protocol.CodeForbidden, protocol.DomainSelfApproval)
	// An approver whose own policy is read_only cannot decide.
	wantError(t, roApprover.call(protocol.MethodApprovalDecide, protocol.ApprovalDecideParams{ApprovalID: info.ApprovalID, Decision: "approve"}),
		protocol.CodeForbidden, protocol.DomainPolicyDenied)
	wantError(t, approver.call(protocol.MethodApprovalDecide, protocol.ApprovalDecideParams{ApprovalID: info.ApprovalID, Decision: "maybe"}),
		protocol.CodeInvalidParams, "")
	f = approver.call(protocol.MethodApprovalDecide, protocol.ApprovalDecideParams{ApprovalID: info.ApprovalID, Decision: "approve"})
	if !f.OK || !strings.Contains(string(f.Payload), `"approved"`) {
		t.Fatalf("decide: %s", f.raw)
	}
	if res := ask.await(ch); !res.OK {
		t.Fatalf("approved write: %s", res.raw)
	}
	if ev := approvalEvent(t, ask, protocol.EventApprovalResolved); ev.Status != protocol.ApprovalApproved {
		t.Fatalf("resolved %+v", ev)
	}
	received(t, n)
	// A decided request is gone.
	wantError(t, approver.call(protocol.MethodApprovalDecide, protocol.ApprovalDecideParams{ApprovalID: info.ApprovalID, Decision: "deny"}),
		protocol.CodeNotFound, protocol.DomainApprovalNotFound)

	// Deny: nothing is sent.
	ch = ask.start("node.fs.write", writeParams(nid, "aGk="))
	info = approvalEvent(t, ask, protocol.EventApprovalRequested)
	approver.call(protocol.MethodApprovalDecide, protocol.ApprovalDecideParams{ApprovalID: info.ApprovalID, Decision: "deny"})
	f = ask.await(ch)
	wantError(t, f, protocol.CodeForbidden, protocol.DomainApprovalDenied)
	wantRetry(t, f, false, false)
	nothingSent(t, n)

	// A limit is checked before anything is held.
	wantError(t, ask.call("node.fs.write", writeParams(nid, "aGVsbG8=")), protocol.CodeForbidden, protocol.DomainLimitExceeded)

	// Timeout.
	s.approvals.timeout.Store(int64(200 * time.Millisecond))
	f = ask.call("node.fs.write", writeParams(nid, "aGk="))
	wantError(t, f, protocol.CodeTimeout, protocol.DomainApprovalTimeout)
	wantRetry(t, f, true, false)
	nothingSent(t, n)
	timedOut := approvalEvent(t, ask, protocol.EventApprovalRequested)
	if ev := approvalEvent(t, ask, protocol.EventApprovalResolved); ev.ApprovalID != timedOut.ApprovalID || ev.Status != protocol.ApprovalExpired {
		t.Fatalf("expired event %+v", ev)
	}
	if f := approver.call(protocol.MethodApprovalList, nil); strings.Contains(string(f.Payload), timedOut.ApprovalID) {
		t.Fatalf("an expired request is still listed: %s", f.raw)
	}
	s.approvals.timeout.Store(int64(5 * time.Second))

	// Once: approved once, an identical run (another processId) passes;
	// another argv asks again.
	ch = ask.start("node.process.run", runParams(nid, "p1", "make"))
	info = approvalEvent(t, ask, protocol.EventApprovalRequested)
	if info.Mode != "once" || len(info.ArgvSHA256) != 64 || len(info.CwdSHA256) != 64 {
		t.Fatalf("run approval %+v", info)
	}
	approver.call(protocol.MethodApprovalDecide, protocol.ApprovalDecideParams{ApprovalID: info.ApprovalID, Decision: "approve"})
	if f := ask.await(ch); !f.OK {
		t.Fatalf("approved run: %s", f.raw)
	}
	received(t, n)
	if f := ask.call("node.process.run", runParams(nid, "p2", "make")); !f.OK {
		t.Fatalf("granted run: %s", f.raw)
	}
	received(t, n)
	s.approvals.timeout.Store(int64(100 * time.Millisecond))
	wantError(t, ask.call("node.process.run", runParams(nid, "p3", "make", "all")), protocol.CodeTimeout, protocol.DomainApprovalTimeout)
}

func TestApprovalBounds(t *testing.T) {
	cfg := authorityConfig(t)
	cfg.MaxPendingApprovals = 2
	cfg.MaxPendingApprovalsPerPrincipal = 1
	s := startServer(t, cfg)
	authorityNode(t, s.url)
	nid := nodeIDOf("worker-1")
	ask := connectOperator(t, s.url, askToken)
	approver := connectOperator(t, s.url, apprToken)
	ch := ask.start("node.fs.write", writeParams(nid, "aGk="))
	info := approvalEvent(t, ask, protocol.EventApprovalRequested)
	// One held for this principal: the next is refused at once.
	f := ask.call("node.fs.write", writeParams(nid, "aGk="))
	wantError(t, f, protocol.CodeRateLimited, protocol.DomainTooManyApprovals)
	wantRetry(t, f, true, false)
	approver.call(protocol.MethodApprovalDecide, protocol.ApprovalDecideParams{ApprovalID: info.ApprovalID, Decision: "deny"})
	ask.await(ch)
	// Freed: the next is held again.
	ch = ask.start("node.fs.write", writeParams(nid, "aGk="))
	info = approvalEvent(t, ask, protocol.EventApprovalRequested)
	approver.call(protocol.MethodApprovalDecide, protocol.ApprovalDecideParams{ApprovalID: info.ApprovalID, Decision: "approve"})
	if f := ask.await(ch); !f.OK {
		t.Fatalf("after freeing: %s", f.raw)
	}
}

// An admin whose policy may not decide pairings cannot pair a node of its
// own in one step: its request waits for an approver.
func TestAuthorityReadOnlyAdminPairsInTwoSteps(t *testing.T) {
	s := startServer(t, authorityConfig(t))
	for tok, want := range map[string]string{adminToken: protocol.PairStatusApproved, roToken: protocol.PairStatusPending} {
		p := connectOperator(t, s.url, tok)
		f := p.call(protocol.MethodPairRequest, protocol.PairRequestParams{Name: "n-" + tok[:2], NodeType: "execution",
			Methods: map[string]int{mEcho: 1}})
		var res protocol.PairRequestResult
		if !f.OK || json.Unmarshal(f.Payload, &res) != nil || res.Status != want {
			t.Fatalf("%s: %s, want status %s", tok[:2], f.raw, want)
		}
	}
}

// BenchmarkAuthorize is the controller's per-request authority work for a
// node.process.run: build the context, check it, encode it.
func BenchmarkAuthorize(b *testing.B) {
	op := opPolicy(b, map[string]any{"profile": "minimal_core", "allowed_commands": []any{"make", "git"},
		"max_timeout_ms": int64(60000), "approvals": map[string]any{"node.fs.write": "once"}})
	c := &conn{op: &operatorEntry{name: "ci", policy: *op}}
	spec := routeSpec{MethodSpec: protocol.MethodSpec{Name: protocol.MethodProcessRun}, Capability: "exec"}
	params := mustJSON(b, runParams("node-1", "p1", "make", "-j4"))
	b.ReportAllocs()
	for b.Loop() {
		ctx, e := c.requestContext("0123456789abcdef0123456789abcdef", methodOf(spec), nil)
		if e == nil {
			e = checkCall(ctx, methodOf(spec), params)
		}
		if e != nil {
			b.Fatal(e)
		}
		if _, err := json.Marshal(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func TestOperatorNamesAreUniquePrincipals(t *testing.T) {
	cfg := testConfig()
	cfg.Operators = append(cfg.Operators, OperatorCredential{Name: "admin", TokenHash: HashToken("another-token-0123456789"),
		Scopes: []string{protocol.ScopeRead}})
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), `name "admin" repeats another`) {
		t.Fatalf("New = %v", err)
	}
}

func TestHelloAdvertisesApprovals(t *testing.T) {
	s := startServer(t, authorityConfig(t))
	p := dialPeer(t, s.url)
	p.writeJSON(protocol.Request{Type: protocol.FrameReq, ID: "c1", Method: "connect",
		Params: mustJSON(t, protocol.ConnectParams{Role: protocol.RoleOperator, Auth: protocol.ConnectAuth{Token: apprToken},
			Client: protocol.ConnectClient{ID: "test", Version: "1"}})})
	h := p.next()
	methods := strings.Join(h.Features.Methods, ",")
	events := strings.Join(h.Features.Events, ",")
	if !strings.Contains(methods, protocol.MethodApprovalList) || !strings.Contains(methods, protocol.MethodApprovalDecide) ||
		!strings.Contains(events, protocol.EventApprovalRequested) || !strings.Contains(events, protocol.EventApprovalResolved) {
		t.Fatalf("hello-ok: %s", h.raw)
	}
	for _, m := range []string{protocol.MethodApprovalList, protocol.MethodApprovalDecide} {
		if sc, ok := protocol.RequiredScope(m); !ok || sc != protocol.ScopeApprovals {
			t.Fatalf("RequiredScope(%s) = %s %v", m, sc, ok)
		}
	}
	// operator.read cannot list approvals.
	wantError(t, connectOperator(t, s.url, readToken).call(protocol.MethodApprovalList, nil), protocol.CodeForbidden, "")
}
