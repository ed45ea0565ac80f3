package policies

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseWorkerStrict(t *testing.T) {
	cases := []struct {
		name, toml, wantErr string
	}{
		{"unknown key named", "default_cwd = \"/srv\"\nbogus_key = 1\n", "bogus_key"},
		{"unknown nested key named", "[limits]\nmax_procs = 3\n", "limits.max_procs"},
		{"wrong type", "default_cwd = 5\n", "default_cwd"},
		{"relative cwd", "default_cwd = \"srv\"\n", "absolute"},
		{"malformed capability", "capabilities = [\"Fly\"]\n", "malformed capability"},
		{"capability with a dot", "capabilities = [\"fs.read\"]\n", "malformed capability"},
		{"all inside a list", "capabilities = [\"all\", \"read\"]\n", "reserved"},
		{"commands not a list", "allowed_commands = 3\n", "allowed_commands"},
		{"commands wrong word", "allowed_commands = \"any\"\n", "allowed_commands"},
		{"empty roots", "allowed_roots = []\n", "must not be empty"},
		{"active at limit+1", "[limits]\nmax_active_processes = 17\n", "max_active_processes"},
		{"retained at limit+1", "[limits]\nmax_retained_receipts = 1001\n", "max_retained_receipts"},
		{"both vault keys", "[vault]\nkey_file = \"/k\"\nkey_env = \"K\"\n", "not both"},
		{"bad rate", "[[rate_limits]]\nper_second = 0.0\nburst = 1\n", "rate_limits[0]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseWorker([]byte(c.toml))
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err = %v, want mention of %q", err, c.wantErr)
			}
		})
	}
}

func TestParseWorkerLimitsAtBoundary(t *testing.T) {
	w, err := ParseWorker([]byte("[limits]\nmax_active_processes = 16\nmax_retained_receipts = 1000\noutput_cache_entries = 16\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w.Limits.MaxActiveProcesses != 16 || w.Limits.MaxRetainedReceipts != 1000 {
		t.Fatalf("limits = %+v", w.Limits)
	}
	roots := make([]string, 64)
	for i := range roots {
		roots[i] = `"/r` + strings.Repeat("x", i) + `"`
	}
	if _, err := ParseWorker([]byte("allowed_roots = [" + strings.Join(roots, ",") + "]\n")); err != nil {
		t.Fatalf("64 roots: %v", err)
	}
	roots = append(roots, `"/one-more"`)
	if _, err := ParseWorker([]byte("allowed_roots = [" + strings.Join(roots, ",") + "]\n")); err == nil {
		t.Fatal("65 roots accepted")
	}
}

func TestAllowedCommandsSemantics(t *testing.T) {
	none, err := ParseWorker([]byte("allowed_commands = []\n"))
	if err != nil {
		t.Fatal(err)
	}
	if none.AllowedCommands.Allows("true") || none.AllowedCommands.Unrestricted() {
		t.Fatal("allowed_commands = [] must allow no commands")
	}
	all, _ := ParseWorker([]byte("allowed_commands = \"all\"\n"))
	omitted, _ := ParseWorker([]byte(""))
	if !all.AllowedCommands.Allows("git") || !omitted.AllowedCommands.Allows("git") {
		t.Fatal(`"all" and omission must be unrestricted`)
	}
	some, _ := ParseWorker([]byte("allowed_commands = [\"git\", \"make\"]\n"))
	if !some.AllowedCommands.Allows("git") || some.AllowedCommands.Allows("rm") {
		t.Fatal("list semantics")
	}
}

func TestRestrictOnlyNarrows(t *testing.T) {
	a, _ := ParseWorker([]byte(`
capabilities = ["hostinfo", "read", "write"]
allowed_commands = ["git", "make"]
blocked_commands = ["rm"]
allowed_roots = ["/a", "/b"]
[limits]
max_active_processes = 8
`))
	b, _ := ParseWorker([]byte(`
capabilities = ["read", "write", "exec"]
allowed_commands = ["make", "curl"]
blocked_commands = ["dd"]
allowed_roots = ["/b", "/c"]
[limits]
max_active_processes = 12
max_retained_receipts = 10
`))
	r := Restrict(a, b)
	if got := r.Ceiling(); !reflect.DeepEqual(got, []string{"read", "write"}) {
		t.Fatalf("capabilities = %v", got)
	}
	if !reflect.DeepEqual(r.AllowedCommands.Items, []string{"make"}) {
		t.Fatalf("allowed_commands = %v", r.AllowedCommands.Items)
	}
	if !reflect.DeepEqual(r.BlockedCommands, []string{"dd", "rm"}) {
		t.Fatalf("blocked_commands = %v", r.BlockedCommands)
	}
	if !reflect.DeepEqual(r.AllowedRoots, []string{"/b"}) {
		t.Fatalf("allowed_roots = %v", r.AllowedRoots)
	}
	if r.Limits.MaxActiveProcesses != 8 || r.Limits.MaxRetainedReceipts != 10 {
		t.Fatalf("limits = %+v", r.Limits)
	}
	// An empty allow list stays empty whatever the other layer says.
	none, _ := ParseWorker([]byte("allowed_commands = []\n"))
	if r2 := Restrict(b, none); r2.AllowedCommands.Allows("make") || r2.AllowedCommands.Unrestricted() {
		t.Fatal("restriction undone by a later layer")
	}
	if r3 := Restrict(none, b); r3.AllowedCommands.Allows("make") {
		t.Fatal("restriction undone by an earlier layer")
	}
}

func TestWorkerStringShowsDefaults(t *testing.T) {
	w, _ := ParseWorker([]byte("capabilities = [\"read\"]\n"))
	s := w.String()
	for _, want := range []string{`capabilities = ["read"]`, "max_active_processes = 16", `allowed_commands = "all"`} {
		if !strings.Contains(s, want) {
			t.Fatalf("effective policy lacks %q:\n%s", want, s)
		}
	}
}

// A rate rule must be able to match: module = "fss" (a typo of "fs") and
// a host call no matching module imports are refused; "" and real names
// pass.
func TestCheckRateTargets(t *testing.T) {
	modules := map[string][]string{
		"fs":      {"fs.read", "fs.write"},
		"process": {"spawn.run", "spawn.result"},
	}
	for _, c := range []struct {
		module, hostcall string
		ok               bool
	}{
		{"", "", true},
		{"fs", "", true},
		{"process", "spawn.run", true},
		{"", "spawn.result", true},
		{"fss", "", false},
		{"FS", "", false},
		{"", "spawn.runn", false},
		{"process", "fs.read", false}, // a real host call, but not the process module's
	} {
		w := &Worker{RateLimits: []RateLimit{{Module: "fs", PerSecond: 1, Burst: 1}, {Module: c.module, HostCall: c.hostcall, PerSecond: 1, Burst: 1}}}
		err := w.CheckRateTargets(modules)
		if (err == nil) != c.ok {
			t.Errorf("module %q hostcall %q: %v, want ok %v", c.module, c.hostcall, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "rate_limits[1]") {
			t.Errorf("module %q hostcall %q: error %q does not name the rule", c.module, c.hostcall, err)
		}
	}
}

// Capabilities are open (docs/POLICY.md, "Capabilities"): a module's own
// name such as "kv" is a valid ceiling entry; names are bounded by
// hostcalls.CapabilityPattern (32 bytes) and a ceiling by 64 names.
func TestWorkerCeilingOpenCapabilities(t *testing.T) {
	w, err := ParseWorker([]byte("capabilities = [\"kv\", \"read\", \"write\"]\n"))
	if err != nil {
		t.Fatalf("kv ceiling: %v", err)
	}
	if got := w.Ceiling(); !reflect.DeepEqual(got, []string{"kv", "read", "write"}) {
		t.Fatalf("ceiling = %v", got)
	}
	name32 := "k" + strings.Repeat("v", 31)
	if _, err := ParseWorker([]byte("capabilities = [\"" + name32 + "\"]\n")); err != nil {
		t.Fatalf("32-byte name: %v", err)
	}
	if _, err := ParseWorker([]byte("capabilities = [\"" + name32 + "v\"]\n")); err == nil || !strings.Contains(err.Error(), "malformed capability") {
		t.Fatalf("33-byte name: err = %v", err)
	}
	names := make([]string, 64)
	for i := range names {
		names[i] = `"c` + strings.Repeat("x", i%30) + string(rune('a'+i/30)) + `"`
	}
	if _, err := ParseWorker([]byte("capabilities = [" + strings.Join(names, ",") + "]\n")); err != nil {
		t.Fatalf("64 names: %v", err)
	}
	names = append(names, `"onemore"`)
	if _, err := ParseWorker([]byte("capabilities = [" + strings.Join(names, ",") + "]\n")); err == nil || !strings.Contains(err.Error(), "at most 64") {
		t.Fatalf("65 names: err = %v", err)
	}
	all, _ := ParseWorker(nil)
	if got := all.Ceiling(); !reflect.DeepEqual(got, []string{"all"}) {
		t.Fatalf("unrestricted ceiling = %v", got)
	}
}
