package contract_test

import (
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"lemon/hostcalls/contract"
)

// TestStdlibOnly: the contract, and so every module that imports it,
// depends on the standard library only, for wasip1 as for the host. In
// particular it imports no lemon/protocol: no host call's args or result
// can be a spec payload shape (issue 11; docs/HOSTCALLS.md).
func TestStdlibOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, goos := range []string{"", "wasip1"} {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "lemon/hostcalls/contract")
		cmd.Env = os.Environ()
		if goos != "" {
			cmd.Env = append(cmd.Env, "GOOS=wasip1", "GOARCH=wasm")
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list (GOOS=%s): %v\n%s", goos, err, out)
		}
		got := strings.Fields(string(out))
		if want := []string{"lemon/hostcalls/contract"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("GOOS=%q: non-standard dependencies %v, want %v", goos, got, want)
		}
	}
}

// TestSpecs: names are unique, "family.operation", sorted; Lookup finds
// each; args are structs.
func TestSpecs(t *testing.T) {
	specs := contract.Specs()
	for i, s := range specs {
		if i > 0 && specs[i-1].Name >= s.Name {
			t.Fatalf("specs not sorted or duplicated at %s", s.Name)
		}
		if f, op, ok := strings.Cut(s.Name, "."); !ok || f == "" || op == "" {
			t.Fatalf("name %q is not family.operation", s.Name)
		}
		if got, ok := contract.Lookup(s.Name); !ok || got.Args != s.Args || got.Result != s.Result {
			t.Fatalf("Lookup(%s) = %+v, %v", s.Name, got, ok)
		}
		if s.Args.Kind() != reflect.Struct {
			t.Fatalf("%s: args %v is not a struct", s.Name, s.Args)
		}
	}
	if _, ok := contract.Lookup("fs.nope"); ok {
		t.Fatal("Lookup of an unknown name succeeded")
	}
	if contract.FSOpen.Name() != "fs.open" || contract.FSOpen.Spec().Result != reflect.TypeFor[contract.FSOpenResult]() {
		t.Fatal("Call.Name/Spec")
	}
}
