package families

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"lemon/host/abi/wire"
	"lemon/hostcalls"
	"lemon/hostcalls/contract"
	"lemon/policies"
)

// TestTablesMatchContract: every host call a node offers is defined from
// its lemon/hostcalls/contract entry (the same name, args and result
// types the guest SDK wrappers use), and every contract entry is offered
// by a table. Runs with every family compiled in (the default build).
func TestTablesMatchContract(t *testing.T) {
	if n := len(DocTables()); n != 6 {
		t.Skipf("%d of 6 host-call families compiled in (build tags)", n)
	}
	specs := map[string]contract.Spec{}
	for _, s := range contract.Specs() {
		if _, dup := specs[s.Name]; dup {
			t.Fatalf("contract declares %s twice", s.Name)
		}
		if s.Args == nil || s.Args.Kind() != reflect.Struct || s.Result == nil || s.Doc == "" {
			t.Fatalf("contract entry %s is incomplete: args %v, result %v, doc %q", s.Name, s.Args, s.Result, s.Doc)
		}
		specs[s.Name] = s
	}
	seen := map[string]bool{}
	for _, table := range DocTables() {
		for _, hc := range table {
			s, ok := specs[hc.Name]
			if !ok {
				t.Errorf("table entry %s has no contract entry (add it to lemon/hostcalls/contract)", hc.Name)
				continue
			}
			if hc.Spec.Name != hc.Name {
				t.Errorf("table entry %s is not built with hostcalls.Define from its contract entry (Spec.Name %q)", hc.Name, hc.Spec.Name)
			}
			if hc.Spec.Args != s.Args || hc.Spec.Result != s.Result {
				t.Errorf("%s: table types (%v -> %v) differ from the contract's (%v -> %v)", hc.Name, hc.Spec.Args, hc.Spec.Result, s.Args, s.Result)
			}
			if want := hostcalls.JSONFields(s.Args); !reflect.DeepEqual(hc.Params, want) {
				t.Errorf("%s: Params %v, contract args fields %v", hc.Name, hc.Params, want)
			}
			if len(hc.Errors) == 0 || hc.Errors[0] != hostcalls.ErrInvalidArgs {
				t.Errorf("%s: declared errors do not start with ErrInvalidArgs: %v", hc.Name, hc.Errors)
			}
			for _, e := range hc.Errors {
				if e.Code == "" || e.When == "" {
					t.Errorf("%s: incomplete error declaration %+v", hc.Name, e)
				}
			}
			if prefix, _, _ := strings.Cut(hc.Name, "."); prefix == "" {
				t.Errorf("%s: name is not family.operation", hc.Name)
			}
			seen[hc.Name] = true
		}
	}
	for name := range specs {
		if !seen[name] {
			t.Errorf("contract entry %s is offered by no table", name)
		}
	}
}

// TestDocTablesAreBuiltTables: the declarations DocTables reports are the
// ones a built node registers (same names, capabilities, audit classes and
// contract types, in the same order).
func TestDocTablesAreBuiltTables(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "vault.key")
	os.WriteFile(key, []byte(strings.Repeat("ab", 32)), 0o600)
	s, err := Build(Config{DefaultCwd: dir, Roots: []string{dir}, StateDir: filepath.Join(dir, "state"),
		Policy: &policies.Worker{Vault: policies.VaultKey{KeyFile: key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	type decl struct {
		Name, Capability string
		Audit            hostcalls.AuditClass
		Args, Result     reflect.Type
		Errors           int
	}
	flat := func(ts []hostcalls.Table) (out []decl) {
		for _, table := range ts {
			for _, hc := range table {
				out = append(out, decl{hc.Name, hc.Capability, hc.Audit, hc.Spec.Args, hc.Spec.Result, len(hc.Errors)})
			}
		}
		return out
	}
	built, doc := flat(s.Tables), flat(DocTables())
	if len(built) == 0 || !reflect.DeepEqual(built, doc) {
		t.Fatalf("built tables %v\ndoc tables %v", built, doc)
	}
}

// TestResultFormats: every table entry built with hostcalls.Define
// answers in the binary layout (docs/ABI.md, "Host-call results"), so its
// contract result type has one; the entries that answer otherwise
// (DefineRaw: JSON or raw bytes, read by the SDK with sdk.InvokeJSON or
// sdk.CallBytes) are exactly these.
func TestResultFormats(t *testing.T) {
	if n := len(DocTables()); n != 6 {
		t.Skipf("%d of 6 host-call families compiled in (build tags)", n)
	}
	raw := map[string]bool{"log.write": true, "blob.read": true, "blob.sha256": true, "blob.hash_update": true,
		"blob.hash_sum": true, "blob.free": true, "config.get": true, "fs.readdir": true, "fs.statat": true}
	for _, table := range DocTables() {
		for _, hc := range table {
			if (hc.ResultJSON == nil) != raw[hc.Name] {
				t.Errorf("%s: binary result %v, want %v", hc.Name, hc.ResultJSON != nil, !raw[hc.Name])
			}
			if hc.ResultJSON != nil {
				if err := wire.CheckBinary(hc.Spec.Result); err != nil {
					t.Errorf("%s: %v", hc.Name, err)
				}
			}
		}
	}
}
