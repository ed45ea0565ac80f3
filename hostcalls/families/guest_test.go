package families

import (
	"context"
	"testing"

	"lemon/hostcalls"
	"lemon/policies"
)

type moduleCall struct{ module string }

func (c moduleCall) Module() string                    { return c.module }
func (c moduleCall) Method() string                    { return "m" }
func (c moduleCall) Invocation() hostcalls.Invocation  { return hostcalls.Invocation{} }
func (c moduleCall) Blob(uint32) ([]byte, bool)        { return nil, false }
func (c moduleCall) PutBlob([]byte) uint32             { return 0 }
func (c moduleCall) Await(done <-chan struct{}) uint32 { return 0 }

// TestGuestFamilyCarriesPolicySettings: the node's worker policy
// [modules.<family>] tables reach config.get, each for its own family.
func TestGuestFamilyCarriesPolicySettings(t *testing.T) {
	dir := t.TempDir()
	pol, err := policies.ParseWorker([]byte("[modules.kv]\nnamespace = \"team-a\"\n[modules.checksum]\nalgo = \"sha256\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Build(Config{DefaultCwd: dir, Roots: []string{dir}, StateDir: dir, Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var get hostcalls.Func
	for _, table := range s.Tables {
		for _, hc := range table {
			if hc.Name == "config.get" {
				get = hc.Func
			}
		}
	}
	if get == nil {
		t.Fatal("no config.get host call")
	}
	for module, want := range map[string]string{
		"kv": `{"settings":{"namespace":"team-a"}}`, "checksum": `{"settings":{"algo":"sha256"}}`, "fs": `{"settings":{}}`,
	} {
		b, err := get(context.Background(), moduleCall{module}, []byte(`{}`))
		if err != nil || string(b) != want {
			t.Errorf("%s: %s %v, want %s", module, b, err, want)
		}
	}
}

// The worker hands the process module its receipt limits from [limits]
// (0: the spec's maximum), replacing [modules.process] values of the same
// keys and keeping its others; other families' tables are untouched.
func TestModuleSettingsCarryReceiptLimits(t *testing.T) {
	mods := map[string]map[string]any{
		"process":  {"max_retained_receipts": 5000, "other": "x"},
		"checksum": {"algorithm": "sha256"},
	}
	got := moduleSettings(mods, policies.WorkerLimit{MaxRetainedReceipts: 3})
	p := got["process"]
	if p["max_retained_receipts"] != 3 || p["output_cache_entries"] != policies.SpecMaxOutputCache || p["other"] != "x" {
		t.Fatalf("process settings %v", p)
	}
	if got["checksum"]["algorithm"] != "sha256" || len(got["checksum"]) != 1 {
		t.Fatalf("checksum settings %v", got["checksum"])
	}
	if mods["process"]["max_retained_receipts"] != 5000 {
		t.Fatal("the policy's own table was changed")
	}
	if p := moduleSettings(nil, policies.WorkerLimit{})["process"]; p["max_retained_receipts"] != policies.SpecMaxRetainedReceipts {
		t.Fatalf("defaults %v", p)
	}
}
