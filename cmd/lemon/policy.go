package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"lemon/host"
	"lemon/host/moduleset"
	"lemon/host/moduleset/defaultset"
	"lemon/hostcalls"
	"lemon/policies"
)

func init() {
	register("policy", "check a worker or controller policy and print the effective policy", runPolicy)
	setUsage("policy", policyUsage)
}

const policyUsage = `usage: lemon policy check [--worker|--controller] FILE
       lemon policy check [--worker] FILE [--capabilities LIST] [--allowed-root DIR]... [--cwd DIR]

Validates a worker or controller policy and prints the effective policy
(exit 0), or the reasons it is refused (exit 1). Without a flag the kind
comes from the file's keys ([[operators]], listen, tls, ... make it a
controller policy; default_cwd, allowed_roots, capabilities, ... a worker
policy); a file that names neither is tried as both. A worker policy's
default_cwd or allowed_roots that is not an existing directory on this
host draws a warning ('lemon node join' refuses it there).

With --capabilities, --allowed-root, --cwd or LEMON_NODE_CAPABILITIES the
worker policy is combined with them as 'lemon node join' does (the file ∩
the flags ∩ the environment) and the effective node policy is printed; a
layer that would widen the file is refused, naming the layer and the file
key (docs/POLICY.md, "Node layers").
`

// runPolicy implements `lemon policy check [--controller|--worker] FILE
// [layers]`. Without a kind flag the file is tried as a worker policy,
// then as a controller policy; the errors of both are shown if neither
// fits. Layer flags make it a worker check of the node's layers.
func runPolicy(args []string) int {
	return policyCheck(args, os.Getenv, os.Stdout, os.Stderr)
}

// policyCheck is runPolicy writing to stdout and stderr.
func policyCheck(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) < 2 || args[0] != "check" {
		fmt.Fprint(stderr, policyUsage)
		return 2
	}
	kind, file, layers, ok := parsePolicyCheck(args[1:])
	if !ok {
		fmt.Fprint(stderr, policyUsage)
		return 2
	}
	hasLayers := layers.capabilities != "" || len(layers.roots) > 0 || layers.cwd != ""
	if hasLayers && kind == "--controller" {
		fmt.Fprintln(stderr, "lemon policy check: --capabilities, --allowed-root and --cwd apply to a worker policy")
		return 2
	}
	if kind == "" && !hasLayers {
		kind = policyKind(file)
	}
	if kind == "--worker" || hasLayers {
		return checkWorkerLayers(file, layers, getenv, stdout, stderr)
	}
	if kind == "" {
		w, werr := policies.LoadWorker(file)
		if werr == nil {
			werr = checkRateTargets(w)
		}
		if werr == nil {
			return checkWorkerLayers(file, layers, getenv, stdout, stderr)
		}
		c, cerr := policies.LoadController(file)
		if cerr == nil {
			fmt.Fprint(stdout, c.String())
			return 0
		}
		if werr.Error() == cerr.Error() { // a TOML syntax error or an unreadable file
			fmt.Fprintln(stderr, "policy:", werr)
			return 1
		}
		fmt.Fprintf(stderr, "not a valid worker policy: %v\nnot a valid controller policy: %v\n", werr, cerr)
		return 1
	}
	c, err := policies.LoadController(file)
	if err != nil {
		fmt.Fprintln(stderr, "controller policy:", err)
		return 1
	}
	fmt.Fprint(stdout, c.String())
	return 0
}

// Top-level keys only one kind of policy has (docs/POLICY.md); "limits"
// and "state_dir" are in both.
var (
	controllerOnlyKeys = []string{"listen", "max_payload", "module_set", "tls", "operators", "node_tokens"}
	workerOnlyKeys     = []string{"default_cwd", "allowed_roots", "capabilities", "allowed_commands",
		"blocked_commands", "pool", "rate_limits", "vault", "modules"}
)

// policyKind reads file's top-level keys: "--controller" when it has a
// controller-only key and no worker-only one, "--worker" for the reverse,
// else "" (unreadable, not TOML, both or neither: tried as both).
func policyKind(file string) string {
	var top map[string]any
	if _, err := toml.DecodeFile(file, &top); err != nil {
		return ""
	}
	has := func(keys []string) bool {
		for _, k := range keys {
			if _, ok := top[k]; ok {
				return true
			}
		}
		return false
	}
	c, w := has(controllerOnlyKeys), has(workerOnlyKeys)
	switch {
	case c && !w:
		return "--controller"
	case w && !c:
		return "--worker"
	}
	return ""
}

// missingDirWarnings names default_cwd and each allowed root of w that is
// not an existing directory on this host: the file is valid, but
// 'lemon node join --policy' refuses it here.
func missingDirWarnings(w *policies.Worker) []string {
	var out []string
	check := func(key, p string) {
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			out = append(out, fmt.Sprintf("%s: %s is not an existing directory on this host ('lemon node join --policy' refuses it here)", key, p))
		}
	}
	if w.DefaultCwd != "" {
		check("default_cwd", w.DefaultCwd)
	}
	roots := append([]string(nil), w.AllowedRoots...)
	sort.Strings(roots)
	for _, r := range roots {
		if r != w.DefaultCwd {
			check("allowed_roots", r)
		}
	}
	return out
}

// parsePolicyCheck reads the arguments after "check": at most one kind
// flag, exactly one FILE, and the node layer flags in any order (each
// as "--flag VALUE" or "--flag=VALUE").
func parsePolicyCheck(args []string) (kind, file string, layers *nodeOptions, ok bool) {
	layers = &nodeOptions{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(a, "=")
		switch name {
		case "--worker", "--controller":
			if hasValue || kind != "" {
				return "", "", nil, false
			}
			kind = name
			continue
		case "--capabilities", "--allowed-root", "--cwd":
			if !hasValue {
				if i+1 >= len(args) {
					return "", "", nil, false
				}
				i++
				value = args[i]
			}
			switch name {
			case "--capabilities":
				layers.capabilities = value
			case "--allowed-root":
				layers.roots = append(layers.roots, value)
			case "--cwd":
				layers.cwd = value
			}
			continue
		}
		if strings.HasPrefix(a, "-") || file != "" {
			return "", "", nil, false
		}
		file = a
	}
	return kind, file, layers, file != ""
}

// checkRateTargets refuses rate rules that match no module or host call
// of the module set this binary embeds (policies.Worker.CheckRateTargets).
// It reads each module's manifest only when the policy has rate rules.
func checkRateTargets(w *policies.Worker) error {
	if len(w.RateLimits) == 0 {
		return nil
	}
	modules, err := embeddedHostCalls(context.Background())
	if err != nil {
		return fmt.Errorf("rate_limits: cannot check against the embedded module set: %w", err)
	}
	return w.CheckRateTargets(modules)
}

// embeddedHostCalls maps each family of the embedded module set to the
// host calls its module imports.
func embeddedHostCalls(ctx context.Context) (map[string][]string, error) {
	m, mods, err := defaultset.Load()
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, mod := range m.Modules {
		man, err := host.Inspect(ctx, mods[mod.Family])
		if err != nil {
			return nil, fmt.Errorf("module %s: %w", mod.Family, err)
		}
		out[mod.Family] = man.HostCalls
	}
	return out, nil
}

// ceilingWarnings names each capability of w's ceiling that neither a
// host call requires nor a method of set declares. Such a name is not an
// error: a controller may pin another set whose modules declare it
// (docs/POLICY.md, "Capabilities"); it is reported so a typo shows.
func ceilingWarnings(w *policies.Worker, set moduleset.Manifest) []string {
	if w.Capabilities.Unrestricted() {
		return nil
	}
	declared := map[string]bool{}
	for _, c := range hostcalls.AllCapabilities {
		declared[c] = true
	}
	for _, mod := range set.Modules {
		for _, ms := range mod.Methods {
			declared[ms.Capability] = true
		}
	}
	var out []string
	for _, c := range w.Ceiling() {
		if !declared[c] {
			out = append(out, fmt.Sprintf("capability %q is required by no host call and declared by no method of the embedded module set (a set the controller pins may declare it)", c))
		}
	}
	return out
}
