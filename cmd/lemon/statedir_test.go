package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lemon/controller"
)

func TestDefaultControllerState(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		euid int
		want string
	}{
		{"systemd", map[string]string{"STATE_DIRECTORY": "/var/lib/lemon-x", "XDG_STATE_HOME": "/x", "HOME": "/h"}, 0, "/var/lib/lemon-x"},
		{"systemd list", map[string]string{"STATE_DIRECTORY": "/var/lib/a:/var/lib/b"}, 1000, "/var/lib/a"},
		{"systemd relative ignored", map[string]string{"STATE_DIRECTORY": "rel", "HOME": "/h"}, 1000, "/h/.local/state/lemon"},
		{"xdg", map[string]string{"XDG_STATE_HOME": "/x/state", "HOME": "/h"}, 0, "/x/state/lemon"},
		{"xdg relative ignored", map[string]string{"XDG_STATE_HOME": "state", "HOME": "/h"}, 1000, "/h/.local/state/lemon"},
		{"root", map[string]string{"HOME": "/root"}, 0, "/var/lib/lemon"},
		{"user", map[string]string{"HOME": "/home/u"}, 1000, "/home/u/.local/state/lemon"},
	}
	for _, tc := range cases {
		got, err := defaultControllerState(func(k string) string { return tc.env[k] }, tc.euid)
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if got, err := defaultControllerState(func(string) string { return "" }, 1000); err == nil {
		t.Fatalf("no HOME: %q, want an error", got)
	}
}

// The controller keeps its state on disk unless --memory is explicit
// (docs/DEPLOY.md, "State directory"). A taken port stops it right after
// the store opened.
func TestControllerDurableByDefault(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	old := geteuid
	geteuid = func() int { return 1000 }
	defer func() { geteuid = old }()

	home := t.TempDir()
	env := func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}
	run := func(args ...string) (int, string) {
		var out strings.Builder
		code := runController(append([]string{"--listen", addr}, args...), env, &out)
		return code, out.String()
	}
	want := filepath.Join(home, ".local", "state", "lemon")
	code, out := run()
	if code != 1 || !strings.Contains(out, "lemon controller: state in "+want+"\n") {
		t.Fatalf("default: exit %d, %q", code, out)
	}
	if _, err := os.Stat(filepath.Join(want, controller.StoreFile)); err != nil {
		t.Fatalf("no durable store in the default directory: %v", err)
	}

	mem := t.TempDir()
	t.Setenv("HOME", mem) // nothing may land here either
	home = mem
	code, out = run("--memory")
	if code != 1 || !strings.Contains(out, "state in memory only (--memory)") {
		t.Fatalf("--memory: exit %d, %q", code, out)
	}
	if entries, _ := os.ReadDir(mem); len(entries) != 0 {
		t.Fatalf("--memory wrote %v", entries)
	}

	code, out = run("--memory", "--state", t.TempDir())
	if code != 2 || !strings.Contains(out, "--memory and --state exclude each other") {
		t.Fatalf("--memory --state: exit %d, %q", code, out)
	}

	// The policy's state_dir wins over the default, --memory over both.
	dir := t.TempDir()
	pol := filepath.Join(dir, "controller.toml")
	polState := filepath.Join(dir, "from-policy")
	if err := os.WriteFile(pol, []byte("state_dir = \""+polState+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out = run("--policy", pol); code != 1 || !strings.Contains(out, "state in "+polState+"\n") {
		t.Fatalf("policy state_dir: exit %d, %q", code, out)
	}
	if code, out = run("--policy", pol, "--memory"); code != 1 || !strings.Contains(out, "state in memory only") {
		t.Fatalf("policy + --memory: exit %d, %q", code, out)
	}
}
