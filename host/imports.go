package host

import (
	"context"
	"sort"

	"github.com/tetratelabs/wazero"

	"lemon/host/moduleset"
	"lemon/host/terminate"
)

// Imports returns the host calls a module imports from the "lemon" import
// module, sorted, without the ABI's own result_read. It compiles the
// module but runs nothing.
func Imports(ctx context.Context, wasm []byte) ([]string, error) {
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	wasm, err := terminate.Instrument(wasm)
	if err != nil {
		return nil, rejected("compile: %v", err)
	}
	compiled, err := r.CompileModule(ctx, wasm)
	if err != nil {
		return nil, rejected("compile: %v", err)
	}
	seen := map[string]bool{}
	var out []string
	for _, def := range compiled.ImportedFunctions() {
		if mod, name, _ := def.Import(); mod == "lemon" && name != "result_read" && !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// CheckImports compares a module's imports (from Imports) with its
// manifest's HostCalls. Undeclared are imported but not declared: the
// host refuses such a module at load (checkManifest). Unused are declared
// but never imported: the module loads, but its manifest claims more than
// it uses. Both are sorted.
func CheckImports(man Manifest, imports []string) (undeclared, unused []string) {
	declared := map[string]bool{}
	for _, n := range man.HostCalls {
		declared[n] = true
	}
	imported := map[string]bool{}
	for _, n := range imports {
		imported[n] = true
		if !declared[n] {
			undeclared = append(undeclared, n)
		}
	}
	for n := range declared {
		if !imported[n] {
			unused = append(unused, n)
		}
	}
	sort.Strings(undeclared)
	sort.Strings(unused)
	return undeclared, unused
}

// DescribeModule is a moduleset.Describer over Inspect, for writing a set
// manifest (mkset, `lemon plugin build --set`).
func DescribeModule(wasm []byte) (family, version string, methods []moduleset.Method, err error) {
	man, err := Inspect(context.Background(), wasm)
	if err != nil {
		return "", "", nil, err
	}
	return man.Family, man.Version, man.Methods, nil
}
