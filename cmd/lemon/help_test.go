package main

import (
	"bytes"
	"sort"
	"strings"
	"testing"
)

func runMainT(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := runMain(args, &out, &errb)
	return code, out.String(), errb.String()
}

// Every command and subcommand answers --help, -h and "lemon help ..."
// with its usage on stdout and exit 0, without running.
func TestEveryHelpPrintsUsageAndExitsZero(t *testing.T) {
	type tc struct {
		args []string
		want string // a line the usage must contain
	}
	cases := []tc{
		{nil, "usage: lemon COMMAND"},
		{[]string{"--help"}, "usage: lemon COMMAND"},
		{[]string{"-h"}, "usage: lemon COMMAND"},
		{[]string{"help"}, "usage: lemon COMMAND"},
	}
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, h := range []string{"--help", "-h", "-help"} {
			cases = append(cases, tc{[]string{n, h}, "usage:"})
		}
		cases = append(cases, tc{[]string{"help", n}, "usage:"})
		if _, ok := usages[n]; !ok {
			t.Errorf("command %q has no usage text (setUsage)", n)
		}
	}
	paths := make([]string, 0, len(usages))
	for p := range usages {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		words := strings.Fields(p)
		if len(words) != 2 {
			continue
		}
		// The subcommand's own text, through every way of asking.
		want := "lemon " + p
		cases = append(cases,
			tc{[]string{words[0], words[1], "--help"}, want},
			tc{[]string{words[0], words[1], "x.wasm", "-h"}, want},
			tc{[]string{"help", words[0], words[1]}, want})
	}
	// Subcommands of commands with one usage text for all of them.
	for _, args := range [][]string{
		{"fs", "ls", "--help"}, {"fs", "put", "--help"}, {"vault", "gen-key", "--help"},
		{"vault", "check", "--help"}, {"node", "join", "--help"}, {"nodes", "approve", "--help"},
		{"policy", "check", "--help"}, {"call", "node.host.info", "--help"},
	} {
		cases = append(cases, tc{args, "lemon " + args[0]})
	}
	for _, c := range cases {
		code, out, errOut := runMainT(c.args...)
		if code != 0 || !strings.Contains(out, c.want) || errOut != "" {
			t.Errorf("lemon %s: exit %d, stdout %q, stderr %q; want exit 0 and a usage containing %q on stdout",
				strings.Join(c.args, " "), code, firstLine(out), errOut, c.want)
		}
	}
	if len(paths) < 7 {
		t.Errorf("only %d usage texts registered: %v", len(paths), paths)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// The reported input: `lemon plugin inspect --help` answered
// "open --help: no such file or directory".
func TestPluginInspectHelpIsUsageNotAFileName(t *testing.T) {
	code, out, errOut := runMainT("plugin", "inspect", "--help")
	if code != 0 || !strings.HasPrefix(out, "usage: lemon plugin inspect MODULE.wasm") || strings.Contains(out+errOut, "open") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// The same through the subcommand's own flag set (pluginMain called
	// without the dispatcher in front).
	var o, e bytes.Buffer
	if code := pluginMain([]string{"inspect", "--help"}, &o, &e); code != 0 || !strings.HasPrefix(o.String(), "usage: lemon plugin inspect") || e.Len() != 0 {
		t.Fatalf("pluginMain: exit %d, stdout %q, stderr %q", code, o.String(), e.String())
	}
}

// "--" ends the flags: a --help after it is an argument, not a request for help.
func TestHelpAfterDoubleDashIsAnArgument(t *testing.T) {
	if wantsHelp([]string{"build", "--", "--help"}) {
		t.Fatal("--help after -- taken as a help request")
	}
	if !wantsHelp([]string{"build", "--help", "--"}) {
		t.Fatal("--help before -- not taken as a help request")
	}
}

// Unknown commands and subcommands exit 2 with a hint on stderr and
// nothing on stdout.
func TestUnknownCommandsExitTwoWithAHint(t *testing.T) {
	for _, args := range [][]string{{"frobnicate"}, {"help", "frobnicate"}, {"--bogus"}} {
		code, out, errOut := runMainT(args...)
		if code != 2 || out != "" || !strings.Contains(errOut, "unknown command") || !strings.Contains(errOut, "lemon help") {
			t.Errorf("lemon %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, errOut)
		}
	}
	pluginT := func(args ...string) (int, string, string) {
		var o, e bytes.Buffer
		code := pluginMain(args, &o, &e)
		return code, o.String(), e.String()
	}
	code, out, errOut := pluginT("frobnicate")
	if code != 2 || out != "" || !strings.Contains(errOut, `unknown command "frobnicate"`) || !strings.Contains(errOut, "lemon plugin --help") {
		t.Errorf("lemon plugin frobnicate: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = pluginT("build", "--bogus", "x")
	if code != 2 || out != "" || !strings.Contains(errOut, "flag provided but not defined: -bogus") {
		t.Errorf("lemon plugin build --bogus: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
