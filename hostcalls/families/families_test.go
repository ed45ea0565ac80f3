package families

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"lemon/policies"
)

func TestBuildAllFamilies(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "vault.key")
	os.WriteFile(key, []byte(strings.Repeat("ab", 32)), 0o600)
	s, err := Build(Config{DefaultCwd: dir, Roots: []string{dir}, StateDir: filepath.Join(dir, "state"),
		Policy: &policies.Worker{Vault: policies.VaultKey{KeyFile: key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if want := []string{"sysinfo", "fs", "store", "spawn", "vault", "guest"}; !reflect.DeepEqual(s.Families, want) {
		t.Fatalf("families = %v, want %v", s.Families, want)
	}
	names := map[string]bool{}
	for _, table := range s.Tables {
		for _, hc := range table {
			if names[hc.Name] {
				t.Fatalf("host call %s declared twice", hc.Name)
			}
			names[hc.Name] = true
			if hc.Capability == "" || hc.Audit == "" || hc.Func == nil {
				t.Fatalf("host call %s incompletely declared", hc.Name)
			}
		}
	}
}

func TestNoVaultWithoutKey(t *testing.T) {
	dir := t.TempDir()
	s, err := Build(Config{DefaultCwd: dir, Roots: []string{dir}, StateDir: filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, f := range s.Families {
		if f == "vault" {
			t.Fatal("vault built without a master key")
		}
	}
}

// TestBuildTagsRemoveFamilies proves a family built out with its tag is
// gone from the binary: the package no longer depends on its code.
func TestBuildTagsRemoveFamilies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for tag, pkg := range map[string]string{
		"lemon_no_spawn": "lemon/hostcalls/spawn",
		"lemon_no_vault": "lemon/hostcalls/vault",
		"lemon_no_fs":    "lemon/hostcalls/fs",
	} {
		out, err := exec.Command("go", "list", "-tags", tag, "-deps", "lemon/cmd/lemon").CombinedOutput()
		if err != nil {
			t.Fatalf("go list -tags %s: %v\n%s", tag, err, out)
		}
		deps := strings.Fields(string(out))
		for _, d := range deps {
			if d == pkg {
				t.Errorf("-tags %s: the binary still depends on %s", tag, pkg)
			}
		}
		// Without the tag the family is present (the test can fail).
		out, _ = exec.Command("go", "list", "-deps", "lemon/cmd/lemon").CombinedOutput()
		if !strings.Contains(string(out), pkg+"\n") {
			t.Errorf("default build lacks %s", pkg)
		}
	}
}
