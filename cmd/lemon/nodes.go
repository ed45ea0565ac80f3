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
	register("nodes", "list nodes, approve or reject pairings, rename nodes", func(args []string) int {
		return interruptible(func(ctx context.Context) int {
			return runNodes(ctx, args, os.Getenv, os.Stdout, os.Stderr)
		})
	})
	setUsage("nodes", nodesUsage)
}

const nodesUsage = `usage: lemon nodes [--controller URL] [--json]             list nodes and pending pairings
       lemon nodes [--controller URL] approve CODE        approve a pairing
       lemon nodes [--controller URL] reject CODE         reject a pairing
       lemon nodes [--controller URL] rename NODE NAME    rename a node (NODE: its nodeId or name)

The operator token comes from LEMON_OPERATOR_TOKEN, else
LEMON_CONTROL_PLANE_OPERATOR_TOKEN. Listing pairings, approve and reject
need operator.approvals or operator.admin (a joining host's
operator.pairing token cannot decide pairings); approving a repair of a
node that holds a live session needs operator.admin, and says that it
revokes that session. Errors are printed as the error object JSON on
stderr (exit 1). --json prints {"nodes":[...],"pairings":[...]}: the
entries of node.list and node.pair.list, flat.
--ca-file FILE (default $LEMON_CA_FILE) trusts a private CA for wss://
(lemon tls dev writes one).
`

func runNodes(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lemon nodes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, nodesUsage) }
	resolve := operatorFlags(fs, getenv)
	asJSON := fs.Bool("json", false, "print the raw JSON payloads")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	var (
		method string
		params any
	)
	switch {
	case len(rest) == 0:
	case len(rest) == 2 && rest[0] == "approve":
		method, params = protocol.MethodPairApprove, protocol.PairDecisionParams{Code: rest[1]}
	case len(rest) == 2 && rest[0] == "reject":
		method, params = protocol.MethodPairReject, protocol.PairDecisionParams{Code: rest[1]}
	case len(rest) == 3 && rest[0] == "rename":
		method, params = protocol.MethodNodeRename, protocol.NodeRenameParams{NodeID: rest[1], Name: rest[2]}
	default:
		fs.Usage()
		return 2
	}
	sess, err := resolve()
	if err != nil {
		fmt.Fprintf(stderr, "lemon nodes: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, perr := sess.dial(ctx, "lemon-nodes")
	if perr != nil {
		printErrorObject(stderr, perr)
		return 1
	}
	defer conn.Close()

	if method == protocol.MethodNodeRename {
		// NODE may be the node's current name.
		id, perr := conn.ResolveNode(ctx, rest[1])
		if perr != nil {
			printErrorObject(stderr, perr)
			return 1
		}
		params = protocol.NodeRenameParams{NodeID: id, Name: rest[2]}
	}
	if method != "" {
		raw, perr := conn.Call(ctx, method, params)
		if perr != nil {
			printErrorObject(stderr, perr)
			return 1
		}
		if *asJSON {
			fmt.Fprintf(stdout, "%s\n", raw)
			return 0
		}
		switch method {
		case protocol.MethodNodeRename:
			var r protocol.NodeRenameResult
			json.Unmarshal(raw, &r)
			fmt.Fprintf(stdout, "renamed %s to %q\n", r.NodeID, r.Name)
		default:
			var r protocol.PairDecisionResult
			json.Unmarshal(raw, &r)
			if r.NodeID != "" {
				fmt.Fprintf(stdout, "pairing %s %s: node %q (%s)\n", r.PairingID, r.Status, r.Name, r.NodeID)
			} else {
				fmt.Fprintf(stdout, "pairing %s %s\n", r.PairingID, r.Status)
			}
			if r.RevokesLiveSession {
				fmt.Fprintf(stdout, "completing this repair revokes the live session of node %s and disconnects it\n", r.NodeID)
			}
		}
		return 0
	}

	// node.list is paged (docs/PROTOCOL.md, "Node registry"): ListNodes
	// walks every page and sorts by name.
	nodeList, perr := conn.ListNodes(ctx, protocol.NodeListParams{})
	if perr != nil {
		printErrorObject(stderr, perr)
		return 1
	}
	if nodeList == nil {
		nodeList = []protocol.NodeSummary{}
	}
	// Pending pairings need operator.approvals; a token without it still
	// lists nodes.
	rawPairs, pairErr := conn.Call(ctx, protocol.MethodPairList, protocol.PairListParams{})
	if *asJSON {
		// Flat: {"nodes":[...],"pairings":[...]}, the lists of node.list
		// and node.pair.list ("pairings" only when the token may list them).
		var pl map[string]json.RawMessage
		rawNodes, _ := json.Marshal(nodeList)
		out := map[string]json.RawMessage{"nodes": rawNodes}
		if pairErr == nil && json.Unmarshal(rawPairs, &pl) == nil && pl["pairings"] != nil {
			out["pairings"] = pl["pairings"]
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	nodes := protocol.NodeListResult{Nodes: nodeList}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tNODE ID\tSTATUS\tIDENTITY\tSINCE")
	for _, n := range nodes.Nodes {
		status, since := "offline", ""
		if n.Online {
			status = "online"
			if n.ConnectedAtMs > 0 {
				since = time.UnixMilli(n.ConnectedAtMs).Local().Format(time.DateTime)
			}
		} else if n.LastSeenAtMs > 0 {
			since = time.UnixMilli(n.LastSeenAtMs).Local().Format(time.DateTime)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Name, n.NodeID, status, n.Identity, since)
	}
	tw.Flush()
	if pairErr != nil {
		return 0
	}
	var pairs protocol.PairListResult
	if json.Unmarshal(rawPairs, &pairs) != nil || len(pairs.Pairings) == 0 {
		return 0
	}
	fmt.Fprintln(stdout, "\npairings:")
	tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CODE\tKIND\tSTATUS\tNAME\tNODE ID\tEXPIRES\tNOTE")
	for _, p := range pairs.Pairings {
		note := ""
		if p.RevokesLiveSession {
			note = "approving revokes its live session (admin only)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Code, p.Kind, p.Status, p.Name, p.NodeID,
			time.UnixMilli(p.ExpiresAtMs).Local().Format(time.TimeOnly), note)
	}
	tw.Flush()
	return 0
}
