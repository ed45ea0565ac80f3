package sdkembed

import (
	"bytes"
	"go/parser"
	"go/token"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The embedded SDK is self-contained (every import is stdlib or a lemon
// package it carries) and matches the sources it was copied from: a
// stale copy means plugins/sdk (or a package it imports) changed without
// ./build.sh.
func TestEmbeddedSDKIsSelfContainedAndCurrent(t *testing.T) {
	tree, goVersion, err := Files()
	if err != nil {
		t.Fatalf("%v", err)
	}
	if !strings.HasPrefix(goVersion, "1.") {
		t.Fatalf("go version %q", goVersion)
	}
	repo, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]bool{}
	var files []string
	iofs.WalkDir(tree, ".", func(p string, d iofs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
			pkgs["lemon/"+path.Dir(p)] = true
		}
		return err
	})
	// Every package of plugins/sdk: the SDK and its typed host-call
	// wrappers (the docs tell authors to import them).
	want := []string{"lemon/protocol", "lemon/host/abi"}
	sdkDirs, _ := filepath.Glob(filepath.Join(repo, "plugins", "sdk", "*"))
	want = append(want, "lemon/plugins/sdk")
	for _, d := range sdkDirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			want = append(want, "lemon/plugins/sdk/"+filepath.Base(d))
		}
	}
	for _, want := range want {
		if !pkgs[want] {
			t.Errorf("embedded SDK lacks %s", want)
		}
	}
	fset := token.NewFileSet()
	for _, p := range files {
		b, _ := iofs.ReadFile(tree, p)
		src, err := os.ReadFile(filepath.Join(repo, filepath.FromSlash(p)))
		if err != nil || !bytes.Equal(b, src) {
			t.Errorf("%s differs from the repository's copy (run ./build.sh): %v", p, err)
		}
		f, err := parser.ParseFile(fset, p, b, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			first := strings.SplitN(ip, "/", 2)[0]
			if first == "lemon" && !pkgs[ip] || first != "lemon" && strings.Contains(first, ".") {
				t.Errorf("%s imports %s, which the embedded SDK does not carry", p, ip)
			}
		}
	}
}
