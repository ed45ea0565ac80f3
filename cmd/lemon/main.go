// Command lemon is the single binary of the system: controller, node
// worker, operator CLI and developer tools. Each subcommand lives in its
// own file and registers itself in commands; wiring stays a few lines each.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// command is one subcommand: run gets the arguments after its name and
// returns the process exit code.
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

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: lemon COMMAND [ARGS]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\n'lemon help COMMAND' or 'lemon COMMAND --help' shows a command's usage.")
}

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

// runMain dispatches one command line (README.md, "Commands"): no command, help, -h or --help print the command list to
// stdout (exit 0); "help X [Y]" and "X [Y] --help" print that command's
// usage to stdout (exit 0) without running it; an unknown command exits
// 2 with a hint on stderr.
func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || isHelpFlag(args[0]) {
		usage(stdout)
		return 0
	}
	if args[0] == "help" {
		if len(args) == 1 {
			usage(stdout)
			return 0
		}
		if _, ok := commands[args[1]]; !ok {
			return unknownCommand(args[1], stderr)
		}
		fmt.Fprint(stdout, usageOf(args[1], args[2:]))
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		return unknownCommand(args[0], stderr)
	}
	if wantsHelp(args[1:]) {
		fmt.Fprint(stdout, usageOf(args[0], args[1:]))
		return 0
	}
	return c.run(args[1:])
}

func unknownCommand(name string, stderr io.Writer) int {
	fmt.Fprintf(stderr, "lemon: unknown command %q; run 'lemon help' for the list of commands\n", name)
	return 2
}
