package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

var runIDRE = regexp.MustCompile(`lemon run: processId (run-[0-9a-f]{16}) on node (node-[0-9a-f]+) `)

// TestCLIAgainstDev drives the operator CLI against a real `lemon dev`
// (README.md, "CLI"): lemon run with stdin, decoded output and the remote
// exit code, reconciled with --get; node names in lemon call as in fs and
// run; nodes --json flat; /dev/null is not a terminal for fs rm; SIGINT
// exits 130.
func TestCLIAgainstDev(t *testing.T) {
	d := startDev(t, t.TempDir())
	environ := env(d.op.home, "LEMON_OPERATOR_TOKEN="+d.token)
	lemon := func(in []byte, args ...string) result {
		t.Helper()
		return run(t, d.op.home, environ, in, append([]string{args[0], "--controller", d.url}, args[1:]...)...)
	}

	t.Run("run", func(t *testing.T) {
		// By node name: stdin in, stdout and stderr decoded, exit 3.
		r := lemon([]byte("hello\x00stdin\n"), "run", d.nodeName, "--", "sh", "-c", "cat; printf 'to stderr\\n' >&2; exit 3")
		m := runIDRE.FindStringSubmatch(r.stderr)
		if r.code != 3 || r.stdout != "hello\x00stdin\n" || m == nil || m[2] != d.nodeID ||
			!strings.HasSuffix(r.stderr, "\nto stderr\n") {
			t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		// --get prints the same receipt again and runs nothing.
		g := lemon(nil, "run", d.nodeName, "--get", m[1])
		if g.code != 3 || g.stdout != "hello\x00stdin\n" ||
			!strings.Contains(g.stderr, "to stderr\nlemon run: "+m[1]+" on node "+d.nodeID+": completed, exit code 3\n") {
			t.Fatalf("--get: exit %d, stdout %q, stderr %q", g.code, g.stdout, g.stderr)
		}
		// stdin from /dev/null sends nothing; --id, by nodeId; a signal
		// is 128+N.
		r = lemon(nil, "run", d.nodeID, "--id", "cli-e2e:1", "--", "sh", "-c", "wc -c; kill -TERM $$")
		if r.code != 128+15 || strings.TrimSpace(r.stdout) != "0" || !strings.Contains(r.stderr, "processId cli-e2e:1 on node "+d.nodeID) {
			t.Fatalf("signal: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		// The remote failure to start is the node's error, exit 1, and
		// the argv is not echoed.
		r = lemon(nil, "run", d.nodeName, "--", "no-such-command-cli-e2e")
		if r.code != 1 || !strings.Contains(r.stderr, "executable_not_found") || strings.Contains(r.stderr, "no-such-command-cli-e2e") {
			t.Fatalf("unknown command: exit %d, stderr %q", r.code, r.stderr)
		}
		// --timeout: the node cancels the run; exit 1, and the line says
		// it timed out (the receipt's state is cancelled).
		r = lemon(nil, "run", d.nodeName, "--timeout", "1s", "--", "sleep", "30")
		if r.code != 1 || !regexp.MustCompile(`: timed out after 1s and was (killed|stopped), exit code -?\d+\n`).MatchString(r.stderr) {
			t.Fatalf("timeout: exit %d, stderr %q", r.code, r.stderr)
		}
	})

	t.Run("node names", func(t *testing.T) {
		// lemon call resolves a name in params.nodeId, as fs and run do.
		for _, node := range []string{d.nodeName, d.nodeID} {
			b, _ := json.Marshal(map[string]string{"nodeId": node})
			r := lemon(nil, "call", "node.describe", string(b))
			var info struct {
				NodeID string `json:"nodeId"`
			}
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &info) != nil || info.NodeID != d.nodeID {
				t.Fatalf("call node.describe with %q: exit %d, stdout %q, stderr %q", node, r.code, r.stdout, r.stderr)
			}
		}
		if r := lemon(nil, "fs", "stat", d.nodeName, "."); r.code != 0 {
			t.Fatalf("fs stat by name: exit %d, stderr %q", r.code, r.stderr)
		}
		// An unknown name stays an unknown nodeId: NOT_FOUND.
		if r := lemon(nil, "call", "node.host.info", `{"nodeId":"no-such-node"}`); r.code != 1 || !strings.Contains(r.stderr, `"NOT_FOUND"`) {
			t.Fatalf("unknown name: exit %d, stderr %q", r.code, r.stderr)
		}
	})

	t.Run("nodes json is flat", func(t *testing.T) {
		r := lemon(nil, "nodes", "--json")
		var top map[string]json.RawMessage
		var nodes []struct {
			NodeID, Name string
			Online       bool
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &top) != nil || json.Unmarshal(top["nodes"], &nodes) != nil {
			t.Fatalf("exit %d, stdout %q, stderr %q; want {\"nodes\":[...]}", r.code, r.stdout, r.stderr)
		}
		if len(nodes) != 1 || nodes[0].NodeID != d.nodeID || nodes[0].Name != d.nodeName || !nodes[0].Online {
			t.Fatalf("nodes %+v", nodes)
		}
	})

	t.Run("dev null is not a terminal", func(t *testing.T) {
		victim := filepath.Join(d.cwd, "cli-e2e-victim")
		if err := os.WriteFile(victim, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := lemon(nil, "fs", "rm", d.nodeName, victim)
		if r.code != 1 || strings.Contains(r.stdout+r.stderr, "skipped") || !strings.Contains(r.stderr, "not a terminal") {
			t.Fatalf("fs rm </dev/null: exit %d, stdout %q, stderr %q; want a refusal, exit 1", r.code, r.stdout, r.stderr)
		}
		if _, err := os.Stat(victim); err != nil {
			t.Fatalf("the file is gone after a refused rm: %v", err)
		}
		if r := lemon(nil, "fs", "rm", d.nodeName, victim, "--yes"); r.code != 0 {
			t.Fatalf("fs rm --yes: exit %d, stderr %q", r.code, r.stderr)
		}
		if _, err := os.Stat(victim); !os.IsNotExist(err) {
			t.Fatalf("the file survived rm --yes: %v", err)
		}
	})

	t.Run("sigint exits 130", func(t *testing.T) {
		// lemon call waiting on a run, and lemon run itself: Ctrl-C once
		// the sleep runs on the node exits 130.
		b, _ := json.Marshal(map[string]any{"nodeId": d.nodeName, "processId": "cli-e2e:sigint-call", "cwd": ".",
			"argv": []string{"sleep", "61"}, "stdinBase64": "", "timeoutMs": 600000, "maxOutputBytes": 1024})
		for _, tc := range []struct {
			name string
			args []string
		}{
			{"lemon call", []string{"call", "--controller", d.url, "node.process.run", string(b)}},
			{"lemon run", []string{"run", "--controller", d.url, d.nodeName, "--", "sleep", "62"}},
		} {
			p := start(t, tc.name, d.op.home, environ, tc.args...)
			if !eventually(time.Minute, func() bool {
				for _, pi := range descendants(d.p.cmd.Process.Pid) {
					if pi.comm == "sleep" {
						return true
					}
				}
				return false
			}) {
				t.Fatalf("%s: the sleep never started\n%s", tc.name, p.output())
			}
			if code := p.signal(t, syscall.SIGINT); code != 130 {
				t.Fatalf("%s: exit %d after SIGINT, want 130\n%s", tc.name, code, p.output())
			}
			// The node stops the run once its caller is gone.
			if !eventually(30*time.Second, func() bool {
				for _, pi := range descendants(d.p.cmd.Process.Pid) {
					if pi.comm == "sleep" {
						return false
					}
				}
				return true
			}) {
				t.Fatalf("%s: the sleep outlived its interrupted caller", tc.name)
			}
			if tc.name == "lemon run" {
				m := runIDRE.FindStringSubmatch(p.stderr.String())
				if m == nil || !strings.Contains(p.stderr.String(), "--get "+m[1]) {
					t.Fatalf("lemon run: no processId or --get hint\n%s", p.stderr.String())
				}
				if g := lemon(nil, "run", d.nodeName, "--get", m[1]); g.code != 1 || !strings.Contains(g.stderr, ": cancelled") {
					t.Fatalf("--get after SIGINT: exit %d, stderr %q", g.code, g.stderr)
				}
			}
		}
	})
}
