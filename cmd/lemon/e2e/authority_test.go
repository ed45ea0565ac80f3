package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"lemon/protocol"
)

// Issue 12 with the real binaries, the controller side (docs/POLICY.md):
// an operator entry's [operators.policy] decides every request before
// anything reaches the node.

// authorityCluster runs a controller whose policy adds one operator entry
// per name in ops (its TOML body after [[operators]], with token_env
// E2E_OP_<NAME>) and a node token; it returns the cluster and each
// entry's operator.
func authorityCluster(t *testing.T, limits string, ops map[string]string) (*cluster, map[string]*operator) {
	t.Helper()
	var text strings.Builder
	text.WriteString(limits)
	var extraEnv []string
	tokens := map[string]string{}
	for name, body := range ops {
		tok := "lop_" + randHex(24)
		tokens[name] = tok
		envName := "E2E_OP_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		extraEnv = append(extraEnv, envName+"="+tok)
		fmt.Fprintf(&text, "\n[[operators]]\nname = %q\ntoken_env = %q\n%s\n", name, envName, body)
	}
	nodeToken := "lnt_" + randHex(24)
	text.WriteString("\n[[node_tokens]]\nname = \"worker-1\"\ntoken_env = \"E2E_NODE_TOKEN\"\n")
	c := startClusterWith(t, text.String(), append(extraEnv, "E2E_NODE_TOKEN="+nodeToken))
	c.nodeToken = nodeToken
	out := map[string]*operator{}
	for name, tok := range tokens {
		out[name] = newOperator(t, c.url, tok)
	}
	return c, out
}

func wantCallRefused(t *testing.T, o *operator, method string, params any, code, domain string) {
	t.Helper()
	r := o.call(t, method, params)
	if r.code != 1 || r.stdout != "" {
		t.Fatalf("%s: want exit 1, got %d\n%s%s", method, r.code, r.stdout, r.stderr)
	}
	// The last line is the error object; a held call printed its approval id before.
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	e := decodeError(t, lines[len(lines)-1])
	if e.Code != code || e.detail("code") != domain {
		t.Fatalf("%s: got %s/%v (%s), want %s/%s", method, e.Code, e.detail("code"), e.Message, code, domain)
	}
	if domain != protocol.DomainApprovalTimeout && (e.detail("retrySafe") != false || e.detail("mutationMayHaveApplied") != false) {
		t.Fatalf("%s: outcome flags %v", method, e.Details)
	}
}

// TestAuthorityReadOnlyOperator: an operator.admin token whose policy is
// profile read_only reads and is refused each mutation, and the node is
// unchanged.
func TestAuthorityReadOnlyOperator(t *testing.T) {
	c, ops := authorityCluster(t, "", map[string]string{
		"auditor": "scopes = [\"operator.admin\"]\n[operators.policy]\nprofile = \"read_only\"",
	})
	m := c.newMachine("worker-1", "")
	c.join(m)
	nodeID := c.op.must(t, "node.list", map[string]any{})["nodes"].([]any)[0].(map[string]any)["nodeId"].(string)
	ro := ops["auditor"]
	file := filepath.Join(m.home, "notes.txt")
	if err := os.WriteFile(file, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	got := ro.must(t, "node.fs.read", map[string]any{"nodeId": nodeID, "path": file})
	if got["dataBase64"] != base64.StdEncoding.EncodeToString([]byte("hello\n")) {
		t.Fatalf("read: %v", got)
	}
	ro.must(t, "node.fs.stat", map[string]any{"nodeId": nodeID, "path": file})
	ro.must(t, "node.fs.list", map[string]any{"nodeId": nodeID, "path": m.home})
	ro.must(t, "node.host.info", map[string]any{"nodeId": nodeID})

	target := filepath.Join(m.home, "new")
	for _, mut := range []struct {
		method string
		params map[string]any
	}{
		{"node.fs.write", map[string]any{"nodeId": nodeID, "path": target, "dataBase64": "aGk="}},
		{"node.fs.mkdir", map[string]any{"nodeId": nodeID, "path": target}},
		{"node.fs.move", map[string]any{"nodeId": nodeID, "path": file, "destination": target, "expectedModifiedAtMs": 0}},
		{"node.fs.delete.preview", map[string]any{"nodeId": nodeID, "path": file}},
		{"node.process.run", map[string]any{"nodeId": nodeID, "processId": "ro-1", "cwd": m.cwd, "argv": []string{"touch", target},
			"stdinBase64": "", "timeoutMs": 5000, "maxOutputBytes": 1024}},
		{"node.process.cancel", map[string]any{"nodeId": nodeID, "processId": "ro-1"}},
		{"node.secrets.delete", map[string]any{"nodeId": nodeID, "name": "X"}},
		{protocol.MethodNodeInvoke, map[string]any{"nodeId": nodeID, "method": "node.fs.mkdir", "args": map[string]any{"path": target}}},
		{protocol.MethodNodeRename, map[string]any{"nodeId": nodeID, "name": "renamed"}},
	} {
		wantCallRefused(t, ro, mut.method, mut.params, protocol.CodeForbidden, protocol.DomainPolicyDenied)
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatalf("a refused mutation changed the node: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "hello\n" {
		t.Fatalf("file changed: %q", b)
	}
	// A caller cannot widen its context to get around the policy.
	r := run(t, ro.home, env(ro.home, "LEMON_OPERATOR_TOKEN="+ro.token), []byte(`{"nodeId":"`+nodeID+`","name":"x"}`),
		"call", "--controller", ro.url, "--execution-context", `{"principal":"env"}`, protocol.MethodNodeRename, "-")
	if e := decodeError(t, r.stderr); r.code != 1 || e.detail("code") != protocol.DomainPrincipalMismatch {
		t.Fatalf("another principal: exit %d %s", r.code, r.stderr)
	}
}

// TestAuthorityCIMakeOnly: a CI token whose policy allows only make (and
// capability exec) can run make and nothing else.
func TestAuthorityCIMakeOnly(t *testing.T) {
	c, ops := authorityCluster(t, "", map[string]string{
		"ci": "scopes = [\"operator.admin\"]\n[operators.policy]\nallowed_commands = [\"make\"]\ncapabilities = [\"exec\"]\nmax_timeout_ms = 60000",
	})
	m := c.newMachine("worker-1", "")
	c.join(m)
	nodeID := c.op.must(t, "node.list", map[string]any{})["nodes"].([]any)[0].(map[string]any)["nodeId"].(string)
	if err := os.WriteFile(filepath.Join(m.cwd, "Makefile"), []byte("hello:\n\t@echo built-by-make\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ci := ops["ci"]
	runP := func(id string, argv ...string) map[string]any {
		return map[string]any{"nodeId": nodeID, "processId": id, "cwd": m.cwd, "argv": argv, "stdinBase64": "",
			"timeoutMs": 30000, "maxOutputBytes": 4096}
	}
	got := ci.must(t, "node.process.run", runP("ci-1", "make", "hello"))
	if got["exitCode"] != json.Number("0") || got["stdoutBase64"] != base64.StdEncoding.EncodeToString([]byte("built-by-make\n")) {
		t.Fatalf("make: %v", got)
	}
	marker := filepath.Join(m.home, "escaped")
	for i, argv := range [][]string{{"sh", "-c", "touch " + marker}, {"/usr/bin/make", "hello"}, {"touch", marker},
		{"python3", "-c", "open('" + marker + "','w')"}} {
		wantCallRefused(t, ci, "node.process.run", runP(fmt.Sprintf("ci-x%d", i), argv...), protocol.CodeForbidden, protocol.DomainCommandDenied)
	}
	over := runP("ci-2", "make", "hello")
	over["timeoutMs"] = 60001
	wantCallRefused(t, ci, "node.process.run", over, protocol.CodeForbidden, protocol.DomainLimitExceeded)
	// Its capabilities are exec only: no file access.
	wantCallRefused(t, ci, "node.fs.read", map[string]any{"nodeId": nodeID, "path": filepath.Join(m.cwd, "Makefile")},
		protocol.CodeForbidden, protocol.DomainCapabilityDenied)
	wantCallRefused(t, ci, "node.fs.write", map[string]any{"nodeId": nodeID, "path": marker, "dataBase64": ""},
		protocol.CodeForbidden, protocol.DomainCapabilityDenied)
	if _, err := os.Lstat(marker); !os.IsNotExist(err) {
		t.Fatalf("a refused run had an effect: %v", err)
	}
}

var approvalIDRE = regexp.MustCompile(`waiting for approval (appr-[0-9a-f]+)`)

// TestAuthorityApprovalFlow: with two tokens, a held write waits for the
// other entry's decision; self-approval is refused; a denial sends
// nothing; an undecided request times out.
func TestAuthorityApprovalFlow(t *testing.T) {
	c, ops := authorityCluster(t, "[limits]\napproval_timeout_ms = 120000\n", map[string]string{
		"dev":      "scopes = [\"operator.admin\"]\n[operators.policy]\nrequire_approval = [\"node.fs.write\"]",
		"lead":     "scopes = [\"operator.approvals\"]",
		"readonly": "scopes = [\"operator.approvals\"]\n[operators.policy]\nprofile = \"read_only\"",
	})
	m := c.newMachine("worker-1", "")
	c.join(m)
	nodeID := c.op.must(t, "node.list", map[string]any{})["nodes"].([]any)[0].(map[string]any)["nodeId"].(string)
	dev, lead, ro := ops["dev"], ops["lead"], ops["readonly"]
	canary := "CANARY-" + randHex(8)
	target := filepath.Join(m.home, "approved.txt")

	held := func(name string) (*proc, string) {
		params, _ := json.Marshal(map[string]any{"nodeId": nodeID, "path": target, "dataBase64": base64.StdEncoding.EncodeToString([]byte(canary))})
		p := start(t, name, dev.home, env(dev.home, "LEMON_OPERATOR_TOKEN="+dev.token),
			"call", "--controller", dev.url, "node.fs.write", string(params))
		return p, p.waitFor(t, approvalIDRE, callWait)[1]
	}
	approvals := func(o *operator, args ...string) result {
		return run(t, o.home, env(o.home, "LEMON_OPERATOR_TOKEN="+o.token), nil, append([]string{"approvals", "--controller", o.url}, args...)...)
	}

	// Approve.
	p, id := held("held write 1")
	list := approvals(lead)
	if list.code != 0 || !strings.Contains(list.stdout, id) || !strings.Contains(list.stdout, "node.fs.write") ||
		!strings.Contains(list.stdout, "dev") {
		t.Fatalf("approvals list: %d %s %s", list.code, list.stdout, list.stderr)
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatal("the held write ran before its approval")
	}
	// The requester's own entry holds operator.approvals (admin) but may not decide its own request.
	if r := approvals(dev, "approve", id); r.code != 1 || !strings.Contains(r.stderr, protocol.DomainSelfApproval) {
		t.Fatalf("self-approval: %d %s", r.code, r.stderr)
	}
	// An approver whose own policy is read_only may not decide.
	if r := approvals(ro, "approve", id); r.code != 1 || !strings.Contains(r.stderr, protocol.DomainPolicyDenied) {
		t.Fatalf("read_only approver: %d %s", r.code, r.stderr)
	}
	if r := approvals(lead, "approve", id); r.code != 0 || r.stdout != "approval "+id+" approved\n" {
		t.Fatalf("approve: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("approved write: exit %d\n%s", code, p.output())
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != canary {
		t.Fatalf("approved write: %q %v", b, err)
	}

	// Deny: nothing is sent.
	os.Remove(target)
	p, id = held("held write 2")
	if r := approvals(lead, "deny", id); r.code != 0 || r.stdout != "approval "+id+" denied\n" {
		t.Fatalf("deny: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if code := p.wait(t); code != 1 || !strings.Contains(p.stderr.String(), protocol.DomainApprovalDenied) {
		t.Fatalf("denied write: exit %d\n%s", code, p.output())
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatal("a denied write ran")
	}
	if r := approvals(lead, "approve", id); r.code != 1 || !strings.Contains(r.stderr, protocol.DomainApprovalNotFound) {
		t.Fatalf("deciding a decided request: %d %s", r.code, r.stderr)
	}
	// The approval records are content-free: no path, no data.
	for _, out := range []string{list.stdout, approvals(lead, "--json").stdout, c.ctl.output()} {
		if strings.Contains(out, canary) || strings.Contains(out, target) ||
			strings.Contains(out, base64.StdEncoding.EncodeToString([]byte(canary))) {
			t.Fatalf("an approval record or log carries content:\n%s", out)
		}
	}

	// Timeout, on a controller whose approval_timeout_ms is its minimum
	// (the hold comes before the node is looked up: no node is needed).
	_, quick := authorityCluster(t, "[limits]\napproval_timeout_ms = 1000\n", map[string]string{
		"dev": "scopes = [\"operator.admin\"]\n[operators.policy]\nrequire_approval = [\"node.fs.write\"]",
	})
	wantCallRefused(t, quick["dev"], "node.fs.write", map[string]any{"nodeId": nodeID, "path": target, "dataBase64": "aGk="},
		protocol.CodeTimeout, protocol.DomainApprovalTimeout)
}
