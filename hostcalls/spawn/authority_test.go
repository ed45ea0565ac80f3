package spawn

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lemon/hostcalls"
	"lemon/hostcalls/contract"
)

func as(r Request, principal string) Request {
	r.Auth.Principal = principal
	return r
}

// multiCall makes dir/true and dir/sh, two names of one file (a
// multi-call binary such as busybox is one file with many names).
func multiCall(t *testing.T, dir string) (trueName, shName string) {
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Skip("no /bin/sh")
	}
	trueName, shName = filepath.Join(dir, "true"), filepath.Join(dir, "sh")
	for _, n := range []string{trueName, shName} {
		if err := os.Symlink(sh, n); err != nil {
			t.Fatal(err)
		}
	}
	return trueName, shName
}

// TestAdvContextCommands: the execution context's commands narrow the
// worker policy's: a bare entry allows only that bare argv[0]; a path
// entry allows the same file only under the same base name (a multi-call
// binary); its blocked commands block.
func TestAdvContextCommands(t *testing.T) {
	f := newFixture(t, nil)
	mc := t.TempDir()
	trueName, shName := multiCall(t, mc)
	restricted := func(r Request, cmds ...string) Request {
		r.Auth.Restricted, r.Auth.Commands = true, cmds
		return r
	}
	trueBin, ok := f.s.lookPath("true")
	if !ok {
		t.Skip("no true on PATH")
	}
	for _, c := range []struct {
		name string
		r    Request
		ok   bool
	}{
		{"bare allows bare", restricted(req("c1", "true"), "true"), true},
		{"bare refuses a path to the same file", restricted(req("c2", trueBin), "true"), false},
		{"bare refuses another bare name", restricted(req("c3", "echo", "x"), "true"), false},
		{"path allows itself", restricted(req("c4", trueName, "-c", "exit 0"), trueName), true},
		{"path refuses another name of a multi-call file", restricted(req("c5", shName, "-c", "exit 0"), trueName), false},
		{"empty list allows nothing", restricted(req("c6", "true")), false},
		{"all allows", restricted(req("c7", "true"), "all"), true},
		{"blocked by the context", func() Request { r := req("c8", "true"); r.Auth.Blocked = []string{"true"}; return r }(), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.run(c.r)
			if c.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !c.ok && domain(err) != "FORBIDDEN/command_not_allowed" {
				t.Fatalf("err = %v, want command_not_allowed", err)
			}
		})
	}
}

// TestAdvPolicyMultiCallBinary: the worker policy's allowed_commands
// matches a file only under the same base name: ["DIR/true"] does not
// admit DIR/sh when both are one multi-call file.
func TestAdvPolicyMultiCallBinary(t *testing.T) {
	mc := t.TempDir()
	trueName, shName := multiCall(t, mc)
	f := newFixture(t, func(c *Config) { c.AllowedCommands = &[]string{trueName} })
	if _, err := f.run(req("m1", trueName, "-c", "exit 0")); err != nil {
		t.Fatalf("the allowed name: %v", err)
	}
	if _, err := f.run(req("m2", shName, "-c", "exit 0")); domain(err) != "FORBIDDEN/command_not_allowed" {
		t.Fatalf("another name of the same file: %v", err)
	}
}

// TestContextMaxTimeout: timeoutMs may equal max_timeout_ms, not exceed it.
func TestContextMaxTimeout(t *testing.T) {
	f := newFixture(t, nil)
	r := req("t1", "true")
	r.TimeoutMs, r.Auth.MaxTimeoutMs = 5000, 5000
	if _, err := f.run(r); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	r = req("t2", "true")
	r.TimeoutMs, r.Auth.MaxTimeoutMs = 5001, 5000
	if _, err := f.run(r); domain(err) != "FORBIDDEN/limit_exceeded" {
		t.Fatalf("one past: %v", err)
	}
	f.nothingStarted()
}

// TestContextSandbox: a sandboxed run gets no_new_privs and a cgroup of
// its own; a node without cgroups refuses it and runs nothing.
func TestContextSandbox(t *testing.T) {
	t.Run("subreaper refuses", func(t *testing.T) {
		f := newFixture(t, withMode("subreaper", 0))
		r := req("s1", "true")
		r.Auth.Sandbox = true
		if _, err := f.run(r); domain(err) != "FORBIDDEN/sandbox_unavailable" {
			t.Fatalf("err = %v", err)
		}
		f.nothingStarted()
	})
	t.Run("cgroup", func(t *testing.T) {
		needCgroups(t)
		f := newFixture(t, withMode("cgroup", 0))
		r := req("s2", "grep", "NoNewPrivs", "/proc/self/status")
		r.Auth.Sandbox = true
		rc := f.mustRun(r)
		if !strings.Contains(string(rc.Stdout), "NoNewPrivs:\t1") {
			t.Fatalf("sandboxed run: %q", rc.Stdout)
		}
		rc = f.mustRun(req("s3", "grep", "NoNewPrivs", "/proc/self/status"))
		if strings.Contains(string(rc.Stdout), "NoNewPrivs:\t1") && !strings.Contains(selfNoNewPrivs(t), "1") {
			t.Fatalf("no_new_privs leaked to an unsandboxed run: %q", rc.Stdout)
		}
	})
}

func selfNoNewPrivs(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "NoNewPrivs:") {
			return l
		}
	}
	return ""
}

// TestAdvProcessCwdWorkspace: under a workspace the cwd is admitted
// through the workspace resolver alone: a cwd elsewhere under the node's
// root is path_not_allowed.
func TestAdvProcessCwdWorkspace(t *testing.T) {
	var ws string
	f := newFixture(t, func(c *Config) {
		c.Workspace = func(w string) (DirResolver, func(), error) {
			return testDirs{root: w}, func() {}, nil
		}
	})
	ws = filepath.Join(f.root, "ws")
	for _, d := range []string{ws, filepath.Join(f.root, "other")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(f.root, "other"), filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	var fn hostcalls.Func
	for _, hc := range f.s.Table() {
		if hc.Name == "spawn.start" {
			fn = hc.Func
		}
	}
	call := newCall("inv-ws", 0)
	call.inv.Authority = hostcalls.Authority{Principal: "alice", Workspace: ws}
	stdin := call.PutBlob(nil)
	for _, cwd := range []string{filepath.Join(f.root, "other"), f.root, "/", filepath.Join(ws, "link")} {
		args, _ := json.Marshal(contract.SpawnStartArgs{Cwd: cwd, Argv: []string{"true"}, StdinBlob: stdin, TimeoutMs: 30000, MaxOutputBytes: 1024})
		if _, err := fn(context.Background(), call, args); domain(err) != "FORBIDDEN/path_not_allowed" {
			t.Fatalf("cwd %s: %v", cwd, err)
		}
	}
	args, _ := json.Marshal(contract.SpawnStartArgs{Cwd: ws, Argv: []string{"true"}, StdinBlob: stdin, TimeoutMs: 30000, MaxOutputBytes: 1024})
	if _, err := fn(context.Background(), call, args); err != nil {
		t.Fatalf("cwd inside the workspace: %v", err)
	}
}
