package policies

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// fixHome makes an omitted allowed_roots mean /home/u for the test.
func fixHome(t *testing.T) {
	t.Helper()
	old := homeDir
	homeDir = func() (string, error) { return "/home/u", nil }
	t.Cleanup(func() { homeDir = old })
}

func mustParse(t *testing.T, src string) *Worker {
	t.Helper()
	w, err := ParseWorker([]byte(src))
	if err != nil {
		t.Fatalf("parse %q: %v", src, err)
	}
	return w
}

// TestRestrictNeverWidens: for each pair of layers, Restrict(a, b) grants
// nothing a or b does not (policies.Widens is empty against both), is the
// same authority whichever layer comes first, and has the value the rule
// of docs/POLICY.md ("Node layers") gives.
func TestRestrictNeverWidens(t *testing.T) {
	fixHome(t)
	cases := []struct {
		name, a, b string
		want       string // a line of Restrict(a, b).String()
	}{
		// capabilities
		{"caps omitted both", ``, ``, `capabilities = "all"`},
		{"caps omitted vs list", ``, `capabilities = ["read"]`, `capabilities = ["read"]`},
		{"caps list vs omitted", `capabilities = ["read"]`, ``, `capabilities = ["read"]`},
		{"caps all vs list", `capabilities = "all"`, `capabilities = ["exec"]`, `capabilities = ["exec"]`},
		{"caps [all] vs list", `capabilities = ["all"]`, `capabilities = ["exec"]`, `capabilities = ["exec"]`},
		{"caps list vs [all]", `capabilities = ["read", "write"]`, `capabilities = ["all"]`, `capabilities = ["read", "write"]`},
		{"caps overlap", `capabilities = ["read", "write"]`, `capabilities = ["write", "exec"]`, `capabilities = ["write"]`},
		{"caps disjoint", `capabilities = ["read"]`, `capabilities = ["exec"]`, `capabilities = []`},
		{"caps empty vs all", `capabilities = []`, `capabilities = "all"`, `capabilities = []`},
		{"caps all vs empty", `capabilities = "all"`, `capabilities = []`, `capabilities = []`},
		{"caps module names", `capabilities = ["kv", "read"]`, `capabilities = ["kv"]`, `capabilities = ["kv"]`},
		// allowed_commands
		{"cmds omitted both", ``, ``, `allowed_commands = "all"`},
		{"cmds omitted vs list", ``, `allowed_commands = ["make"]`, `allowed_commands = ["make"]`},
		{"cmds [all] vs list", `allowed_commands = ["all"]`, `allowed_commands = ["git"]`, `allowed_commands = ["git"]`},
		{"cmds all vs none", `allowed_commands = "all"`, `allowed_commands = []`, `allowed_commands = []`},
		{"cmds none vs omitted", `allowed_commands = []`, ``, `allowed_commands = []`},
		{"cmds overlap", `allowed_commands = ["git", "make"]`, `allowed_commands = ["make", "curl"]`, `allowed_commands = ["make"]`},
		{"cmds bare vs path", `allowed_commands = ["true"]`, `allowed_commands = ["/tmp/x/true"]`, `allowed_commands = []`},
		{"cmds path vs bare", `allowed_commands = ["/usr/bin/make"]`, `allowed_commands = ["make"]`, `allowed_commands = []`},
		{"cmds disjoint", `allowed_commands = ["git"]`, `allowed_commands = ["rm"]`, `allowed_commands = []`},
		// blocked_commands
		{"blocked union", `blocked_commands = ["rm"]`, `blocked_commands = ["dd"]`, `blocked_commands = ["dd", "rm"]`},
		{"blocked one side", ``, `blocked_commands = ["rm"]`, `blocked_commands = ["rm"]`},
		{"blocked other side", `blocked_commands = ["rm"]`, ``, `blocked_commands = ["rm"]`},
		{"blocked duplicate", `blocked_commands = ["rm"]`, `blocked_commands = ["rm"]`, `blocked_commands = ["rm"]`},
		// limits: 0 is unset
		{"active unset both", ``, ``, `max_active_processes = 16`},
		{"active unset vs 8", ``, "[limits]\nmax_active_processes = 8", `max_active_processes = 8`},
		{"active 8 vs unset", "[limits]\nmax_active_processes = 8", ``, `max_active_processes = 8`},
		{"active 8 vs 12", "[limits]\nmax_active_processes = 8", "[limits]\nmax_active_processes = 12", `max_active_processes = 8`},
		{"active 12 vs 8", "[limits]\nmax_active_processes = 12", "[limits]\nmax_active_processes = 8", `max_active_processes = 8`},
		{"active 16 vs 1", "[limits]\nmax_active_processes = 16", "[limits]\nmax_active_processes = 1", `max_active_processes = 1`},
		{"retained 500 vs 10", "[limits]\nmax_retained_receipts = 500", "[limits]\nmax_retained_receipts = 10", `max_retained_receipts = 10`},
		{"retained unset vs 1000", ``, "[limits]\nmax_retained_receipts = 1000", `max_retained_receipts = 1000`},
		{"cache 4 vs unset", "[limits]\noutput_cache_entries = 4", ``, `output_cache_entries = 4`},
		{"cache 4 vs 16", "[limits]\noutput_cache_entries = 4", "[limits]\noutput_cache_entries = 16", `output_cache_entries = 4`},
		// pool: 0 is unset
		{"pool size unset vs 2", ``, "[pool]\nsize = 2", `size = 2`},
		{"pool size 2 vs unset", "[pool]\nsize = 2", ``, `size = 2`},
		{"pool size 8 vs 2", "[pool]\nsize = 8", "[pool]\nsize = 2", `size = 2`},
		{"pool recycle 10 vs 1000", "[pool]\nrecycle_after_calls = 10", "[pool]\nrecycle_after_calls = 1000", `recycle_after_calls = 10`},
		{"pool recycle unset vs 10", ``, "[pool]\nrecycle_after_calls = 10", `recycle_after_calls = 10`},
		{"pool memory 256 vs 4096", "[pool]\nmemory_limit_pages = 256", "[pool]\nmemory_limit_pages = 4096", `memory_limit_pages = 256`},
		{"pool memory unset vs 256", ``, "[pool]\nmemory_limit_pages = 256", `memory_limit_pages = 256`},
		// allowed_roots: containment; omitted is home
		{"roots omitted both", ``, ``, `allowed_roots = ["(home)"]`},
		{"roots omitted vs /srv", ``, `allowed_roots = ["/srv"]`, `allowed_roots = []`},
		{"roots /srv vs omitted", `allowed_roots = ["/srv"]`, ``, `allowed_roots = []`},
		{"roots omitted vs under home", ``, `allowed_roots = ["/home/u/p"]`, `allowed_roots = ["/home/u/p"]`},
		{"roots omitted vs above home", ``, `allowed_roots = ["/home"]`, `allowed_roots = ["/home/u"]`},
		{"roots equal", `allowed_roots = ["/srv"]`, `allowed_roots = ["/srv"]`, `allowed_roots = ["/srv"]`},
		{"roots child", `allowed_roots = ["/srv"]`, `allowed_roots = ["/srv/a"]`, `allowed_roots = ["/srv/a"]`},
		{"roots parent", `allowed_roots = ["/srv/a"]`, `allowed_roots = ["/srv"]`, `allowed_roots = ["/srv/a"]`},
		{"roots disjoint", `allowed_roots = ["/srv"]`, `allowed_roots = ["/mnt"]`, `allowed_roots = []`},
		{"roots prefix is not containment", `allowed_roots = ["/srv"]`, `allowed_roots = ["/srvx"]`, `allowed_roots = []`},
		{"roots dotdot cleaned", `allowed_roots = ["/srv"]`, `allowed_roots = ["/srv/a/../../etc"]`, `allowed_roots = []`},
		{"roots slash vs any", `allowed_roots = ["/"]`, `allowed_roots = ["/srv", "/mnt"]`, `allowed_roots = ["/mnt", "/srv"]`},
		{"roots several", `allowed_roots = ["/a", "/b"]`, `allowed_roots = ["/b/x", "/c"]`, `allowed_roots = ["/b/x"]`},
		{"roots nested result", `allowed_roots = ["/a", "/a/b"]`, `allowed_roots = ["/a"]`, `allowed_roots = ["/a"]`},
		// rate limits accumulate
		{"rates accumulate", "[[rate_limits]]\nper_second = 5.0\nburst = 5", "[[rate_limits]]\nmodule = \"fs\"\nper_second = 1.0\nburst = 1", `module = "fs"`},
		{"rates one side", ``, "[[rate_limits]]\nper_second = 5.0\nburst = 5", `per_second = 5`},
		// paths that grant nothing: the first layer that sets them
		{"cwd first layer", `default_cwd = "/srv"`, `default_cwd = "/mnt"`, `default_cwd = "/srv"`},
		{"cwd second layer", ``, `default_cwd = "/mnt"`, `default_cwd = "/mnt"`},
		{"state first layer", `state_dir = "/var/a"`, `state_dir = "/var/b"`, `state_dir = "/var/a"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := mustParse(t, c.a), mustParse(t, c.b)
			r := Restrict(a, b)
			if w := Widens(r, a); len(w) > 0 {
				t.Errorf("Restrict widens the first layer in %v", w)
			}
			if w := Widens(r, b); len(w) > 0 {
				t.Errorf("Restrict widens the second layer in %v", w)
			}
			rev := Restrict(b, a)
			if w := append(Widens(r, rev), Widens(rev, r)...); len(w) > 0 {
				t.Errorf("order changes the authority in %v", w)
			}
			if s := r.String(); !slices.Contains(strings.Split(s, "\n"), c.want) {
				t.Errorf("effective policy lacks %q:\n%s", c.want, s)
			}
		})
	}
}

// TestStringSetAllOneMeaning: "all" and ["all"] mean every name in every
// list; "all" mixed with names is an error (docs/POLICY.md, "Node layers").
func TestStringSetAllOneMeaning(t *testing.T) {
	for _, src := range []string{`allowed_commands = "all"`, `allowed_commands = ["all"]`, `capabilities = ["all"]`, `capabilities = "all"`} {
		w := mustParse(t, src)
		if !w.AllowedCommands.Unrestricted() || !w.Capabilities.Unrestricted() {
			t.Errorf("%s: not unrestricted", src)
		}
	}
	for _, src := range []string{`allowed_commands = ["all", "git"]`, `capabilities = ["read", "all"]`} {
		if _, err := ParseWorker([]byte(src)); err == nil || !strings.Contains(err.Error(), `"all" is reserved`) {
			t.Errorf("%s: err = %v", src, err)
		}
	}
}

// randomWorker draws a layer from small universes so that pairs overlap.
func randomWorker(r *rand.Rand) *Worker {
	names := func(universe []string) StringSet {
		switch r.IntN(5) {
		case 0:
			return StringSet{}
		case 1:
			return StringSet{Set: true, All: true}
		}
		s := StringSet{Set: true, Items: []string{}}
		for _, n := range universe {
			if r.IntN(2) == 0 {
				s.Items = append(s.Items, n)
			}
		}
		return s
	}
	pick := func(universe []string) []string {
		var out []string
		for _, n := range universe {
			if r.IntN(3) == 0 {
				out = append(out, n)
			}
		}
		return out
	}
	w := &Worker{
		Capabilities:    names([]string{"hostinfo", "read", "write", "exec", "secrets", "kv"}),
		AllowedCommands: names([]string{"git", "make", "/usr/bin/make", "true", "sh"}),
		BlockedCommands: pick([]string{"rm", "dd", "sh"}),
	}
	if r.IntN(4) != 0 {
		w.AllowedRoots = append([]string{}, pick([]string{"/", "/srv", "/srv/a", "/srv/a/b", "/srvx", "/home", "/home/u", "/home/u/p", "/mnt"})...)
		if len(w.AllowedRoots) == 0 {
			w.AllowedRoots = []string{"/srv"}
		}
	}
	lim := func(max int) int { return r.IntN(max + 1) } // 0 = unset
	w.Limits = WorkerLimit{lim(16), lim(1000), lim(16)}
	w.Pool = WorkerPool{Size: lim(64), RecycleAfterCalls: lim(2000), MemoryLimitPages: uint32(lim(65536))}
	for range r.IntN(3) {
		module := []string{"", "fs"}[r.IntN(2)]
		w.RateLimits = append(w.RateLimits, RateLimit{Module: module, PerSecond: float64(1 + r.IntN(5)), Burst: 1 + r.IntN(5)})
	}
	return w
}

// TestRestrictRandomNeverWidens: for 5,000 random pairs, Restrict(a, b)
// is within a and b, and it is the widest such layer: a random c within
// both is within Restrict(a, b).
func TestRestrictRandomNeverWidens(t *testing.T) {
	fixHome(t)
	r := rand.New(rand.NewPCG(12, 13))
	for i := range 5000 {
		a, b, c := randomWorker(r), randomWorker(r), randomWorker(r)
		got := Restrict(a, b)
		if w := append(Widens(got, a), Widens(got, b)...); len(w) > 0 {
			t.Fatalf("pair %d widens %v\na = %+v\nb = %+v\ngot = %+v", i, w, a, b, got)
		}
		if len(Widens(c, a)) == 0 && len(Widens(c, b)) == 0 {
			if w := Widens(c, got); len(w) > 0 {
				t.Fatalf("pair %d: a layer within both is not within the restriction (%v)\na = %+v\nb = %+v\nc = %+v\ngot = %+v", i, w, a, b, c, got)
			}
		}
		if !reflect.DeepEqual(Widens(Restrict(a, a), a), []string(nil)) {
			t.Fatalf("pair %d: a ∩ a widens a", i)
		}
	}
}
