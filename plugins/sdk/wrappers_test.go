//go:build !wasip1

package sdk_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"lemon/hostcalls/contract"
)

// contractNames maps each exported contract.Call variable (as the source
// of lemon/hostcalls/contract declares it) to its host-call name, and
// checks that list is exactly contract.Specs().
func contractNames(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	files, _ := filepath.Glob("../../hostcalls/contract/*.go")
	out := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || len(vs.Values) != len(vs.Names) {
				return true
			}
			for i, v := range vs.Values {
				cl, ok := v.(*ast.CompositeLit)
				if !ok || len(cl.Elts) != 1 {
					continue
				}
				idx, ok := cl.Type.(*ast.IndexListExpr)
				if id, isID := idx.X.(*ast.Ident); !ok || !isID || id.Name != "Call" {
					continue
				}
				lit, ok := cl.Elts[0].(*ast.BasicLit)
				if !ok {
					continue
				}
				name, _ := strconv.Unquote(lit.Value)
				out[vs.Names[i].Name] = name
			}
			return true
		})
	}
	var fromSource, fromSpecs []string
	for _, n := range out {
		fromSource = append(fromSource, n)
	}
	for _, s := range contract.Specs() {
		fromSpecs = append(fromSpecs, s.Name)
	}
	sort.Strings(fromSource)
	if strings.Join(fromSource, " ") != strings.Join(fromSpecs, " ") {
		t.Fatalf("contract.Call variables %v, contract.Specs() %v", fromSource, fromSpecs)
	}
	return out
}

// imports returns func name -> wasm import name of file's
// //go:wasmimport lemon declarations, or the declared func names of a
// stub file (import name "").
func imports(t *testing.T, path string) map[string]string {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range file.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		out[fd.Name.Name] = ""
		if fd.Doc != nil {
			for _, c := range fd.Doc.List {
				if rest, ok := strings.CutPrefix(c.Text, "//go:wasmimport lemon "); ok {
					out[fd.Name.Name] = strings.TrimSpace(rest)
				}
			}
		}
	}
	return out
}

// TestWrappersUseTheContract is the guest half of the shared contract
// (the host half is hostcalls/families TestTablesMatchContract): in each
// wrapper package under plugins/sdk, every //go:wasmimport names a
// contract host call, the non-wasip1 stubs declare the same functions,
// every sdk.Invoke(import, contract.X, ...) pairs an import with the
// contract entry of the same name (so the wrapper sends and reads the
// host's types), and every contract host call has a wrapper.
func TestWrappersUseTheContract(t *testing.T) {
	names := contractNames(t)
	wrapped := map[string]bool{}
	dirs, _ := filepath.Glob("*/imports_wasip1.go")
	if len(dirs) < 5 {
		t.Fatalf("found %d wrapper packages, want fs, store, spawn, vault, sysinfo", len(dirs))
	}
	for _, wasm := range dirs {
		dir := filepath.Dir(wasm)
		imp := imports(t, wasm)
		stubs := imports(t, filepath.Join(dir, "imports_other.go"))
		for fn, name := range imp {
			if name == "" {
				t.Errorf("%s: func %s has no //go:wasmimport lemon", wasm, fn)
			}
			if _, ok := contract.Lookup(name); !ok {
				t.Errorf("%s: %s imports %q, which the contract does not declare", wasm, fn, name)
			}
			if _, ok := stubs[fn]; !ok {
				t.Errorf("%s/imports_other.go lacks the stub of %s", dir, fn)
			}
		}
		if len(stubs) != len(imp) {
			t.Errorf("%s: %d stubs for %d imports", dir, len(stubs), len(imp))
		}
		srcs, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, src := range srcs {
			if strings.HasPrefix(filepath.Base(src), "imports_") || strings.HasSuffix(src, "_test.go") {
				continue
			}
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "go:wasmimport") {
				t.Errorf("%s declares an import outside imports_wasip1.go", src)
			}
			file, err := parser.ParseFile(token.NewFileSet(), src, b, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) < 2 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if sel.Sel.Name == "CallRaw" || sel.Sel.Name == "CallBytes" {
					// A wrapper that encodes its args by hand (guest logging,
					// raw blob bytes) is paired by its import, whose name the
					// contract must declare (checked above).
					if fn, _ := call.Args[0].(*ast.Ident); fn != nil && imp[fn.Name] != "" {
						wrapped[imp[fn.Name]] = true
					}
					return true
				}
				if sel.Sel.Name != "Invoke" && sel.Sel.Name != "InvokeJSON" {
					return true
				}
				fn, _ := call.Args[0].(*ast.Ident)
				c, _ := call.Args[1].(*ast.SelectorExpr)
				if fn == nil || c == nil {
					t.Errorf("%s: sdk.Invoke not called as Invoke(import, contract.X, ...)", src)
					return true
				}
				want, got := names[c.Sel.Name], imp[fn.Name]
				if want == "" || want != got {
					t.Errorf("%s: Invoke(%s, contract.%s) pairs import %q with contract call %q", src, fn.Name, c.Sel.Name, got, want)
				}
				// The guest family answers JSON (hostcalls.DefineRaw), every
				// other call the binary layout (docs/ABI.md, "Host-call
				// results"): InvokeJSON for the one, Invoke for the other.
				if guest := strings.HasPrefix(want, "log.") || strings.HasPrefix(want, "blob.") || strings.HasPrefix(want, "config."); guest != (sel.Sel.Name == "InvokeJSON") {
					t.Errorf("%s: %s(%s, contract.%s): the guest family's results are JSON (InvokeJSON), all others binary (Invoke)", src, sel.Sel.Name, fn.Name, c.Sel.Name)
				}
				wrapped[want] = true
				return true
			})
		}
	}
	for _, s := range contract.Specs() {
		if !wrapped[s.Name] {
			t.Errorf("contract host call %s has no typed wrapper under plugins/sdk", s.Name)
		}
	}
}

// TestNoPluginDeclaresImports: first-party plugins reach the host only
// through the wrappers, and keep no mirror of a contract type.
func TestNoPluginDeclaresImports(t *testing.T) {
	mains, _ := filepath.Glob("../*/*.go")
	if len(mains) < 4 {
		t.Fatalf("found %d plugin files", len(mains))
	}
	for _, p := range mains {
		if strings.Contains(p, "/sdk/") || strings.HasSuffix(p, "_test.go") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"go:wasmimport", "sdk.Call(", `json:"payloadBlob"`, `json:"stdoutBlob"`, `json:"valueBlob"`} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s contains %q: use the typed wrappers and contract types", p, bad)
			}
		}
	}
}
