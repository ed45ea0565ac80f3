package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"lemon/client/fakecontrol"
	"lemon/protocol"
)

// TestCallExecutionContext: --execution-context travels as the req frame's
// executionContext member, and a held request prints its approval id.
func TestCallExecutionContext(t *testing.T) {
	srv := fakecontrol.New(fakecontrol.Options{OperatorToken: callTestToken,
		Handle: func(c *fakecontrol.Conn, req protocol.Request) (any, *protocol.Error) {
			if req.Method == "node.host.info" {
				c.SendEvent(protocol.EventApprovalRequested, protocol.ApprovalInfo{ApprovalID: "appr-0123abcd", Method: req.Method})
			}
			return map[string]any{"executionContext": req.ExecutionContext}, nil
		}})
	t.Cleanup(srv.Close)
	good := map[string]string{envOperatorToken: callTestToken, envController: srv.URL}
	code, out, errOut := runCallT([]string{"--execution-context", ` {"capabilities":["read"]} `, "node.host.info", `{"nodeId":"n1"}`}, good, "")
	if code != 0 || !strings.Contains(out, `"capabilities": [`) {
		t.Fatalf("code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if !strings.Contains(errOut, "waiting for approval appr-0123abcd (an approver runs: lemon approvals approve appr-0123abcd)") {
		t.Fatalf("no approval notice: %q", errOut)
	}
	// Without the flag, no member is sent.
	if code, out, _ := runCallT([]string{"node.list"}, good, ""); code != 0 || !strings.Contains(out, `"executionContext": null`) {
		t.Fatalf("without the flag: %d %q", code, out)
	}
	for _, bad := range []string{"[]", "{", `"x"`, "{\"a\":\"" + strings.Repeat("x", maxExecutionContextBytes) + "\"}"} {
		if code, _, errOut := runCallT([]string{"--execution-context", bad, "node.list"}, good, ""); code != 2 ||
			!strings.Contains(errOut, "--execution-context must be a JSON object") {
			t.Fatalf("%.20q: code %d %q", bad, code, errOut)
		}
	}
}

func TestApprovalsCommand(t *testing.T) {
	var (
		mu      sync.Mutex
		decided []protocol.ApprovalDecideParams
	)
	srv := fakecontrol.New(fakecontrol.Options{OperatorToken: callTestToken,
		Handle: func(_ *fakecontrol.Conn, req protocol.Request) (any, *protocol.Error) {
			switch req.Method {
			case protocol.MethodApprovalList:
				return protocol.ApprovalListResult{Approvals: []protocol.ApprovalInfo{{ApprovalID: "appr-1", Method: "node.fs.write",
					NodeID: "node-1", Principal: "ci", Mode: "always", ParamsSHA256: strings.Repeat("ab", 32)}}}, nil
			case protocol.MethodApprovalDecide:
				var p protocol.ApprovalDecideParams
				json.Unmarshal(req.Params, &p)
				mu.Lock()
				decided = append(decided, p)
				mu.Unlock()
				if p.ApprovalID == "appr-gone" {
					return nil, protocol.DomainError(protocol.CodeNotFound, protocol.DomainApprovalNotFound, "no request")
				}
				return protocol.ApprovalDecideResult{ApprovalID: p.ApprovalID, Status: "approved"}, nil
			}
			return nil, protocol.Errorf(protocol.CodeMethodNotFound, "unknown method")
		}})
	t.Cleanup(srv.Close)
	e := env(map[string]string{envOperatorToken: callTestToken, envController: srv.URL})
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := runApprovals(context.Background(), args, e, &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, _ := run(); code != 0 || !strings.Contains(out, "appr-1") || !strings.Contains(out, "node.fs.write") ||
		!strings.Contains(out, "abababababab") || strings.Contains(out, strings.Repeat("ab", 32)) {
		t.Fatalf("list: %d %q", code, out)
	}
	if code, out, _ := run("--json", "list"); code != 0 || !strings.Contains(out, `"paramsSha256"`) {
		t.Fatalf("list --json: %d %q", code, out)
	}
	if code, out, _ := run("approve", "appr-1"); code != 0 || out != "approval appr-1 approved\n" {
		t.Fatalf("approve: %d %q", code, out)
	}
	if code, _, errOut := run("deny", "appr-gone"); code != 1 || !strings.Contains(errOut, protocol.DomainApprovalNotFound) {
		t.Fatalf("deny unknown: %d %q", code, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(decided) != 2 || decided[0].Decision != "approve" || decided[1].Decision != "deny" {
		t.Fatalf("decisions %+v", decided)
	}
	// Flags after the subcommand work, as in lemon fs.
	if code, out, _ := run("list", "--json"); code != 0 || !strings.Contains(out, `"paramsSha256"`) {
		t.Fatalf("list --json after the word: %d %q", code, out)
	}
	// A usage error is one line naming the mistake, exit 2.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"approve"}, "lemon approvals: ID is missing: approve ID; run 'lemon approvals --help'\n"},
		{[]string{"maybe", "x"}, "lemon approvals: unknown subcommand \"maybe\": list, approve ID, deny ID; run 'lemon approvals --help'\n"},
		{[]string{"list", "x"}, "lemon approvals: list takes no arguments; run 'lemon approvals --help'\n"},
		{[]string{"deny", "a", "b"}, "lemon approvals: deny takes ID, got 2 words; run 'lemon approvals --help'\n"},
		{[]string{"list", "--bogus"}, "lemon approvals: unknown flag -bogus; run 'lemon approvals --help'\n"},
	} {
		if code, out, errOut := run(c.args...); code != 2 || errOut != c.want || out != "" {
			t.Errorf("%q: code %d, stderr %q, want %q", c.args, code, errOut, c.want)
		}
	}
}
