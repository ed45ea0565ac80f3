package main

import (
	"context"
	"fmt"
	"os"
	"strings"

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
(exit 0), or the reasons it is refused (exit 1). Without a flag the file is
tried as a worker policy, then as a controller policy.

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
	if len(args) < 2 || args[0] != "check" {
		fmt.Fprint(os.Stderr, policyUsage)
		return 2
	}
	kind, file, layers, ok := parsePolicyCheck(args[1:])
	if !ok {
		fmt.Fprint(os.Stderr, policyUsage)
		return 2
	}
	hasLayers := layers.capabilities != "" || len(layers.roots) > 0 || layers.cwd != ""
	if hasLayers && kind == "--controller" {
		fmt.Fprintln(os.Stderr, "lemon policy check: --capabilities, --allowed-root and --cwd apply to a worker policy")
		return 2
	}
	if kind == "--worker" || hasLayers {
		return checkWorkerLayers(file, layers, os.Getenv, os.Stdout, os.Stderr)
	}
	if kind == "" {
		w, werr := policies.LoadWorker(file)
		if werr == nil {
			werr = checkRateTargets(w)
		}
		if werr == nil {
			return checkWorkerLayers(file, layers, os.Getenv, os.Stdout, os.Stderr)
		}
		c, cerr := policies.LoadController(file)
		if cerr == nil {
			fmt.Print(c.String())
			return 0
		}
		fmt.Fprintf(os.Stderr, "not a valid worker policy: %v\nnot a valid controller policy: %v\n", werr, cerr)
		return 1
	}
	c, err := policies.LoadController(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "controller policy:", err)
		return 1
	}
	fmt.Print(c.String())
	return 0
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
