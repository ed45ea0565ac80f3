package main

import (
	"context"
	"fmt"
	"os"

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

Validates a worker or controller policy and prints the effective policy
(exit 0), or the reasons it is refused (exit 1). Without a flag the file is
tried as a worker policy, then as a controller policy.
`

// runPolicy implements `lemon policy check [--controller|--worker] FILE`.
// Without a flag the file is tried as a worker policy, then as a
// controller policy; the errors of both are shown if neither fits.
func runPolicy(args []string) int {
	if len(args) < 2 || args[0] != "check" {
		fmt.Fprint(os.Stderr, policyUsage)
		return 2
	}
	kind, file := "", args[len(args)-1]
	if len(args) == 3 {
		kind = args[1]
	}
	if kind == "" || kind == "--worker" {
		w, werr := policies.LoadWorker(file)
		if werr == nil {
			werr = checkRateTargets(w)
		}
		if werr == nil {
			fmt.Print(w.String())
			if m, _, err := defaultset.Load(); err == nil {
				for _, warn := range ceilingWarnings(w, m) {
					fmt.Fprintln(os.Stderr, "warning:", warn)
				}
			}
			return 0
		}
		if kind == "--worker" {
			fmt.Fprintln(os.Stderr, "worker policy:", werr)
			return 1
		}
		c, cerr := policies.LoadController(file)
		if cerr == nil {
			fmt.Print(c.String())
			return 0
		}
		fmt.Fprintf(os.Stderr, "not a valid worker policy: %v\nnot a valid controller policy: %v\n", werr, cerr)
		return 1
	}
	if kind != "--controller" {
		fmt.Fprint(os.Stderr, policyUsage)
		return 2
	}
	c, err := policies.LoadController(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "controller policy:", err)
		return 1
	}
	fmt.Print(c.String())
	return 0
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
