package policies

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"lemon/hostcalls"
	"lemon/policies/authority"
)

// Spec limits a worker policy may lower but never raise
// (docs/PROCESS.md, docs/POLICY.md).
const (
	SpecMaxActiveProcesses  = 16
	SpecMaxRetainedReceipts = 1000
	SpecMaxOutputCache      = 16
	SpecMaxAllowedRoots     = 64
)

// Worker is the worker (node) policy, decoded strictly from TOML. Example:
//
//	default_cwd = "/srv/project"
//	allowed_roots = ["/srv/project", "/mnt/results"]  # an explicit list replaces the home fallback
//	capabilities = ["hostinfo", "read", "write"]      # the node's ceiling; "all", ["all"] or omitted = every capability
//	allowed_commands = ["git", "/usr/bin/make"]       # omitted, "all" or ["all"] = unrestricted; [] = no commands
//	blocked_commands = ["rm"]
//	state_dir = "/var/lib/lemon-node"            # default ~/.lemon/nodes/state/NAME
//
//	[limits]
//	max_active_processes = 8      # at most 16
//	max_retained_receipts = 500   # at most 1000
//	output_cache_entries = 16     # at most 16
//
//	[pool]
//	size = 4                      # live instances per module
//	recycle_after_calls = 1000
//	memory_limit_pages = 4096     # 64 KiB pages per instance
//
//	[[rate_limits]]               # token buckets at the gate
//	module = "hostinfo"           # "" = every module
//	hostcall = "sysinfo.snapshot" # "" = every host call of the module
//	per_second = 5.0
//	burst = 5
//
//	[vault]
//	key_file = "/etc/lemon/vault.key"  # 0600, 32 bytes (raw or hex); or:
//	key_env = "LEMON_VAULT_KEY"
//
//	[modules.checksum]            # settings for module family "checksum" only (modules.go)
//	algorithm = "sha256"
//	max_files = 100
type Worker struct {
	DefaultCwd      string      `toml:"default_cwd"`
	AllowedRoots    []string    `toml:"allowed_roots"`
	Capabilities    StringSet   `toml:"capabilities"`
	AllowedCommands StringSet   `toml:"allowed_commands"`
	BlockedCommands []string    `toml:"blocked_commands"`
	StateDir        string      `toml:"state_dir"`
	Limits          WorkerLimit `toml:"limits"`
	Pool            WorkerPool  `toml:"pool"`
	RateLimits      []RateLimit `toml:"rate_limits"`
	Vault           VaultKey    `toml:"vault"`
	// Modules holds each module family's settings, delivered to that
	// module only (config.get; modules.go).
	Modules ModuleSettings `toml:"modules"`
}

// StringSet is a list that may also be the string "all". Unset (nil All
// false and Items nil with Set false) means unrestricted; Set with an
// empty Items means nothing is allowed (spec execution-policy:
// allowed_commands = [] allows no commands).
type StringSet struct {
	Set   bool
	All   bool
	Items []string
}

// UnmarshalTOML accepts "all", or an array of strings. "all" has one
// meaning everywhere (docs/POLICY.md, "Node layers"): the string "all" and
// the list ["all"] both mean every name; "all" together with names is an
// error, as is an empty name.
func (s *StringSet) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case string:
		if x != "all" {
			return fmt.Errorf(`must be "all" or a list of strings`)
		}
		*s = StringSet{Set: true, All: true}
	case []any:
		items := make([]string, 0, len(x))
		for _, e := range x {
			str, ok := e.(string)
			if !ok || str == "" {
				return fmt.Errorf("must be a list of non-empty strings")
			}
			items = append(items, str)
		}
		set, err := ParseStringSet(items)
		if err != nil {
			return err
		}
		*s = set
	default:
		return fmt.Errorf(`must be "all" or a list of strings`)
	}
	return nil
}

// ParseStringSet builds a set from a list: ["all"] is every name, "all"
// among other names is an error, anything else is that list (an empty
// list allows nothing).
func ParseStringSet(items []string) (StringSet, error) {
	for _, i := range items {
		if i == "all" {
			if len(items) != 1 {
				return StringSet{}, fmt.Errorf(`"all" is reserved: give it alone (every name) or list names without it`)
			}
			return StringSet{Set: true, All: true}, nil
		}
	}
	return StringSet{Set: true, Items: append([]string{}, items...)}, nil
}

// Unrestricted reports whether the set allows everything.
func (s StringSet) Unrestricted() bool { return !s.Set || s.All }

// Allows reports whether name is in the set.
func (s StringSet) Allows(name string) bool {
	if s.Unrestricted() {
		return true
	}
	for _, i := range s.Items {
		if i == name {
			return true
		}
	}
	return false
}

// Intersect returns the set allowing what both allow.
func (s StringSet) Intersect(o StringSet) StringSet {
	switch {
	case s.Unrestricted():
		return o
	case o.Unrestricted():
		return s
	}
	out := StringSet{Set: true, Items: []string{}}
	for _, i := range s.Items {
		if o.Allows(i) {
			out.Items = append(out.Items, i)
		}
	}
	return out
}

// WorkerLimit lowers the spec's process limits.
type WorkerLimit struct {
	MaxActiveProcesses  int `toml:"max_active_processes"`
	MaxRetainedReceipts int `toml:"max_retained_receipts"`
	OutputCacheEntries  int `toml:"output_cache_entries"`
}

// WorkerPool sizes module instance pools.
type WorkerPool struct {
	Size              int    `toml:"size"`
	RecycleAfterCalls int    `toml:"recycle_after_calls"`
	MemoryLimitPages  uint32 `toml:"memory_limit_pages"`
}

// RateLimit is one gate token bucket.
type RateLimit struct {
	Module    string  `toml:"module"`
	HostCall  string  `toml:"hostcall"`
	PerSecond float64 `toml:"per_second"`
	Burst     int     `toml:"burst"`
}

// VaultKey names where the node's vault master key comes from: exactly
// one of KeyFile and KeyEnv, or neither (no secrets family).
type VaultKey struct {
	KeyFile string `toml:"key_file"`
	KeyEnv  string `toml:"key_env"`
}

// ParseWorker decodes a worker policy strictly and validates it.
func ParseWorker(data []byte) (*Worker, error) {
	var w Worker
	if err := decodeStrict(data, &w); err != nil {
		return nil, err
	}
	return &w, w.Validate()
}

// LoadWorker reads and validates a worker policy file.
func LoadWorker(path string) (*Worker, error) {
	var w Worker
	if err := decodeFile(path, &w); err != nil {
		return nil, err
	}
	if err := w.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &w, nil
}

// Validate checks values: absolute paths, known capabilities, limits
// within the spec's, sane rate limits.
func (w *Worker) Validate() error {
	if w.DefaultCwd != "" && !filepath.IsAbs(w.DefaultCwd) {
		return fmt.Errorf("default_cwd must be an absolute path")
	}
	if w.AllowedRoots != nil && len(w.AllowedRoots) == 0 {
		return fmt.Errorf("allowed_roots, when given, must not be empty")
	}
	if len(w.AllowedRoots) > SpecMaxAllowedRoots {
		return fmt.Errorf("allowed_roots: at most %d roots", SpecMaxAllowedRoots)
	}
	for _, r := range w.AllowedRoots {
		if !filepath.IsAbs(r) {
			return fmt.Errorf("allowed_roots: every root must be an absolute path")
		}
	}
	// Capabilities are open: a module may declare its own names, so any
	// well-formed name is accepted here (docs/POLICY.md, "Capabilities");
	// `lemon policy check` warns about names no module declares.
	if len(w.Capabilities.Items) > hostcalls.MaxCeilingCapabilities {
		return fmt.Errorf("capabilities: at most %d names", hostcalls.MaxCeilingCapabilities)
	}
	for _, c := range w.Capabilities.Items {
		if err := hostcalls.CheckCapability(c); err != nil {
			return fmt.Errorf("capabilities: %w", err)
		}
	}
	// The same entry rules as a tool policy's command lists (docs/POLICY.md,
	// "Commands"): a blocked entry that matches nothing ("rm ", "") would
	// silently block nothing.
	for _, l := range []struct {
		key   string
		items []string
	}{{"allowed_commands", w.AllowedCommands.Items}, {"blocked_commands", w.BlockedCommands}} {
		if len(l.items) > authority.MaxListEntries {
			return fmt.Errorf("%s: at most %d entries", l.key, authority.MaxListEntries)
		}
		for i, c := range l.items {
			if err := authority.CheckCommand(c); err != nil {
				return fmt.Errorf("%s[%d]: %w", l.key, i, err)
			}
		}
	}
	for _, l := range []struct {
		name     string
		v, limit int
	}{
		{"limits.max_active_processes", w.Limits.MaxActiveProcesses, SpecMaxActiveProcesses},
		{"limits.max_retained_receipts", w.Limits.MaxRetainedReceipts, SpecMaxRetainedReceipts},
		{"limits.output_cache_entries", w.Limits.OutputCacheEntries, SpecMaxOutputCache},
	} {
		if l.v < 0 || l.v > l.limit {
			return fmt.Errorf("%s must be between 0 (default) and %d", l.name, l.limit)
		}
	}
	if w.Pool.Size < 0 || w.Pool.Size > 64 || w.Pool.RecycleAfterCalls < 0 || w.Pool.MemoryLimitPages > 65536 {
		return fmt.Errorf("pool: size 0..64, recycle_after_calls >= 0, memory_limit_pages <= 65536")
	}
	for i, r := range w.RateLimits {
		// !(> 0) also refuses NaN, which would pass "<= 0" and make a
		// bucket that never refuses; inf would be a rule that never limits.
		if !(r.PerSecond > 0) || math.IsInf(r.PerSecond, 0) || r.Burst < 1 {
			return fmt.Errorf("rate_limits[%d]: per_second must be a finite number > 0 and burst >= 1", i)
		}
	}
	if w.Vault.KeyFile != "" && w.Vault.KeyEnv != "" {
		return fmt.Errorf("vault: give key_file or key_env, not both")
	}
	return w.Modules.Validate()
}

// CheckRateTargets refuses a rate rule that can match no host call, so a
// misspelt rule is an error rather than a limit that silently never
// applies: its module must be "" or a family in modules, and its hostcall
// "" or a host call that a module the rule matches imports. modules maps
// each module family to the host calls it imports (a module set's
// manifests). The error names the rule by index and quotes the bad name
// (a policy value, not request content).
func (w *Worker) CheckRateTargets(modules map[string][]string) error {
	for i, r := range w.RateLimits {
		if r.Module != "" {
			if _, ok := modules[r.Module]; !ok {
				return fmt.Errorf("rate_limits[%d]: module %q is not a module of the module set (known: %s)",
					i, r.Module, strings.Join(sortedKeys(modules), ", "))
			}
		}
		if r.HostCall == "" {
			continue
		}
		found := false
		for family, calls := range modules {
			if r.Module != "" && family != r.Module {
				continue
			}
			for _, c := range calls {
				found = found || c == r.HostCall
			}
		}
		if !found {
			where := "any module"
			if r.Module != "" {
				where = "module " + strconv.Quote(r.Module)
			}
			return fmt.Errorf("rate_limits[%d]: hostcall %q is not a host call of %s", i, r.HostCall, where)
		}
	}
	return nil
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Ceiling returns the capability ceiling as a sorted list of names, or
// ["all"] (hostcalls.CapAll) when unrestricted: every capability, the
// built-in ones and any a module declares (docs/POLICY.md, "Capabilities").
func (w *Worker) Ceiling() []string {
	if w.Capabilities.Unrestricted() {
		return []string{hostcalls.CapAll}
	}
	out := append([]string(nil), w.Capabilities.Items...)
	sort.Strings(out)
	return out
}

// Restrict combines two layers by restriction only (spec
// execution-policy "Policy intersection"; docs/POLICY.md, "Node layers").
// The result is never wider than a or b in any field:
//
//   - capabilities and allowed_commands intersect ("all" or omitted is
//     every name; [] is none);
//   - blocked_commands and rate_limits accumulate (every block and every
//     bucket applies);
//   - limits and pool values take the lower value, where 0 means unset
//     (no bound from that layer);
//   - allowed_roots intersect by containment: a root of one layer inside
//     a root of the other is kept. Omitted means the home directory (as a
//     node reads it), never "unrestricted", so omitted ∩ ["/srv"] is
//     ["/srv"] only when /srv lies under home. An empty result means no
//     root at all.
//
// Paths that grant nothing (default_cwd, state_dir) and the vault key come
// from the first layer that sets them; module settings merge per family.
// Roots are compared lexically (filepath.Clean): callers that take roots
// from users canonicalize them first (nodeLayers in cmd/lemon does).
func Restrict(a, b *Worker) *Worker {
	out := *a
	out.Capabilities = a.Capabilities.Intersect(b.Capabilities)
	out.AllowedCommands = a.AllowedCommands.Intersect(b.AllowedCommands)
	out.BlockedCommands = union(a.BlockedCommands, b.BlockedCommands)
	out.Limits.MaxActiveProcesses = lower(a.Limits.MaxActiveProcesses, b.Limits.MaxActiveProcesses)
	out.Limits.MaxRetainedReceipts = lower(a.Limits.MaxRetainedReceipts, b.Limits.MaxRetainedReceipts)
	out.Limits.OutputCacheEntries = lower(a.Limits.OutputCacheEntries, b.Limits.OutputCacheEntries)
	out.Pool.Size = lower(a.Pool.Size, b.Pool.Size)
	out.Pool.RecycleAfterCalls = lower(a.Pool.RecycleAfterCalls, b.Pool.RecycleAfterCalls)
	out.Pool.MemoryLimitPages = uint32(lower(int(a.Pool.MemoryLimitPages), int(b.Pool.MemoryLimitPages)))
	out.RateLimits = append(append([]RateLimit(nil), a.RateLimits...), b.RateLimits...)
	if a.AllowedRoots != nil || b.AllowedRoots != nil {
		out.AllowedRoots = IntersectRoots(a.EffectiveRoots(), b.EffectiveRoots())
	}
	if out.DefaultCwd == "" {
		out.DefaultCwd = b.DefaultCwd
	}
	if out.StateDir == "" {
		out.StateDir = b.StateDir
	}
	if out.Vault == (VaultKey{}) {
		out.Vault = b.Vault
	}
	out.Modules = a.Modules.merge(b.Modules)
	return &out
}

// homeDir is the home directory an omitted allowed_roots means; a
// variable so tests can fix it.
var homeDir = os.UserHomeDir

// EffectiveRoots returns the roots w grants: allowed_roots when set, else
// the home directory alone (none if there is no home directory).
func (w *Worker) EffectiveRoots() []string {
	if w.AllowedRoots != nil {
		return w.AllowedRoots
	}
	if h, err := homeDir(); err == nil && filepath.IsAbs(h) {
		return []string{filepath.Clean(h)}
	}
	return []string{}
}

// IntersectRoots returns the directories both root lists grant: each root
// of a that lies inside (or is) a root of b, and each root of b inside a
// root of a; sorted, without duplicates or roots nested in another result
// root. It never returns nil: an empty list grants no root.
func IntersectRoots(a, b []string) []string {
	var cand []string
	for _, r := range a {
		for _, s := range b {
			switch {
			case Within(r, s):
				cand = append(cand, filepath.Clean(r))
			case Within(s, r):
				cand = append(cand, filepath.Clean(s))
			}
		}
	}
	sort.Strings(cand)
	out := []string{}
	for _, c := range cand {
		nested := false
		for _, o := range out {
			if Within(c, o) {
				nested = true
				break
			}
		}
		if !nested {
			out = append(out, c)
		}
	}
	return out
}

// Within reports whether path p is root or lies under it, lexically
// (both absolute; filepath.Clean applied).
func Within(p, root string) bool {
	if !filepath.IsAbs(p) || !filepath.IsAbs(root) {
		return false
	}
	p, root = filepath.Clean(p), filepath.Clean(root)
	if p == root || root == "/" {
		return true
	}
	return strings.HasPrefix(p, root+"/")
}

// RootsWithin reports whether every root of narrow lies inside a root of
// wide.
func RootsWithin(narrow, wide []string) bool {
	for _, r := range narrow {
		ok := false
		for _, w := range wide {
			ok = ok || Within(r, w)
		}
		if !ok {
			return false
		}
	}
	return true
}

// Widens names the keys in which n grants more than w (empty when n is
// within w in every authority field): capabilities, allowed_commands,
// blocked_commands, allowed_roots, each limit and pool value (0 unset),
// rate_limits. `lemon policy check` and the tests use it.
func Widens(n, w *Worker) []string {
	var out []string
	if !setWithin(n.Capabilities, w.Capabilities) {
		out = append(out, "capabilities")
	}
	if !setWithin(n.AllowedCommands, w.AllowedCommands) {
		out = append(out, "allowed_commands")
	}
	for _, b := range w.BlockedCommands {
		if !slices.Contains(n.BlockedCommands, b) {
			out = append(out, "blocked_commands")
			break
		}
	}
	if (n.AllowedRoots != nil || w.AllowedRoots != nil) && !RootsWithin(n.EffectiveRoots(), w.EffectiveRoots()) {
		out = append(out, "allowed_roots")
	}
	for _, l := range []struct {
		key  string
		n, w int
	}{
		{"limits.max_active_processes", n.Limits.MaxActiveProcesses, w.Limits.MaxActiveProcesses},
		{"limits.max_retained_receipts", n.Limits.MaxRetainedReceipts, w.Limits.MaxRetainedReceipts},
		{"limits.output_cache_entries", n.Limits.OutputCacheEntries, w.Limits.OutputCacheEntries},
		{"pool.size", n.Pool.Size, w.Pool.Size},
		{"pool.recycle_after_calls", n.Pool.RecycleAfterCalls, w.Pool.RecycleAfterCalls},
		{"pool.memory_limit_pages", int(n.Pool.MemoryLimitPages), int(w.Pool.MemoryLimitPages)},
	} {
		if l.w != 0 && (l.n == 0 || l.n > l.w) {
			out = append(out, l.key)
		}
	}
	for _, r := range w.RateLimits {
		if !slices.Contains(n.RateLimits, r) {
			out = append(out, "rate_limits")
			break
		}
	}
	return out
}

// setWithin reports whether every name n allows, w allows.
func setWithin(n, w StringSet) bool {
	if w.Unrestricted() {
		return true
	}
	if n.Unrestricted() {
		return false
	}
	for _, i := range n.Items {
		if !w.Allows(i) {
			return false
		}
	}
	return true
}

func lower(a, b int) int {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	case b < a:
		return b
	}
	return a
}

func union(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range append(append([]string(nil), a...), b...) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// String prints the effective policy as TOML-like text, with defaults
// filled in, for `lemon policy check`.
func (w *Worker) String() string {
	var b strings.Builder
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	list := func(items []string) string {
		qs := make([]string, len(items))
		for i, s := range items {
			qs[i] = q(s)
		}
		return "[" + strings.Join(qs, ", ") + "]"
	}
	set := func(s StringSet) string {
		if s.Unrestricted() {
			return `"all"`
		}
		return list(s.Items)
	}
	def := func(v, d int) int {
		if v == 0 {
			return d
		}
		return v
	}
	fmt.Fprintf(&b, "# effective worker policy\n")
	fmt.Fprintf(&b, "default_cwd = %s\n", q(orDefault(w.DefaultCwd, "(current directory)")))
	if w.AllowedRoots == nil {
		fmt.Fprintf(&b, "allowed_roots = [\"(home)\"]\n")
	} else {
		fmt.Fprintf(&b, "allowed_roots = %s\n", list(w.AllowedRoots))
	}
	fmt.Fprintf(&b, "capabilities = %s\n", set(w.Capabilities))
	fmt.Fprintf(&b, "allowed_commands = %s\n", set(w.AllowedCommands))
	fmt.Fprintf(&b, "blocked_commands = %s\n", list(w.BlockedCommands))
	fmt.Fprintf(&b, "state_dir = %s\n", q(orDefault(w.StateDir, "(~/.lemon/nodes/state/NAME)")))
	fmt.Fprintf(&b, "\n[limits]\nmax_active_processes = %d\nmax_retained_receipts = %d\noutput_cache_entries = %d\n",
		def(w.Limits.MaxActiveProcesses, SpecMaxActiveProcesses), def(w.Limits.MaxRetainedReceipts, SpecMaxRetainedReceipts),
		def(w.Limits.OutputCacheEntries, SpecMaxOutputCache))
	fmt.Fprintf(&b, "\n[pool]\nsize = %d\nrecycle_after_calls = %d\nmemory_limit_pages = %d\n",
		def(w.Pool.Size, 4), def(w.Pool.RecycleAfterCalls, 1000), def(int(w.Pool.MemoryLimitPages), 4096))
	for _, r := range w.RateLimits {
		fmt.Fprintf(&b, "\n[[rate_limits]]\nmodule = %s\nhostcall = %s\nper_second = %g\nburst = %d\n", q(r.Module), q(r.HostCall), r.PerSecond, r.Burst)
	}
	if w.Vault.KeyFile != "" {
		fmt.Fprintf(&b, "\n[vault]\nkey_file = %s\n", q(w.Vault.KeyFile))
	} else if w.Vault.KeyEnv != "" {
		fmt.Fprintf(&b, "\n[vault]\nkey_env = %s\n", q(w.Vault.KeyEnv))
	}
	w.Modules.write(&b)
	return b.String()
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
