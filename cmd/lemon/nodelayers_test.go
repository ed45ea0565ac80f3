package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"lemon/policies"
)

func noEnv(string) string { return "" }

func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

// layerFixture is a home, two directories outside it, a symlink under
// a root that leads outside, and a policy file writer.
type layerFixture struct {
	home, srv, mnt, escape string
	t                      *testing.T
}

func newLayerFixture(t *testing.T) *layerFixture {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &layerFixture{t: t, home: filepath.Join(base, "home"), srv: filepath.Join(base, "srv"), mnt: filepath.Join(base, "mnt")}
	for _, d := range []string{f.home, filepath.Join(f.home, "work"), f.srv, filepath.Join(f.srv, "a"), f.mnt} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	f.escape = filepath.Join(f.srv, "escape")
	if err := os.Symlink(f.mnt, f.escape); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", f.home)
	return f
}

func (f *layerFixture) policy(src string) string {
	p := filepath.Join(f.t.TempDir(), "worker.toml")
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// TestNodeLayersOnlyNarrow: the node's policy is the file ∩ the flags ∩
// LEMON_NODE_CAPABILITIES (docs/POLICY.md, "Node layers"). Every
// effective policy is within the file; a widening layer is an error that
// names the layer and the file key.
func TestNodeLayersOnlyNarrow(t *testing.T) {
	f := newLayerFixture(t)
	work := filepath.Join(f.home, "work")
	srvFile := f.policy(`allowed_roots = ["` + f.srv + `"]` + "\ncapabilities = [\"read\", \"write\"]\n")
	omitted := f.policy("capabilities = [\"read\"]\n")
	ok := []struct {
		name      string
		o         nodeOptions
		env       map[string]string
		wantRoots []string
		wantCwd   string
		wantCaps  string
	}{
		{"cli only: home", nodeOptions{cwd: work}, nil, []string{f.home}, work, "all"},
		{"cli only: home plus roots", nodeOptions{cwd: work, roots: stringList{f.srv, f.mnt}}, nil, []string{f.home, f.srv, f.mnt}, work, "all"},
		{"cli only: flag caps", nodeOptions{cwd: work, capabilities: "read,exec"}, nil, []string{f.home}, work, "exec,read"},
		{"cli only: env caps", nodeOptions{cwd: work}, map[string]string{envNodeCapabilities: "hostinfo"}, []string{f.home}, work, "hostinfo"},
		{"cli only: flag ∩ env", nodeOptions{cwd: work, capabilities: "read,exec"}, map[string]string{envNodeCapabilities: "read,hostinfo"}, []string{f.home}, work, "read"},
		{"file roots", nodeOptions{policy: srvFile, cwd: f.srv}, nil, []string{f.srv}, f.srv, "read,write"},
		{"file roots narrowed by a flag", nodeOptions{policy: srvFile, cwd: filepath.Join(f.srv, "a"), roots: stringList{filepath.Join(f.srv, "a")}}, nil, []string{filepath.Join(f.srv, "a")}, filepath.Join(f.srv, "a"), "read,write"},
		{"file caps narrowed by flag", nodeOptions{policy: srvFile, cwd: f.srv, capabilities: "read"}, nil, []string{f.srv}, f.srv, "read"},
		{"file caps narrowed by env", nodeOptions{policy: srvFile, cwd: f.srv}, map[string]string{envNodeCapabilities: "write"}, []string{f.srv}, f.srv, "write"},
		{"file caps, flag all", nodeOptions{policy: srvFile, cwd: f.srv, capabilities: "all"}, nil, []string{f.srv}, f.srv, "read,write"},
		{"omitted roots: home", nodeOptions{policy: omitted, cwd: work}, nil, []string{f.home}, work, "read"},
		{"omitted roots narrowed inside home", nodeOptions{policy: omitted, cwd: work, roots: stringList{work}}, nil, []string{work}, work, "read"},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			pol, cwd, roots, err := nodeLayers(&c.o, envOf(c.env), false)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(roots, c.wantRoots) || !reflect.DeepEqual(pol.AllowedRoots, c.wantRoots) {
				t.Errorf("roots = %v (policy %v), want %v", roots, pol.AllowedRoots, c.wantRoots)
			}
			if cwd != c.wantCwd {
				t.Errorf("cwd = %s, want %s", cwd, c.wantCwd)
			}
			if got := strings.Join(pol.Ceiling(), ","); got != c.wantCaps {
				t.Errorf("ceiling = %s, want %s", got, c.wantCaps)
			}
			if c.o.policy != "" {
				file, _ := policies.LoadWorker(c.o.policy)
				if w := policies.Widens(pol, file); len(w) > 0 {
					t.Errorf("effective policy widens the file in %v", w)
				}
			}
		})
	}
	bad := []struct {
		name string
		o    nodeOptions
		env  map[string]string
		want []string
	}{
		{"root outside the file's roots", nodeOptions{policy: srvFile, cwd: f.srv, roots: stringList{f.mnt}}, nil,
			[]string{"--allowed-root " + f.mnt, "allowed_roots", srvFile}},
		{"root through a symlink leading outside", nodeOptions{policy: srvFile, cwd: f.srv, roots: stringList{f.escape}}, nil,
			[]string{"--allowed-root " + f.mnt, "allowed_roots"}},
		{"root outside home when the file omits roots", nodeOptions{policy: omitted, cwd: work, roots: stringList{f.srv}}, nil,
			[]string{"--allowed-root " + f.srv, "allowed_roots", "home directory"}},
		{"flag capability outside the file", nodeOptions{policy: srvFile, cwd: f.srv, capabilities: "read,exec"}, nil,
			[]string{"--capabilities", `"exec"`, "capabilities"}},
		{"env capability outside the file", nodeOptions{policy: srvFile, cwd: f.srv}, map[string]string{envNodeCapabilities: "secrets"},
			[]string{envNodeCapabilities, `"secrets"`, "capabilities"}},
		{"all mixed with names", nodeOptions{cwd: work, capabilities: "all,read"}, nil, []string{"--capabilities", `"all" is reserved`}},
		{"env malformed", nodeOptions{cwd: work}, map[string]string{envNodeCapabilities: "Read"}, []string{envNodeCapabilities, "malformed capability"}},
		{"cwd outside the roots", nodeOptions{policy: srvFile, cwd: f.mnt}, nil, []string{"--cwd " + f.mnt, "outside the effective allowed roots"}},
		{"cwd outside a narrowed root", nodeOptions{policy: srvFile, cwd: f.srv, roots: stringList{filepath.Join(f.srv, "a")}}, nil, []string{"--cwd", "outside"}},
		{"cli cwd outside home", nodeOptions{cwd: f.mnt}, nil, []string{"--cwd " + f.mnt, "outside"}},
		{"default_cwd outside the roots", nodeOptions{policy: f.policy(`allowed_roots = ["` + f.srv + `"]` + "\ndefault_cwd = \"" + f.mnt + "\"\n")}, nil,
			[]string{"default_cwd " + f.mnt, "outside"}},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := nodeLayers(&c.o, envOf(c.env), false)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// An implicit cwd (the current directory) outside the roots falls back
// to the first root; lemon dev without a file makes its cwd a root.
func TestNodeLayersImplicitCwd(t *testing.T) {
	f := newLayerFixture(t)
	t.Chdir(f.mnt)
	_, cwd, roots, err := nodeLayers(&nodeOptions{}, noEnv, false)
	if err != nil || cwd != f.home || !reflect.DeepEqual(roots, []string{f.home}) {
		t.Fatalf("node: cwd %s roots %v err %v", cwd, roots, err)
	}
	_, cwd, roots, err = nodeLayers(&nodeOptions{}, noEnv, true)
	if err != nil || cwd != f.mnt || !reflect.DeepEqual(roots, []string{f.home, f.mnt}) {
		t.Fatalf("dev: cwd %s roots %v err %v", cwd, roots, err)
	}
	file := f.policy(`allowed_roots = ["` + f.srv + `"]` + "\n")
	_, cwd, roots, err = nodeLayers(&nodeOptions{policy: file}, noEnv, true)
	if err != nil || cwd != f.srv || !reflect.DeepEqual(roots, []string{f.srv}) {
		t.Fatalf("dev with a file: cwd %s roots %v err %v", cwd, roots, err)
	}
}
