package main

import (
	"fmt"
	"strings"
)

// usages holds each command's usage text, keyed by "X" or "X Y" (a
// subcommand with its own text); `lemon X [Y] --help` prints it.
var usages = map[string]string{}

// setUsage records the usage text of a command path ("plugin" or
// "plugin new"). Call it from init beside register.
func setUsage(path, text string) {
	if _, dup := usages[path]; dup {
		panic("lemon: usage registered twice: " + path)
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	usages[path] = text
}

func isHelpFlag(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

// wantsHelp reports whether a help flag stands among args before a "--".
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if isHelpFlag(a) {
			return true
		}
	}
	return false
}

// usageOf is the usage of command name given the words after it: the
// text of "name SUB" when the first non-flag word is a subcommand with its
// own text, else that of name, else a line built from its summary.
func usageOf(name string, rest []string) string {
	for _, a := range rest {
		if strings.HasPrefix(a, "-") {
			continue
		}
		if u, ok := usages[name+" "+a]; ok {
			return u
		}
		break
	}
	if u, ok := usages[name]; ok {
		return u
	}
	return fmt.Sprintf("usage: lemon %s ARGS...\n\n%s\n", name, commands[name].summary)
}
