package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"lemon/host/moduleset/defaultset"
	"lemon/hostcalls"
	"lemon/policies"
)

// nodeLayers is the node's one policy (docs/POLICY.md, "Node layers"):
// the --policy file ∩ the flags ∩ LEMON_NODE_CAPABILITIES, combined with
// policies.Restrict, which never widens. It returns the effective policy
// (its AllowedRoots set to the effective roots), the absolute default cwd
// and the canonical allowed roots.
//
//   - --capabilities and LEMON_NODE_CAPABILITIES each narrow the ceiling;
//     a name outside the file's capabilities is an error naming the layer
//     and the file key. "all" alone means "no further narrowing".
//   - Without a file the roots are home plus each --allowed-root (the
//     spec's CLI). With a file each --allowed-root must lie inside the
//     file's allowed_roots (omitted: home), else an error naming both;
//     given ones replace the file's roots (they are their intersection).
//   - An explicit cwd (--cwd, else default_cwd) outside the effective
//     roots is an error naming it; the implicit one (the current
//     directory) falls back to the first root.
//
// dev (lemon dev) makes the cwd a root too when there is no file, so
// `lemon dev` works in the directory it is started in. Roots and the cwd
// are compared canonically (symlinks resolved), so a root spelled through
// a symlink cannot reach outside the file's roots.
func nodeLayers(o *nodeOptions, getenv func(string) string, dev bool) (pol *policies.Worker, cwd string, roots []string, err error) {
	pol = &policies.Worker{}
	file := o.policy != ""
	if file {
		if pol, err = policies.LoadWorker(o.policy); err != nil {
			return nil, "", nil, err
		}
	}
	for _, layer := range []struct{ name, value string }{
		{"--capabilities", o.capabilities},
		{envNodeCapabilities, getenv(envNodeCapabilities)},
	} {
		if strings.TrimSpace(layer.value) == "" {
			continue
		}
		set, err := capabilityLayer(layer.value)
		if err != nil {
			return nil, "", nil, fmt.Errorf("%s: %w", layer.name, err)
		}
		if file && !set.Unrestricted() {
			for _, c := range set.Items {
				if !pol.Capabilities.Allows(c) {
					return nil, "", nil, fmt.Errorf("%s names capability %q, outside the policy file's capabilities (%s: capabilities); layers only narrow", layer.name, c, o.policy)
				}
			}
		}
		// The layer names capabilities only; it keeps the file's roots
		// (an omitted allowed_roots is home, not "any", to Restrict).
		pol = policies.Restrict(pol, &policies.Worker{Capabilities: set, AllowedRoots: pol.AllowedRoots})
	}

	var flagRoots []string
	for _, r := range o.roots {
		abs, err := canonicalDir(r)
		if err != nil {
			return nil, "", nil, fmt.Errorf("--allowed-root: %w", err)
		}
		flagRoots = append(flagRoots, abs)
	}
	home, _ := os.UserHomeDir()
	if file {
		fileRoots := canonicalRoots(pol.EffectiveRoots())
		for _, r := range flagRoots {
			if !policies.RootsWithin([]string{r}, fileRoots) {
				return nil, "", nil, fmt.Errorf("--allowed-root %s is outside the policy file's allowed_roots (%s: allowed_roots%s); layers only narrow", r, o.policy, omittedNote(pol))
			}
		}
		roots = fileRoots
		if flagRoots != nil {
			roots = policies.IntersectRoots(fileRoots, flagRoots)
		}
	} else {
		if home != "" {
			if h, err := canonicalDir(home); err == nil {
				roots = append(roots, h)
			}
		}
		roots = append(roots, flagRoots...)
	}

	explicit, cwdName := o.cwd, "--cwd"
	if explicit == "" && pol.DefaultCwd != "" {
		explicit, cwdName = pol.DefaultCwd, "default_cwd"
	}
	if explicit != "" {
		if cwd, err = canonicalDir(explicit); err != nil {
			return nil, "", nil, fmt.Errorf("%s: %w", cwdName, err)
		}
	} else {
		wd, err := os.Getwd()
		if err != nil {
			return nil, "", nil, errors.New("cannot determine the current directory; pass --cwd")
		}
		if cwd, err = canonicalDir(wd); err != nil {
			return nil, "", nil, fmt.Errorf("the current directory: %w", err)
		}
	}
	if dev && !file {
		roots = policies.IntersectRoots(append(roots, cwd), append(roots, cwd)) // dedupe, drop nested
	}
	roots = dedupe(roots)
	if len(roots) == 0 {
		return nil, "", nil, errors.New("no allowed root is left after the layers (the file's allowed_roots and --allowed-root do not overlap)")
	}
	if len(roots) > policies.SpecMaxAllowedRoots {
		return nil, "", nil, fmt.Errorf("at most %d allowed roots", policies.SpecMaxAllowedRoots)
	}
	if !policies.RootsWithin([]string{cwd}, roots) {
		if explicit != "" {
			return nil, "", nil, fmt.Errorf("%s %s is outside the effective allowed roots (%s)", cwdName, cwd, strings.Join(roots, ", "))
		}
		cwd = roots[0]
	}
	pol.AllowedRoots = roots
	return pol, cwd, roots, nil
}

// capabilityLayer parses a comma-separated capability list: "all" alone
// (every capability), or well-formed names (docs/POLICY.md,
// "Capabilities"); "all" among names is an error.
func capabilityLayer(v string) (policies.StringSet, error) {
	var items []string
	for _, c := range strings.Split(v, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		if c != hostcalls.CapAll {
			// Capabilities are open: module-declared names (kv, checksum)
			// are as valid as the built-in ones.
			if err := hostcalls.CheckCapability(c); err != nil {
				return policies.StringSet{}, err
			}
		}
		items = append(items, c)
	}
	if len(items) > hostcalls.MaxCeilingCapabilities {
		return policies.StringSet{}, fmt.Errorf("at most %d names", hostcalls.MaxCeilingCapabilities)
	}
	return policies.ParseStringSet(items)
}

// canonicalDir makes p absolute, resolves its symlinks and checks it is a
// directory.
func canonicalDir(p string) (string, error) {
	abs, err := existingDir(p)
	if err != nil {
		return "", err
	}
	if c, err := filepath.EvalSymlinks(abs); err == nil {
		return c, nil
	}
	return abs, nil
}

// canonicalRoots resolves the symlinks of each root that exists; one that
// does not stays as written (the node refuses it when it opens its roots,
// and `lemon policy check` may run on another machine).
func canonicalRoots(roots []string) []string {
	out := make([]string, 0, len(roots))
	for _, r := range roots {
		if c, err := filepath.EvalSymlinks(r); err == nil {
			r = c
		}
		out = append(out, filepath.Clean(r))
	}
	return out
}

func omittedNote(pol *policies.Worker) string {
	if pol.AllowedRoots == nil {
		return ", omitted: the home directory"
	}
	return ""
}

func dedupe(items []string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, i := range items {
		if !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	return out
}

// checkWorkerLayers is `lemon policy check --worker FILE` with a node's
// layers (docs/POLICY.md, "Node layers"): it prints the effective policy
// of FILE ∩ the flags in o ∩ LEMON_NODE_CAPABILITIES and returns 0, or
// prints why a layer is refused (a widening one is named with the file
// key) and returns 1. Without any layer it checks the file alone.
func checkWorkerLayers(file string, o *nodeOptions, getenv func(string) string, stdout, stderr io.Writer) int {
	w, err := policies.LoadWorker(file)
	if err == nil {
		err = checkRateTargets(w)
	}
	var missing []string
	if err == nil {
		missing = missingDirWarnings(w)
	}
	if err == nil && (o.capabilities != "" || len(o.roots) > 0 || o.cwd != "" || getenv(envNodeCapabilities) != "") {
		lo := *o
		lo.policy = file
		w, _, _, err = nodeLayers(&lo, getenv, false)
	}
	if err != nil {
		fmt.Fprintln(stderr, "worker policy:", err)
		return 1
	}
	fmt.Fprint(stdout, w.String())
	for _, warn := range missing {
		fmt.Fprintln(stderr, "warning:", warn)
	}
	if m, _, err := defaultset.Load(); err == nil {
		for _, warn := range ceilingWarnings(w, m) {
			fmt.Fprintln(stderr, "warning:", warn)
		}
	}
	return 0
}
