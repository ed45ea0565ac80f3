package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"lemon/controller"
	"lemon/host"
	"lemon/host/conformance"
	"lemon/host/moduleset"
	"lemon/hostcalls"
	"lemon/hostcalls/families"
	"lemon/plugins"
	"lemon/protocol"
)

func init() {
	register("plugin", "scaffold, build, inspect, test and run modules: new, build, inspect, conformance, run", runPlugin)
	setUsage("plugin", pluginUsage)
	setUsage("plugin new", pluginNewUsage)
	setUsage("plugin build", pluginBuildUsage)
	setUsage("plugin inspect", pluginInspectUsage)
	setUsage("plugin conformance", pluginConformanceUsage)
	setUsage("plugin run", pluginRunUsage)
}

const pluginUsage = `usage:
  lemon plugin new NAME [--dir DIR]        scaffold the method family NAME (builds offline)
  lemon plugin build DIR [-o OUT.wasm] [--set SETDIR]
                                           build a Go plugin package as a wasip1 reactor module
  lemon plugin inspect MODULE.wasm         print the module's manifest, sha256 and host-call imports
  lemon plugin conformance MODULE.wasm [--cases DIR]
                                           run the family's conformance cases against the module
  lemon plugin run MODULE.wasm METHOD [PARAMS_JSON | -] [--allowed-root DIR]... [--cwd DIR]
                   [--capabilities LIST]   run one call against a local in-process host

'lemon plugin COMMAND --help' shows one command's usage.
`

const pluginBuildUsage = `usage: lemon plugin build DIR [-o OUT.wasm] [--set SETDIR]

Builds the Go main package in DIR with GOOS=wasip1 GOARCH=wasm
-buildmode=c-shared (the environment passes through, so GOFLAGS=-mod=mod
GOPROXY=off builds a 'lemon plugin new' scaffold offline), then prints what
'lemon plugin inspect' prints. At least one of -o and --set is needed.

  -o OUT.wasm    write the module here
  --set SETDIR   add the module to the module-set directory SETDIR as
                 FAMILY.wasm, replacing that family's module, and rewrite
                 SETDIR/manifest.json from every *.wasm in it

The build fails (exit 1, nothing written) when every node would refuse
the module at load: it imports a host call its manifest does not declare
in HostCalls, declares a host call without its capability, or declares a
method the controller refuses (docs/PLUGINS.md, "Declaring a method"). A
host call declared but never imported is a warning.
`

const pluginInspectUsage = `usage: lemon plugin inspect MODULE.wasm

Prints the module's sha256, size, manifest (lemon_describe) and the host
calls it imports as JSON. A mismatch between the imports and the
manifest's HostCalls is listed under "warnings" and on stderr; the exit
code stays 0 (a node refuses a module importing an undeclared host call;
'lemon plugin build' fails on it).
`

const pluginConformanceUsage = `usage: lemon plugin conformance MODULE.wasm [--cases DIR]

Runs conformance cases (docs/CONFORMANCE.md) through the real host against
the module: the cases in DIR (*.json), else the built-in cases of the
module's family (first-party families only). Exit 0 when every case of
the module's family passes.
`

func runPlugin(args []string) int { return pluginMain(args, os.Stdout, os.Stderr) }

func pluginMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, pluginUsage)
		return 2
	}
	switch args[0] {
	case "new":
		return pluginNew(args[1:], stdout, stderr)
	case "build":
		return pluginBuild(args[1:], stdout, stderr)
	case "inspect":
		return pluginInspect(args[1:], stdout, stderr)
	case "conformance":
		return pluginConformance(args[1:], stdout, stderr)
	case "run":
		return pluginRun(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "lemon plugin: unknown command %q; run 'lemon plugin --help'\n", args[0])
	return 2
}

// newFlags is a flag set whose errors go to stderr and whose usage is
// printed by flagExit, not by the flag package.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fl := flag.NewFlagSet(name, flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() {}
	return fl
}

// flagExit turns a flag parse error into an exit code: -h or --help
// prints usage to stdout and exits 0; any other error (already reported
// by the flag package) prints usage to stderr and exits 2.
func flagExit(err error, usage string, stdout, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprint(stderr, usage)
	return 2
}

// plainFamilyRE is a family name usable as a file name in a set directory.
var plainFamilyRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

func pluginBuild(args []string, stdout, stderr io.Writer) int {
	fl := newFlags("lemon plugin build", stderr)
	out := fl.String("o", "", "output .wasm file")
	setDir := fl.String("set", "", "module-set directory to add the module to")
	pos, err := parseInterleaved(fl, args)
	if err != nil {
		return flagExit(err, pluginBuildUsage, stdout, stderr)
	}
	if len(pos) != 1 || (*out == "" && *setDir == "") {
		fmt.Fprint(stderr, pluginBuildUsage)
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "lemon plugin build:", err)
		return 1
	}
	if *setDir != "" {
		if st, err := os.Stat(*setDir); err != nil || !st.IsDir() {
			return fail(fmt.Errorf("--set %s is not a directory (create it with 'lemon modules export %s')", *setDir, *setDir))
		}
	}
	tmpDir, err := os.MkdirTemp("", "lemon-plugin-build-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmpDir)
	built := filepath.Join(tmpDir, "module.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-buildvcs=false", "-o", built, ".")
	cmd.Dir = pos[0]
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return fail(errors.New("go build failed"))
	}
	wasm, err := os.ReadFile(built)
	if err != nil {
		return fail(err)
	}
	rep, err := inspectModule(wasm)
	if err != nil {
		return fail(err)
	}
	for _, w := range rep.Warnings {
		fmt.Fprintln(stderr, "lemon plugin build: warning:", w)
	}
	if len(rep.undeclared) > 0 {
		return fail(fmt.Errorf("module %s imports host calls its manifest does not declare in HostCalls (%s); every node refuses it at load: add them to HostCalls (and their capabilities to Capabilities)",
			rep.Manifest.Family, strings.Join(rep.undeclared, ", ")))
	}
	if len(rep.refused) > 0 {
		return fail(fmt.Errorf("module %s: %s; every node refuses it at load", rep.Manifest.Family, strings.Join(rep.refused, "; ")))
	}
	if *out != "" {
		if err := writeFileAtomic(*out, wasm); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stderr, "lemon plugin build: %s %s written to %s\n", rep.Manifest.Family, rep.Manifest.Version, *out)
	}
	if *setDir != "" {
		if err := addToSet(*setDir, rep.Manifest.Family, wasm); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stderr, "lemon plugin build: %s %s added to %s (manifest rewritten)\n", rep.Manifest.Family, rep.Manifest.Version, *setDir)
	}
	printJSON(stdout, rep)
	return 0
}

// addToSet writes wasm into setDir as FAMILY.wasm, removes a file of the
// same family under another name, and rewrites the set's manifest.
func addToSet(setDir, family string, wasm []byte) error {
	if !plainFamilyRE.MatchString(family) {
		return fmt.Errorf("family %q cannot name a file in a module set", family)
	}
	file := family + ".wasm"
	var old moduleset.Module
	if data, err := os.ReadFile(filepath.Join(setDir, moduleset.ManifestFile)); err == nil {
		if m, err := moduleset.ParseManifest(data); err == nil {
			old, _ = m.Find(family)
		}
	}
	prev, prevErr := os.ReadFile(filepath.Join(setDir, file))
	if err := writeFileAtomic(filepath.Join(setDir, file), wasm); err != nil {
		return err
	}
	var oldBytes []byte
	if old.File != "" && old.File != file {
		oldBytes, _ = os.ReadFile(filepath.Join(setDir, old.File))
		if err := os.Remove(filepath.Join(setDir, old.File)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	// The set must stay one the controller pins: a module whose
	// declarations clash with the set's is refused, and the set is left as
	// it was.
	check := func(m moduleset.Manifest, bytesByFamily map[string][]byte) error {
		_, err := controller.NewModuleSet(m, bytesByFamily)
		return err
	}
	if _, err := moduleset.WriteManifestChecked(setDir, host.DescribeModule, check); err != nil {
		if prevErr == nil {
			writeFileAtomic(filepath.Join(setDir, file), prev)
		} else {
			os.Remove(filepath.Join(setDir, file))
		}
		if oldBytes != nil {
			writeFileAtomic(filepath.Join(setDir, old.File), oldBytes)
		}
		return fmt.Errorf("set %s: %w", setDir, err)
	}
	return nil
}

// writeFileAtomic writes b to path through a temporary file in the same
// directory and a rename.
func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// moduleReport is what inspect and build print.
type moduleReport struct {
	SHA256   string        `json:"sha256"`
	Size     int           `json:"size"`
	Manifest host.Manifest `json:"manifest"`
	// Imports are the host calls the module imports (without result_read).
	Imports  []string `json:"imports"`
	Warnings []string `json:"warnings,omitempty"`

	undeclared []string
	// refused are the other reasons every node refuses the module at
	// load: a host call without its capability declared, a method
	// declaration the controller and nodes refuse.
	refused []string
}

func inspectModule(wasm []byte) (moduleReport, error) {
	ctx := context.Background()
	man, err := host.Inspect(ctx, wasm)
	if err != nil {
		return moduleReport{}, err
	}
	imports, err := host.Imports(ctx, wasm)
	if err != nil {
		return moduleReport{}, err
	}
	sum := sha256.Sum256(wasm)
	rep := moduleReport{SHA256: hex.EncodeToString(sum[:]), Size: len(wasm), Manifest: man, Imports: imports}
	if rep.Imports == nil {
		rep.Imports = []string{}
	}
	undeclared, unused := host.CheckImports(man, imports)
	rep.undeclared = undeclared
	for _, n := range undeclared {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("imports host call %q, which its manifest does not declare in HostCalls: a node refuses this module at load", n))
	}
	for _, n := range unused {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("declares host call %q in HostCalls but never imports it", n))
	}
	caps := map[string]bool{}
	for _, c := range man.Capabilities {
		caps[c] = true
	}
	hostCaps := map[string]string{}
	var effects []string
	for _, table := range families.DocTables() {
		for _, hc := range table {
			hostCaps[hc.Name] = hc.Capability
			if hc.Effect() && slices.Contains(man.HostCalls, hc.Name) {
				effects = append(effects, hc.Name)
			}
		}
	}
	sort.Strings(effects)
	for _, ms := range man.Methods {
		if ms.Retry == protocol.RetryRead && len(effects) > 0 {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("method %s declares retry class read, but the module makes effect host calls (%s): a caller retries a read after a timeout, so a method that can reach them must declare mutation",
				ms.Name, strings.Join(effects, ", ")))
		}
	}
	for _, n := range man.HostCalls {
		if c, ok := hostCaps[n]; ok && c != hostcalls.CapNone && !caps[c] {
			rep.refused = append(rep.refused, fmt.Sprintf("host call %q needs capability %q, which Capabilities does not declare", n, c))
		}
	}
	for _, ms := range man.Methods {
		if err := protocol.CheckMethodDeclaration(ms.Name, ms.Version, ms.Scope, ms.Retry, ms.Params, ms.DeadlineMs); err != nil {
			rep.refused = append(rep.refused, err.Error())
		}
	}
	for _, r := range rep.refused {
		rep.Warnings = append(rep.Warnings, r+": a node refuses this module at load")
	}
	return rep, nil
}

func printJSON(w io.Writer, v any) {
	out, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(w, string(out))
}

func pluginInspect(args []string, stdout, stderr io.Writer) int {
	fl := newFlags("lemon plugin inspect", stderr)
	pos, err := parseInterleaved(fl, args)
	if err != nil {
		return flagExit(err, pluginInspectUsage, stdout, stderr)
	}
	if len(pos) != 1 {
		fmt.Fprint(stderr, pluginInspectUsage)
		return 2
	}
	wasm, err := os.ReadFile(pos[0])
	if err != nil {
		fmt.Fprintln(stderr, "lemon plugin inspect:", err)
		return 1
	}
	rep, err := inspectModule(wasm)
	if err != nil {
		fmt.Fprintln(stderr, "lemon plugin inspect:", err)
		return 1
	}
	for _, w := range rep.Warnings {
		fmt.Fprintln(stderr, "lemon plugin inspect: warning:", w)
	}
	printJSON(stdout, rep)
	return 0
}

func pluginConformance(args []string, stdout, stderr io.Writer) int {
	fl := newFlags("lemon plugin conformance", stderr)
	casesDir := fl.String("cases", "", "directory of case files (default: the embedded cases of the module's family)")
	pos, err := parseInterleaved(fl, args)
	if err != nil {
		return flagExit(err, pluginConformanceUsage, stdout, stderr)
	}
	if len(pos) != 1 {
		fmt.Fprint(stderr, pluginConformanceUsage)
		return 2
	}
	ctx := context.Background()
	wasm, err := os.ReadFile(pos[0])
	if err != nil {
		fmt.Fprintln(stderr, "lemon plugin conformance:", err)
		return 1
	}
	man, err := host.Inspect(ctx, wasm)
	if err != nil {
		fmt.Fprintln(stderr, "lemon plugin conformance:", err)
		return 1
	}
	var files []conformance.File
	if *casesDir != "" {
		if files, err = conformance.LoadDir(*casesDir); err == nil && len(files) == 0 {
			err = fmt.Errorf("no *.json case files in %s", *casesDir)
		}
	} else if fsys := plugins.Conformance(man.Family); fsys != nil {
		files, err = conformance.LoadFS(fsys)
	} else {
		err = fmt.Errorf("no built-in cases for family %q; pass --cases DIR", man.Family)
	}
	if err != nil {
		fmt.Fprintln(stderr, "lemon plugin conformance:", err)
		return 1
	}
	cache, err := os.MkdirTemp("", "lemon-conformance-cache-")
	if err != nil {
		fmt.Fprintln(stderr, "lemon plugin conformance:", err)
		return 1
	}
	defer os.RemoveAll(cache)
	r := &conformance.Runner{Wasm: wasm, CacheDir: cache}
	passed, failed := 0, 0
	for _, f := range files {
		if f.Family != man.Family {
			continue
		}
		for _, res := range r.RunFile(ctx, f) {
			if res.Err != nil {
				failed++
				fmt.Fprintf(stdout, "FAIL %s / %s: %v\n", res.File, res.Case, res.Err)
			} else {
				passed++
				fmt.Fprintf(stdout, "ok   %s / %s\n", res.File, res.Case)
			}
		}
	}
	fmt.Fprintf(stdout, "conformance: %d passed, %d failed\n", passed, failed)
	if failed > 0 || passed == 0 {
		return 1
	}
	return 0
}
