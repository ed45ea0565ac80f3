package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"lemon/protocol"
)

func init() {
	register("approvals", "list requests held for approval, approve or deny one", func(args []string) int {
		return interruptible(func(ctx context.Context) int {
			return runApprovals(ctx, args, os.Getenv, os.Stdout, os.Stderr)
		})
	})
	setUsage("approvals", approvalsUsage)
	for sub, args := range map[string]string{"list": "", "approve": " ID", "deny": " ID"} {
		setUsage("approvals "+sub, "usage: lemon approvals "+sub+args+" [--controller URL] [--json]\n\n"+approvalsUsage)
	}
}

const approvalsUsage = `usage: lemon approvals [--controller URL] [--json] [list]   list requests waiting for approval
       lemon approvals [--controller URL] approve ID          let a held request through
       lemon approvals [--controller URL] deny ID             refuse it (nothing is sent to the node)

A node request whose method the operator's policy marks require_approval
(or approvals = {selector = "once" | "always"}) waits at the controller
until another operator entry holding operator.approvals decides it, or
[limits] approval_timeout_ms passes (docs/POLICY.md, "Approvals"). An
entry cannot decide its own requests, and its own policy must allow
deciding. The list is content-free: method, node, principal, mode, times
and SHA-256 digests of the params (and of argv and cwd for runs).

The operator token comes from LEMON_OPERATOR_TOKEN, else
LEMON_CONTROL_PLANE_OPERATOR_TOKEN. Errors are printed as the error object
JSON on stderr (exit 1). --json prints the approval.list payload. Flags
may stand before or after the words.
`

func runApprovals(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lemon approvals", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, approvalsUsage) }
	resolve := operatorFlags(fs, getenv)
	asJSON := fs.Bool("json", false, "print the raw JSON payload")
	rest, code := parseFlagsAnywhere(fs, args, stderr, "approvals")
	if code >= 0 {
		return code
	}
	if msg := wordsError(rest, map[string][]string{"": nil, "list": nil, "approve": {"ID"}, "deny": {"ID"}},
		[]string{"list", "approve ID", "deny ID"}); msg != "" {
		return usageLine(stderr, "approvals", msg)
	}
	method, params := protocol.MethodApprovalList, any(protocol.ApprovalListParams{})
	switch {
	case len(rest) == 2 && rest[0] == "approve":
		method, params = protocol.MethodApprovalDecide, protocol.ApprovalDecideParams{ApprovalID: rest[1], Decision: protocol.DecisionApprove}
	case len(rest) == 2 && rest[0] == "deny":
		method, params = protocol.MethodApprovalDecide, protocol.ApprovalDecideParams{ApprovalID: rest[1], Decision: protocol.DecisionDeny}
	}
	sess, err := resolve()
	if err != nil {
		return usageLine(stderr, "approvals", err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, perr := sess.dial(ctx, "lemon-approvals")
	if perr != nil {
		printErrorObject(stderr, perr)
		return 1
	}
	defer conn.Close()
	raw, perr := conn.Call(ctx, method, params)
	if perr != nil {
		printErrorObject(stderr, perr)
		return 1
	}
	if *asJSON {
		fmt.Fprintf(stdout, "%s\n", raw)
		return 0
	}
	if method == protocol.MethodApprovalDecide {
		var r protocol.ApprovalDecideResult
		if json.Unmarshal(raw, &r) != nil {
			fmt.Fprintln(stderr, "lemon approvals: malformed approval.decide payload")
			return 1
		}
		fmt.Fprintf(stdout, "approval %s %s\n", r.ApprovalID, r.Status)
		return 0
	}
	var list protocol.ApprovalListResult
	if json.Unmarshal(raw, &list) != nil {
		fmt.Fprintln(stderr, "lemon approvals: malformed approval.list payload")
		return 1
	}
	if len(list.Approvals) == 0 {
		fmt.Fprintln(stdout, "no requests are waiting for approval")
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMETHOD\tNODE ID\tPRINCIPAL\tMODE\tREQUESTED\tEXPIRES\tPARAMS SHA-256")
	for _, a := range list.Approvals {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", termSafe(a.ApprovalID), termSafe(a.Method), termSafe(a.NodeID), termSafe(a.Principal), termSafe(a.Mode),
			time.UnixMilli(a.RequestedAtMs).Local().Format(time.TimeOnly),
			time.UnixMilli(a.ExpiresAtMs).Local().Format(time.TimeOnly), short(a.ParamsSHA256))
	}
	tw.Flush()
	return 0
}

// short is the first 12 hex digits of a digest.
func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
