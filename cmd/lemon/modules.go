package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"lemon/protocol"
)

func init() {
	register("modules", "the pinned module set, which set each node runs, and every module refusal", func(args []string) int {
		return interruptible(func(ctx context.Context) int {
			return runModules(ctx, args, os.Getenv, os.Stdout, os.Stderr)
		})
	})
}

// modulesSubcommand is one `lemon modules NAME ...` subcommand. args are
// what follows NAME; the exit code is 0 on success, 1 on failure, 2 on
// usage errors.
type modulesSubcommand struct {
	usage string // one line: "lemon modules NAME ARGS   what it does"
	run   func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int
}

// modulesSubcommands are the subcommands of `lemon modules`; another file
// of this package adds one from its init (e.g. "export").
var modulesSubcommands = map[string]modulesSubcommand{}

func init() {
	modulesSubcommands["status"] = modulesSubcommand{
		usage: "lemon modules status [--controller URL] [--json]   the same as lemon modules", run: runModulesStatus}
}

const modulesUsage = `usage: lemon modules [--controller URL] [--json]   the pinned set, the set each node runs, every refusal
%s
The table lists the controller's pinned set (families, versions, sha256,
the set digest), each node with the set digest it runs ("current" when
it is the pinned one), and every module a node refused with its reason.
--json prints {setDigest, modules, nodes, refusals} as flat lists. Needs
operator.read; the token comes from LEMON_OPERATOR_TOKEN, else
LEMON_CONTROL_PLANE_OPERATOR_TOKEN. Errors are printed as the error
object JSON on stderr (exit 1).
--ca-file FILE (default $LEMON_CA_FILE) trusts a private CA for wss://
(lemon tls dev writes one).
`

func modulesUsageText() string {
	names := make([]string, 0, len(modulesSubcommands))
	for n := range modulesSubcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		b.WriteString("       " + modulesSubcommands[n].usage + "\n")
	}
	return fmt.Sprintf(modulesUsage, b.String())
}

// runModules dispatches `lemon modules [SUBCOMMAND] ...`; with no
// subcommand (or flags first) it is `lemon modules status`.
func runModules(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, ok := modulesSubcommands[args[0]]
		if !ok {
			fmt.Fprintf(stderr, "lemon modules: unknown subcommand %q\n", truncateArg(args[0]))
			fmt.Fprint(stderr, modulesUsageText())
			return 2
		}
		return sub.run(ctx, args[1:], getenv, stdout, stderr)
	}
	return runModulesStatus(ctx, args, getenv, stdout, stderr)
}

func truncateArg(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// modulesJSON is the flat --json shape of `lemon modules`.
type modulesJSON struct {
	// SetDigest is the pinned set's digest ("" when none is pinned).
	SetDigest string `json:"setDigest"`
	// Modules are the pinned modules.
	Modules []protocol.PinnedModule `json:"modules"`
	// Nodes are the nodes with the set digest each runs.
	Nodes []modulesNodeRow `json:"nodes"`
	// Refusals are every module a node refused, one row each.
	Refusals []modulesRefusalRow `json:"refusals"`
	// Truncated: the controller cut the node list to fit a frame.
	Truncated bool `json:"truncated,omitempty"`
}

type modulesNodeRow struct {
	NodeID          string `json:"nodeId"`
	Name            string `json:"name"`
	Online          bool   `json:"online"`
	ModuleSetDigest string `json:"moduleSetDigest"`
	Current         bool   `json:"current"`
	Refused         int    `json:"refused"`
}

type modulesRefusalRow struct {
	NodeID  string `json:"nodeId"`
	Name    string `json:"name"`
	Family  string `json:"family"`
	Version string `json:"version"`
	SHA256  string `json:"sha256"`
	Reason  string `json:"reason"`
}

func flattenModules(r protocol.ModulesStatusResult) modulesJSON {
	out := modulesJSON{Modules: []protocol.PinnedModule{}, Nodes: []modulesNodeRow{}, Refusals: []modulesRefusalRow{},
		Truncated: r.Truncated}
	if r.Pinned != nil {
		out.SetDigest = r.Pinned.Digest
		out.Modules = append(out.Modules, r.Pinned.Modules...)
	}
	for _, n := range r.Nodes {
		out.Nodes = append(out.Nodes, modulesNodeRow{NodeID: n.NodeID, Name: n.Name, Online: n.Online,
			ModuleSetDigest: n.ModuleSetDigest, Current: n.Current, Refused: len(n.Refused)})
		for _, m := range n.Refused {
			out.Refusals = append(out.Refusals, modulesRefusalRow{NodeID: n.NodeID, Name: n.Name,
				Family: m.Family, Version: m.Version, SHA256: m.SHA256, Reason: m.Reason})
		}
	}
	return out
}

func runModulesStatus(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lemon modules", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, modulesUsageText()) }
	resolve := operatorFlags(fs, getenv)
	asJSON := fs.Bool("json", false, "print {setDigest, modules, nodes, refusals} as JSON")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	sess, err := resolve()
	if err != nil {
		fmt.Fprintf(stderr, "lemon modules: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, perr := sess.dial(ctx, "lemon-modules")
	if perr != nil {
		printErrorObject(stderr, perr)
		return 1
	}
	defer conn.Close()
	raw, perr := conn.Call(ctx, protocol.MethodModulesStatus, protocol.ModulesStatusParams{})
	if perr != nil {
		printErrorObject(stderr, perr)
		return 1
	}
	var res protocol.ModulesStatusResult
	if err := json.Unmarshal(raw, &res); err != nil {
		fmt.Fprintln(stderr, "lemon modules: malformed node.modules.status payload")
		return 1
	}
	flat := flattenModules(res)
	if *asJSON {
		b, _ := json.MarshalIndent(flat, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	printModulesTable(stdout, flat)
	return 0
}

// shortDigest is the first 12 hex digits of a digest, for tables.
func shortDigest(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

func printModulesTable(w io.Writer, m modulesJSON) {
	if m.SetDigest == "" {
		fmt.Fprintln(w, "pinned set: none (the controller pins no module set)")
	} else {
		fmt.Fprintf(w, "pinned set %s (%d modules)\n", m.SetDigest, len(m.Modules))
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FAMILY\tVERSION\tSHA256\tSIZE\tMETHODS")
		for _, mod := range m.Modules {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", mod.Family, mod.Version, mod.SHA256, mod.Size, len(mod.Methods))
		}
		tw.Flush()
	}
	fmt.Fprintln(w, "\nnodes:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tNODE ID\tSTATUS\tSET\tREFUSED")
	for _, n := range m.Nodes {
		status := "offline"
		if n.Online {
			status = "online"
		}
		set := "none"
		switch {
		case n.Current:
			set = "current (" + shortDigest(n.ModuleSetDigest) + ")"
		case n.ModuleSetDigest != "":
			set = "other (" + shortDigest(n.ModuleSetDigest) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", n.Name, n.NodeID, status, set, n.Refused)
	}
	tw.Flush()
	if m.Truncated {
		fmt.Fprintln(w, "(node list cut to fit one frame)")
	}
	if len(m.Refusals) == 0 {
		return
	}
	fmt.Fprintln(w, "\nrefusals:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tFAMILY\tVERSION\tSHA256\tREASON")
	for _, r := range m.Refusals {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.Family, r.Version, shortDigest(r.SHA256), r.Reason)
	}
	tw.Flush()
}
