package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"lemon/protocol"
)

// TestProcessThroughController is issue 4's "Must show" with the real
// binaries: `lemon controller` plus `lemon node join` (interim node token
// from the controller policy) as separate processes.
func TestProcessThroughController(t *testing.T) {
	c := startCluster(t, "worker-1")
	m := c.newMachine("worker-1", "")
	node, nodeID := c.join(m)
	nodes := []*proc{node}

	runParams := func(id string, argv []string, stdin []byte) map[string]any {
		return map[string]any{"nodeId": nodeID, "processId": id, "cwd": ".", "argv": argv,
			"stdinBase64": base64.StdEncoding.EncodeToString(stdin), "timeoutMs": 30000, "maxOutputBytes": 1048576}
	}

	// The spec's example, exactly.
	echo := map[string]any{"nodeId": nodeID, "processId": "probe:fixed-1", "cwd": ".",
		"argv":        []string{"python3", "-c", `import sys; data=sys.stdin.buffer.read(); sys.stdout.buffer.write(data); sys.stderr.write('diagnostic\n')`},
		"stdinBase64": "SGVsbG8K", "timeoutMs": 30000, "maxOutputBytes": 1048576}
	wantExactly(t, "the spec's echo example", c.op.must(t, "node.process.run", echo),
		`{"processId":"probe:fixed-1","nodeId":"`+nodeID+`","state":"completed","exitCode":0,"stdoutBase64":"SGVsbG8K","stderrBase64":"ZGlhZ25vc3RpYwo=","outputTruncated":false}`)

	// Canaries: one in argv, one in stdin, and one the program makes up
	// (it prints the reverse of its second argument), so the output holds
	// a canary that no request carried.
	canaries := map[string]string{
		"argv canary":   "ARGV-" + randHex(12),
		"stdin canary":  "STDIN-" + randHex(12),
		"output canary": "OUT-" + randHex(12),
	}
	script := `import sys; d=sys.stdin.buffer.read(); sys.stdout.buffer.write(d + sys.argv[1].encode() + sys.argv[2][::-1].encode()); sys.stderr.write(sys.argv[1])`
	canaryRun := runParams("canary:1", []string{"python3", "-c", script, canaries["argv canary"], reverse(canaries["output canary"])},
		[]byte(canaries["stdin canary"]))
	got := c.op.must(t, "node.process.run", canaryRun)
	wantStdout := canaries["stdin canary"] + canaries["argv canary"] + canaries["output canary"]
	wantExactly(t, "the canary run", got, fmt.Sprintf(
		`{"processId":"canary:1","nodeId":%q,"state":"completed","exitCode":0,"stdoutBase64":%q,"stderrBase64":%q,"outputTruncated":false}`,
		nodeID, base64.StdEncoding.EncodeToString([]byte(wantStdout)), base64.StdEncoding.EncodeToString([]byte(canaries["argv canary"]))))
	// A failed run carrying the canary in argv: its error must not echo it.
	failed := c.op.call(t, "node.process.run", runParams("canary:2", []string{"no-such-program-" + canaries["argv canary"]}, nil))
	if e := decodeError(t, failed.stderr); failed.code != 1 || e.Code != protocol.CodeNotFound {
		t.Errorf("missing executable: exit %d %+v, want 1 and NOT_FOUND", failed.code, e)
	}
	// The search itself works: the requester's own output holds the
	// canaries in base64.
	gotJSON, _ := json.Marshal(got)
	if found := findCanaries("run output", gotJSON, canaries); len(found) < 3 {
		t.Fatalf("the canary search misses the requester's base64 output: %v", found)
	}

	// SIGKILL mid-run. The command appends "ran PID" to a file before it
	// sleeps, so the file counts executions; it also forks a child that
	// leaves its session (setsid) and writes its pid to a second file.
	marks := filepath.Join(m.home, "marks")
	if err := os.Mkdir(marks, 0o700); err != nil {
		t.Fatal(err)
	}
	countFile := filepath.Join(marks, "runs.txt")
	escapedFile := filepath.Join(marks, "escaped.txt")
	killRun := runParams("kill:1", []string{"python3", "-c", `import os, sys, time
f = open(sys.argv[1], "a"); f.write("ran %d\n" % os.getpid()); f.close()
if os.fork() == 0:
    os.setsid(); g = open(sys.argv[2] + ".tmp", "w"); g.write("%d" % os.getpid()); g.close(); os.rename(sys.argv[2] + ".tmp", sys.argv[2]); time.sleep(120); os._exit(0)
time.sleep(120)`, countFile, escapedFile}, nil)
	killJSON, _ := json.Marshal(killRun)
	caller := start(t, "lemon call node.process.run", c.op.home, env(c.op.home, "LEMON_OPERATOR_TOKEN="+c.opToken),
		"call", "--controller", c.url, "node.process.run", string(killJSON))
	var childPID, escapedPID int
	if !eventually(time.Minute, func() bool {
		lines := readLines(countFile)
		if len(lines) == 1 {
			childPID, _ = strconv.Atoi(strings.TrimPrefix(lines[0], "ran "))
		}
		if b, err := os.ReadFile(escapedFile); err == nil {
			escapedPID, _ = strconv.Atoi(string(b))
		}
		return childPID > 0 && escapedPID > 0
	}) {
		t.Fatalf("the run never started\n%s", node.output())
	}
	child, ok1 := readProc(childPID)
	escaped, ok2 := readProc(escapedPID)
	if !ok1 || !ok2 {
		t.Fatalf("the run's processes vanished before the SIGKILL")
	}
	// Still alive: the same pid with the same start time, not a zombie.
	alive := func(p procInfo) bool {
		now, ok := readProc(p.pid)
		return ok && now.start == p.start && now.state != "Z"
	}
	// Should the restart fail to stop them, stop them when the test ends
	// (never a pid that now names another process).
	t.Cleanup(func() {
		for _, p := range []procInfo{child, escaped} {
			if alive(p) {
				syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
	})
	if code := node.signal(t, syscall.SIGKILL); code != -1 {
		t.Fatalf("node exit %d after SIGKILL", code)
	}
	if !alive(child) || !alive(escaped) {
		t.Fatalf("the run did not outlive the worker's SIGKILL (child %v, escaped %v): nothing to show", alive(child), alive(escaped))
	}
	if code := caller.wait(t); code != 1 {
		t.Errorf("the awaiting lemon call exited %d, want 1\n%s", code, caller.output())
	} else if e := decodeError(t, caller.stderr.String()); e.Code != protocol.CodeUnavailable {
		t.Errorf("the awaiting run got %+v, want UNAVAILABLE", e)
	} else {
		t.Logf("the awaiting run got %s / %v (retrySafe %v, mutationMayHaveApplied %v)",
			e.Code, e.detail("code"), e.detail("retrySafe"), e.detail("mutationMayHaveApplied"))
	}
	c.waitOffline(m.name)
	if e := c.op.callError(t, "node.process.get", map[string]any{"nodeId": nodeID, "processId": "kill:1"}); e.Code != protocol.CodeUnavailable || e.detail("code") != protocol.DomainNodeOffline {
		t.Errorf("get while the node is offline: %+v, want UNAVAILABLE/node_offline", e)
	}

	node2, id2 := c.join(m)
	nodes = append(nodes, node2)
	if id2 != nodeID {
		t.Fatalf("the restarted node has ID %s, want %s", id2, nodeID)
	}
	// The restarted worker stopped the interrupted run's processes, the
	// setsid'd one included, before it served (docs/PROCESS.md,
	// "Containment").
	if !eventually(10*time.Second, func() bool { return !alive(child) && !alive(escaped) }) {
		t.Errorf("after the restart: child %d alive %v, setsid'd child %d alive %v", child.pid, alive(child), escaped.pid, alive(escaped))
	}
	unknown := `{"processId":"kill:1","nodeId":"` + nodeID + `","state":"outcome_unknown","exitCode":null,"stdoutBase64":null,"stderrBase64":null,"outputTruncated":true}`
	wantExactly(t, "get after the restart", c.op.must(t, "node.process.get", map[string]any{"nodeId": nodeID, "processId": "kill:1"}), unknown)
	// The same intent again answers the stored receipt and runs nothing.
	wantExactly(t, "run again after the restart", c.op.must(t, "node.process.run", killRun), unknown)
	// Known exit metadata survives the restart; the output does not.
	wantExactly(t, "the echo run after the restart", c.op.must(t, "node.process.get", map[string]any{"nodeId": nodeID, "processId": "probe:fixed-1"}),
		`{"processId":"probe:fixed-1","nodeId":"`+nodeID+`","state":"completed","exitCode":0,"stdoutBase64":null,"stderrBase64":null,"outputTruncated":true}`)
	time.Sleep(500 * time.Millisecond)
	if lines := readLines(countFile); len(lines) != 1 {
		t.Errorf("the command ran %d times, want 1: %q", len(lines), lines)
	}

	// Stop everything, then search every log line and every file the
	// node wrote for the canaries.
	if code := node2.signal(t, syscall.SIGTERM); code != 0 {
		t.Errorf("node exit %d after SIGTERM\n%s", code, node2.output())
	}
	if code := c.ctl.signal(t, syscall.SIGTERM); code != 0 {
		t.Errorf("controller exit %d after SIGTERM\n%s", code, c.ctl.output())
	}
	var leaks []leak
	for i, p := range nodes {
		leaks = append(leaks, findCanaries(fmt.Sprintf("node %d output", i+1), []byte(p.output()), canaries)...)
	}
	leaks = append(leaks, findCanaries("controller output", []byte(c.ctl.output()), canaries)...)
	leaks = append(leaks, findCanaries("the failed run's error", []byte(failed.stdout+failed.stderr), canaries)...)
	fileLeaks, files := scanTree(t, m.home, canaries) // state dir, cwd, policy
	leaks = append(leaks, fileLeaks...)
	for _, l := range leaks {
		t.Errorf("%s", l)
	}
	audits := strings.Count(node.stderr.String(), "execution_node.host_io") + strings.Count(node2.stderr.String(), "execution_node.host_io")
	if files == 0 || audits == 0 {
		t.Errorf("searched %d files and %d audit lines: nothing to search", files, audits)
	}
	t.Logf("no canary in %d node log lines (%d audit events), %d controller log lines, %d files under the node home (state directory included)",
		lineCount(node.output())+lineCount(node2.output()), audits, lineCount(c.ctl.output()), files)
}

// waitOffline waits until node.list shows the node offline.
func (c *cluster) waitOffline(name string) {
	c.t.Helper()
	if !eventually(time.Minute, func() bool {
		r := c.op.call(c.t, "node.list", map[string]any{})
		var l struct {
			Nodes []struct {
				Name   string
				Online bool
			}
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &l) != nil {
			return false
		}
		for _, n := range l.Nodes {
			if n.Name == name {
				return !n.Online
			}
		}
		return false
	}) {
		c.t.Fatalf("node %s never went offline", name)
	}
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

func readLines(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func lineCount(s string) int { return strings.Count(s, "\n") }
