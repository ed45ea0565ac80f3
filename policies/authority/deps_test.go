package authority

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestDependsOnlyOnProtocol keeps the package importable by the
// controller, the node and tools alike: the standard library and
// lemon/protocol only.
func TestDependsOnlyOnProtocol(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), e.Name(), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.Contains(strings.SplitN(p, "/", 2)[0], ".") || (strings.HasPrefix(p, "lemon/") && p != "lemon/protocol") {
				t.Errorf("%s imports %s", e.Name(), p)
			}
		}
	}
}
