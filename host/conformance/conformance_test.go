package conformance_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"lemon/host/conformance"
	"lemon/host/hosttest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	hosttest.Cleanup()
	os.Exit(code)
}

// TestFirstPartyModules runs every plugin's conformance data against the
// plugin itself, through the real host.
func TestFirstPartyModules(t *testing.T) {
	root := hosttest.RepoRoot()
	dirs, err := filepath.Glob(filepath.Join(root, "plugins", "*", "conformance"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no conformance data found")
	}
	for _, dir := range dirs {
		plugin := filepath.Base(filepath.Dir(dir))
		t.Run(plugin, func(t *testing.T) {
			files, err := conformance.LoadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(files) == 0 {
				t.Fatalf("%s has no cases", dir)
			}
			wasm := hosttest.Build(t, "plugins/"+plugin)
			r := &conformance.Runner{Wasm: wasm, CacheDir: hosttest.CacheDir(t)}
			for _, f := range files {
				for _, res := range r.RunFile(context.Background(), f) {
					t.Run(res.File+"/"+res.Case, func(t *testing.T) {
						if res.Err != nil {
							t.Fatal(res.Err)
						}
					})
				}
			}
		})
	}
}

// TestRunnerCatchesWrongExpectation proves the runner can fail: a case
// whose expectation does not hold is reported.
func TestRunnerCatchesWrongExpectation(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "wrong.json"), []byte(`{"family":"hostinfo","node":{"cwd":"w","roots":["w"]},
	"tree":[{"path":"w","dir":true}],
	"cases":[{"name":"wrong cpu count","method":"node.host.info","params":{"nodeId":"n1"},"expect":{"ok":true,"payload":{"cpuCount":-1}}},
	         {"name":"wrong error","method":"node.host.info","params":{},"expect":{"ok":true}}]}`), 0o644)
	files, err := conformance.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := &conformance.Runner{Wasm: hosttest.Build(t, "plugins/hostinfo"), CacheDir: hosttest.CacheDir(t)}
	res := r.RunFile(context.Background(), files[0])
	if len(res) != 2 || res[0].Err == nil || res[1].Err == nil {
		t.Fatalf("runner accepted wrong expectations: %+v", res)
	}
}
