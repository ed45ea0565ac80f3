// Command lemon is the single binary of the system: controller, node
// worker, operator CLI and developer tools. It is a github.com/spf13/cobra
// command tree (docs/RATIONALE.md, "The CLI is built on cobra"). Each
// subcommand lives in its own file and registers itself from init:
//
//   - register (with setUsage) adds a command that parses its own flags
//     with the standard flag package, exactly as before the move to cobra;
//     cobra routes to it, answers its help and completes its subcommand
//     names (DisableFlagParsing).
//   - registerCobra adds a command built with cobra's own flags (version,
//     run, completion).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"lemon/version"
)

// command is one subcommand that parses its own flags: run gets the
// arguments after its name and returns the process exit code.
type command struct {
	summary string
	run     func(args []string) int
}

var commands = map[string]command{}

func register(name, summary string, run func(args []string) int) {
	if _, dup := commands[name]; dup {
		panic("lemon: subcommand registered twice: " + name)
	}
	commands[name] = command{summary: summary, run: run}
}

// cobraCommands build the commands that use cobra's flags; each call
// builds a fresh command writing to stdout and stderr.
var cobraCommands = map[string]func(stdout, stderr io.Writer) *cobra.Command{}

func registerCobra(name string, build func(stdout, stderr io.Writer) *cobra.Command) {
	if _, dup := cobraCommands[name]; dup {
		panic("lemon: subcommand registered twice: " + name)
	}
	if _, dup := commands[name]; dup {
		panic("lemon: subcommand registered twice: " + name)
	}
	cobraCommands[name] = build
}

// exitCode is the error a command returns to end the process with that
// code (nothing more is printed).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// codeErr is nil for 0, else exitCode(n).
func codeErr(n int) error {
	if n == 0 {
		return nil
	}
	return exitCode(n)
}

// usageError is a command-line mistake found by cobra or by a cobra
// command: exit 2 with a hint naming the help to read.
type usageError struct {
	msg, hint string
}

func (e usageError) Error() string { return e.msg }

func usage(w io.Writer, root *cobra.Command) {
	fmt.Fprintln(w, "usage: lemon COMMAND [ARGS]\n\ncommands:")
	names := []string{}
	summaries := map[string]string{}
	for _, c := range root.Commands() {
		if c.Hidden || !c.IsAvailableCommand() && c.Name() != "help" {
			continue
		}
		names = append(names, c.Name())
		summaries[c.Name()] = c.Short
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, summaries[n])
	}
	fmt.Fprintln(w, "\n'lemon help COMMAND' or 'lemon COMMAND --help' shows a command's usage.")
	fmt.Fprintln(w, "'lemon --version' prints the version; 'lemon completion bash|zsh|fish|powershell' a completion script.")
}

// exitInterrupted is the exit code of a command stopped by SIGINT (128 +
// SIGINT, as a shell reports a process the signal killed).
const exitInterrupted = 130

// interruptGrace bounds how long an interrupted command may take to wind
// down (cancel its requests, remove a partial download) before the
// process exits 130 anyway; a second SIGINT exits at once.
const interruptGrace = 10 * time.Second

// interruptible runs a client command (call, fs, nodes, modules, run)
// with a context that SIGINT cancels. An interrupted command exits 130,
// whatever it returned (README.md, "CLI": exit codes). The servers
// (controller, node join, dev) take SIGINT as their stop request and
// handle it themselves.
func interruptible(run func(ctx context.Context) int) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	go func() {
		select {
		case <-sig:
		case <-ctx.Done():
			return
		}
		cancel()
		select {
		case <-sig:
		case <-time.After(interruptGrace):
		}
		os.Exit(exitInterrupted)
	}()
	code := run(ctx)
	if ctx.Err() != nil {
		return exitInterrupted
	}
	return code
}

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

// subcommandNames are the words a self-parsing command dispatches on, so
// that completion offers them and `lemon help X Y` finds them. Commands
// with their own usage text ("plugin new") are added from usages.
var subcommandNames = map[string][]string{
	"fs":     {"ls", "stat", "mv", "rm", "get", "put"},
	"nodes":  {"approve", "reject", "rename"},
	"node":   {"join"},
	"policy": {"check"},
	"vault":  {"gen-key", "rotate-key", "check"},
}

// newRoot builds the command tree for one command line; args is that
// whole line (a self-parsing command gets the words after its name).
// A usage error found while printing help is stored in *helpErr (cobra's
// help functions return nothing).
func newRoot(args []string, stdout, stderr io.Writer, helpErr *error) *cobra.Command {
	root := &cobra.Command{
		Use:           "lemon",
		Short:         "controller, execution node and operator CLI",
		Version:       version.Version,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
	}
	root.RunE = func(*cobra.Command, []string) error {
		usage(stdout, root)
		return nil
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("lemon {{.Version}}\n")
	root.CompletionOptions.HiddenDefaultCmd = false
	// A flag error is a usage error: exit 2 with the command's help named.
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if c == root {
			bad := strings.TrimPrefix(err.Error(), "unknown flag: ")
			bad = strings.TrimPrefix(bad, "unknown shorthand flag: ")
			return usageError{msg: fmt.Sprintf("unknown command or flag %s", bad), hint: "run 'lemon help' for the list of commands"}
		}
		return usageError{msg: err.Error(), hint: "run '" + c.CommandPath() + " --help'"}
	})

	for name, cmd := range commands {
		root.AddCommand(selfParsing(name, cmd, args, stdout))
	}
	for _, build := range cobraCommands {
		root.AddCommand(build(stdout, stderr))
	}

	// cobra's completion command (bash, zsh, fish, powershell), added now
	// so that a shell it does not know is a usage error, not its help.
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Short = "print a shell completion script: bash, zsh, fish or powershell"
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(c *cobra.Command, a []string) error {
				if len(a) == 0 {
					return c.Help()
				}
				return usageError{msg: fmt.Sprintf("no completion for %q: bash, zsh, fish or powershell", a[0]), hint: "run 'lemon completion --help'"}
			}
		}
	}

	defaultHelp := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, a []string) {
		if c == root {
			// "lemon WORD --help" with an unknown WORD is a usage error,
			// not a request for the command list.
			for _, w := range a {
				if w == "--" {
					break
				}
				if !strings.HasPrefix(w, "-") {
					*helpErr = usageError{msg: fmt.Sprintf("unknown command %q", w), hint: "run 'lemon help' for the list of commands"}
					return
				}
			}
			usage(stdout, root)
			return
		}
		if top := topLevel(c); commands[top.Name()].run != nil {
			words := strings.Fields(strings.TrimPrefix(c.CommandPath(), "lemon "+top.Name()))
			fmt.Fprint(stdout, usageOf(top.Name(), words))
			return
		}
		defaultHelp(c, a)
	})
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [COMMAND [SUBCOMMAND]]",
		Short: "show the usage of lemon or of one command",
		RunE: func(_ *cobra.Command, a []string) error {
			if len(a) == 0 {
				usage(stdout, root)
				return nil
			}
			c, rest, err := root.Find(a)
			if err != nil || c == root || len(rest) > 0 {
				return usageError{msg: fmt.Sprintf("unknown command %q", strings.Join(a, " ")), hint: "run 'lemon help' for the list of commands"}
			}
			if _, ok := commands[a[0]]; ok {
				fmt.Fprint(stdout, usageOf(a[0], a[1:]))
				return nil
			}
			return c.Help()
		},
		ValidArgsFunction: func(_ *cobra.Command, a []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(a) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []cobra.Completion
			for _, c := range root.Commands() {
				if c.IsAvailableCommand() {
					names = append(names, cobra.CompletionWithDesc(c.Name(), c.Short))
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
	})
	return root
}

// topLevel is the child of the root that c is or descends from.
func topLevel(c *cobra.Command) *cobra.Command {
	for c.HasParent() && c.Parent().HasParent() {
		c = c.Parent()
	}
	return c
}

// selfParsing wraps a registered command: cobra finds it (and its
// subcommand words, for help and completion) but hands it the words after
// its name unparsed, so its flags mean what they meant before cobra.
func selfParsing(name string, cmd command, line []string, stdout io.Writer) *cobra.Command {
	rest := func() []string {
		for i, a := range line {
			if a == name {
				return line[i+1:]
			}
		}
		return nil
	}
	runE := func(*cobra.Command, []string) error {
		r := rest()
		if wantsHelp(r) {
			fmt.Fprint(stdout, usageOf(name, r))
			return nil
		}
		return codeErr(cmd.run(r))
	}
	c := &cobra.Command{
		Use:                name,
		Short:              cmd.summary,
		DisableFlagParsing: true,
		Args:               cobra.ArbitraryArgs,
		RunE:               runE,
	}
	subs := map[string]bool{}
	for _, s := range subcommandNames[name] {
		subs[s] = true
	}
	for p := range usages {
		if w := strings.Fields(p); len(w) == 2 && w[0] == name {
			subs[w[1]] = true
		}
	}
	if name == "modules" {
		for s := range modulesSubcommands {
			subs[s] = true
		}
	}
	for s := range subs {
		c.AddCommand(&cobra.Command{
			Use:                s,
			Short:              subSummary(name, s),
			DisableFlagParsing: true,
			Args:               cobra.ArbitraryArgs,
			RunE:               runE,
		})
	}
	return c
}

// subSummary is the first line of "name sub"'s own usage text, if any.
func subSummary(name, sub string) string {
	if u, ok := usages[name+" "+sub]; ok {
		return strings.TrimSpace(firstLineOf(strings.TrimPrefix(u, "usage: ")))
	}
	return "lemon " + name + " " + sub
}

func firstLineOf(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// runMain runs one command line (README.md, "Commands") and returns the
// exit code: no command, help, -h or --help print the command list to
// stdout (exit 0); "help X [Y]" and "X [Y] --help" print that command's
// usage to stdout (exit 0) without running it; an unknown command or a
// usage error exits 2 with a hint on stderr; a command's own failure
// exits with its code (1, or the remote exit code for lemon run), and an
// interrupted client command exits 130.
func runMain(args []string, stdout, stderr io.Writer) int {
	var helpErr error
	root := newRoot(args, stdout, stderr, &helpErr)
	root.SetArgs(args)
	c, err := root.ExecuteC()
	if err == nil {
		err = helpErr
	}
	if err == nil {
		return 0
	}
	var ec exitCode
	if errors.As(err, &ec) {
		return int(ec)
	}
	who := "lemon"
	if c != nil && c != root {
		who = c.CommandPath()
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "%s: %s; %s\n", who, ue.msg, ue.hint)
		return 2
	}
	// Any other error from cobra is about the command line: an unknown
	// command, or arguments a cobra command does not take.
	hint := "run 'lemon help' for the list of commands"
	if who != "lemon" {
		hint = "run '" + who + " --help'"
	}
	fmt.Fprintf(stderr, "%s: %s; %s\n", who, firstLineOf(err.Error()), hint)
	return 2
}
