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
