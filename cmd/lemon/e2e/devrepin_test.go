package e2e

import (
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A team's module added to the set that a running `lemon dev
// --module-set DIR` pins is served after SIGHUP, with no restart: the
// scaffold's node.NAME.echo then answers through the controller, directly
// and through node.invoke, its schema is enforced by the controller, and
// the process keeps running.
func TestDevRepinsOnSIGHUP(t *testing.T) {
	base, step := offlineAuthor(t)
	set := filepath.Join(base, "set")
	step("modules", "export", set)
	d := startDev(t, base, "--module-set", set)
	if r := d.op.call(t, "node.hello.echo", map[string]any{"nodeId": d.nodeID, "message": "x"}); r.code == 0 {
		t.Fatalf("node.hello.echo answered before its module was pinned: %s", r.stdout)
	}

	step("plugin", "new", "hello")
	step("plugin", "build", "hello", "--set", set)
	if err := d.p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.p.waitFor(t, regexp.MustCompile(`lemon dev: SIGHUP: re-pinned module set [0-9a-f]{64}`), 30*time.Second)

	// The node switches (fetch, drain, reconnect); poll until it serves.
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := d.op.call(t, "node.hello.echo", map[string]any{"nodeId": d.nodeID, "message": "hi there"})
		if r.code == 0 {
			if obj := decodeObject(t, r.stdout); obj["message"] != "hi there" {
				t.Fatalf("node.hello.echo: %s", r.stdout)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node.hello.echo never served after SIGHUP: %s %s", r.stdout, r.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	inv := d.op.must(t, "node.invoke", map[string]any{"nodeId": d.nodeID, "method": "node.hello.echo",
		"args": map[string]any{"message": "through invoke"}})
	if inv["message"] != "through invoke" {
		t.Fatalf("node.invoke: %v", inv)
	}
	e := d.op.callError(t, "node.hello.echo", map[string]any{"nodeId": d.nodeID, "message": strings.Repeat("m", 1025)})
	if e.Code != "INVALID_PARAMS" || e.detail("field") != "message" {
		t.Fatalf("a 1025-byte message: %+v, want INVALID_PARAMS naming message", e)
	}
	if d.p.exited() {
		t.Fatalf("lemon dev exited: %s", d.p.output())
	}
}
