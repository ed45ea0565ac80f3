package main

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"lemon/version"
)

// Every form of help on every command of the tree (cobra's own and the
// self-parsing ones, their subcommands included) exits 0 with text on
// stdout and nothing on stderr; every usage error exits 2 with nothing on
// stdout and a hint on stderr.
func TestHelpAndExitCodeTable(t *testing.T) {
	root := newRoot(nil, &strings.Builder{}, &strings.Builder{}, new(error))
	root.InitDefaultHelpCmd()
	var helps [][]string
	helps = append(helps, nil, []string{"--help"}, []string{"-h"}, []string{"help"})
	var names []string
	for _, c := range root.Commands() {
		names = append(names, c.Name())
		helps = append(helps, []string{c.Name(), "--help"}, []string{c.Name(), "-h"}, []string{"help", c.Name()})
		for _, sub := range c.Commands() {
			helps = append(helps, []string{c.Name(), sub.Name(), "--help"}, []string{"help", c.Name(), sub.Name()})
		}
	}
	sort.Strings(names)
	for _, want := range []string{"call", "completion", "controller", "dev", "fs", "help", "modules", "node", "nodes",
		"plugin", "policy", "run", "vault", "version"} {
		if i := sort.SearchStrings(names, want); i == len(names) || names[i] != want {
			t.Errorf("command %q missing from the tree: %v", want, names)
		}
	}
	for _, args := range helps {
		code, out, errOut := runMainT(args...)
		if code != 0 || strings.TrimSpace(out) == "" || errOut != "" {
			t.Errorf("lemon %s: exit %d, stdout %q, stderr %q; want exit 0 and help on stdout",
				strings.Join(args, " "), code, firstLine(out), errOut)
		}
	}

	// controller --help is its written usage, not a flag dump.
	if _, out, _ := runMainT("controller", "--help"); !strings.HasPrefix(out, "usage: lemon controller") ||
		!strings.Contains(out, "--listen ADDR") || strings.Contains(out, "-listen string") {
		t.Errorf("controller --help:\n%s", out)
	}

	for _, args := range [][]string{
		{"frobnicate"}, {"--bogus"}, {"help", "frobnicate"}, {"frobnicate", "--help"}, {"help", "plugin", "frobnicate"},
		{"version", "extra"}, {"version", "--bogus"}, {"completion", "tcsh"},
		{"run"}, {"run", "box"}, {"run", "--", "true"}, {"run", "a", "b", "--", "true"}, {"run", "box", "--bogus", "--", "true"},
		{"run", "box", "--timeout", "999ms", "--", "true"}, {"run", "box", "--get", "x", "--", "true"},
		{"call"}, {"fs"}, {"vault"}, {"node"}, {"policy"}, {"plugin"}, {"plugin", "frobnicate"},
		{"controller", "--bogus"}, {"dev", "--bogus"}, {"node", "join", "--bogus"}, {"modules", "--bogus"},
		{"fs", "frob", "node", "x"}, {"vault", "frob"}, {"nodes", "--bogus"},
	} {
		code, out, errOut := runMainOS(t, args...)
		if code != 2 || out != "" || strings.TrimSpace(errOut) == "" {
			t.Errorf("lemon %s: exit %d, stdout %q, stderr %q; want exit 2 and a hint on stderr",
				strings.Join(args, " "), code, firstLine(out), firstLine(errOut))
		}
	}
	// cobra's usage errors name the help to read.
	for args, hint := range map[string]string{
		"frobnicate":            "run 'lemon help'",
		"run box":               "run 'lemon run --help'",
		"version --bogus":       "run 'lemon version --help'",
		"run box --bogus -- ls": "lemon run: unknown flag: --bogus",
	} {
		if _, _, errOut := runMainT(strings.Fields(args)...); !strings.Contains(errOut, hint) {
			t.Errorf("lemon %s: stderr %q, want it to contain %q", args, errOut, hint)
		}
	}
}

// lemon version and lemon --version print the version package's CalVer.
func TestVersion(t *testing.T) {
	want := "lemon " + version.Version + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if code, out, errOut := runMainT(args...); code != 0 || out != want || errOut != "" {
			t.Errorf("lemon %s: exit %d, stdout %q, stderr %q; want %q", strings.Join(args, " "), code, out, errOut, want)
		}
	}
	if !regexp.MustCompile(`^\d{4}\.\d{2}\.\d+$`).MatchString(version.Version) {
		t.Errorf("version.Version %q is not a CalVer YYYY.MM.PATCH", version.Version)
	}
}

// No Go source outside the version package spells a Lemon version: every
// version string comes from lemon/version. The literals allowed are module
// (family) versions, which belong to a module, not to the build.
func TestOneVersionSource(t *testing.T) {
	lit := regexp.MustCompile(`(?i)version\w*\s*(=|:=|:)\s*"v?\d+\.\d+\.\d+"`)
	familyVersion := regexp.MustCompile(`^\s*Version:\s+"\d+\.\d+\.\d+",`) // a module manifest's family version
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	filepath.WalkDir(repo, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(repo, p)
		if d.IsDir() {
			if rel == "version" || d.Name() == "testdata" || d.Name() == "bin" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		for i, line := range strings.Split(string(b), "\n") {
			if lit.MatchString(line) && !familyVersion.MatchString(line) {
				t.Errorf("%s:%d: a version literal (use lemon/version): %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
}

// Completion scripts are generated for bash, zsh, fish and powershell, and
// the tree completes command and subcommand names and cobra flags.
func TestCompletion(t *testing.T) {
	for shell, mark := range map[string]string{
		"bash": "__start_lemon", "zsh": "#compdef lemon", "fish": "complete -c lemon", "powershell": "Register-ArgumentCompleter",
	} {
		code, out, errOut := runMainT("completion", shell)
		if code != 0 || !strings.Contains(out, mark) || errOut != "" {
			t.Errorf("completion %s: exit %d, %d bytes, stderr %q; want a script containing %q", shell, code, len(out), errOut, mark)
		}
	}
	for args, want := range map[string][]string{
		"__complete ":              {"run", "version", "fs", "nodes", "plugin", "completion"},
		"__complete plugin ":       {"new", "build", "inspect", "conformance", "run"},
		"__complete fs ":           {"ls", "stat", "mv", "rm", "get", "put"},
		"__complete modules ":      {"status", "export"},
		"__complete run box --ti":  {"--timeout"},
		"__complete completion f":  {"fish"},
		"__complete help pl":       {"plugin"},
		"__complete nodes ":        {"approve", "reject", "rename"},
		"__complete vault ":        {"gen-key", "rotate-key", "check"},
		"__complete run box --get": {"--get"},
	} {
		a := strings.Split(args, " ")
		code, out, _ := runMainT(a...)
		got := map[string]bool{}
		for _, l := range strings.Split(out, "\n") {
			got[strings.SplitN(l, "\t", 2)[0]] = true
		}
		for _, w := range want {
			if code != 0 || !got[w] {
				t.Errorf("lemon %q: exit %d, completions %q; want %q among them", args, code, out, w)
			}
		}
	}
}

// runMainOS is runMainT with os.Stdout and os.Stderr captured too: the
// self-parsing commands write there.
func runMainOS(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	oldOut, oldErr := os.Stdout, os.Stderr
	defer func() { os.Stdout, os.Stderr = oldOut, oldErr }()
	var files [2]*os.File
	for i, n := range []string{"stdout", "stderr"} {
		f, err := os.Create(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files[i] = f
	}
	os.Stdout, os.Stderr = files[0], files[1]
	code, out, errOut := runMainT(args...)
	b0, _ := os.ReadFile(files[0].Name())
	b1, _ := os.ReadFile(files[1].Name())
	return code, out + string(b0), errOut + string(b1)
}
