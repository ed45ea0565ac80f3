package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"lemon/protocol"
)

// usageLine prints the one-line usage error of a flag-package command,
// as cobra commands print theirs ("lemon run: NODE is missing; run 'lemon
// run --help'"), and returns exit code 2. cmd is the command path after
// "lemon".
func usageLine(w io.Writer, cmd, msg string) int {
	fmt.Fprintf(w, "lemon %s: %s; run 'lemon %s --help'\n", cmd, msg, cmd)
	return 2
}

// parseFlagsAnywhere parses fl's flags wherever they stand among the
// positional words ("lemon approvals list --json") and returns the words.
// A bad flag is printed as one usageLine (exit 2); -h prints fl.Usage and
// returns exit 0. code is -1 when parsing succeeded.
func parseFlagsAnywhere(fl *flag.FlagSet, args []string, w io.Writer, cmd string) (words []string, code int) {
	out := fl.Output()
	fl.SetOutput(io.Discard)
	defer fl.SetOutput(out)
	usage := fl.Usage
	fl.Usage = func() {}
	defer func() { fl.Usage = usage }()
	for {
		if err := fl.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				usage()
				return nil, 0
			}
			msg := err.Error()
			if bad, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
				msg = "unknown flag " + bad
			}
			return nil, usageLine(w, cmd, msg)
		}
		args = fl.Args()
		if len(args) == 0 {
			return words, -1
		}
		words = append(words, args[0])
		args = args[1:]
	}
}

// wordsError names what is wrong with the words after a command whose
// subcommands take fixed arguments: subs maps each subcommand to its
// argument names ("" for the default, wordless one). It returns "" when
// the words fit.
func wordsError(words []string, subs map[string][]string, order []string) string {
	if len(words) == 0 {
		if _, ok := subs[""]; ok {
			return ""
		}
		return "a subcommand is missing: " + strings.Join(order, ", ")
	}
	want, ok := subs[words[0]]
	if !ok {
		return fmt.Sprintf("unknown subcommand %q: %s", words[0], strings.Join(order, ", "))
	}
	got := words[1:]
	switch {
	case len(got) < len(want):
		return strings.Join(want[len(got):], " ") + " is missing: " + strings.TrimSpace(words[0]+" "+strings.Join(want, " "))
	case len(got) > len(want) && len(want) == 0:
		return words[0] + " takes no arguments"
	case len(got) > len(want):
		return fmt.Sprintf("%s takes %s, got %d words", words[0], strings.Join(want, " "), len(got))
	}
	return ""
}

// fsWordsError names what is wrong with the words of 'lemon fs' (the
// command, NODE and its paths), or "" when they fit: ls, stat and rm take
// one or more paths, mv, get and put exactly two.
func fsWordsError(words []string) string {
	order := []string{"ls", "stat", "mv", "rm", "get", "put"}
	want := map[string][]string{"ls": {"NODE", "PATH"}, "stat": {"NODE", "PATH"}, "rm": {"NODE", "PATH"},
		"mv": {"NODE", "SRC", "DST"}, "get": {"NODE", "REMOTE", "LOCAL"}, "put": {"NODE", "LOCAL", "REMOTE"}}
	if len(words) == 0 {
		return "COMMAND is missing: " + strings.Join(order, ", ")
	}
	args, ok := want[words[0]]
	if ok && len(args) == 2 && len(words) > 3 {
		return "" // PATH...
	}
	return wordsError(words, want, order)
}

// putMkdirsHint turns the NOT_FOUND / not_found of 'lemon fs put' without
// --mkdirs (the remote file's directory does not exist) into an error
// that says so and names --mkdirs; any other error is returned as is.
func putMkdirsHint(err error, mkdirs bool) error {
	var pe *protocol.Error
	if err == nil || mkdirs || !errors.As(err, &pe) || pe.DomainCode() != protocol.DomainNotFound {
		return err
	}
	return fmt.Errorf("%s; the remote directory does not exist: pass --mkdirs to create it", pe.Error())
}
