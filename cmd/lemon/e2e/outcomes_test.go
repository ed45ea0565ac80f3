package e2e

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lemon/protocol"
)

// TestOutcomesNegotiatedPayload is issue 9 item 3a with the real binaries:
// a controller policy with max_payload = 65536 and a default node (which
// advertises 1 MiB). The process output cap and the read chunk follow the
// negotiated 65536, not the node's own cap: the run answers with the
// output that fits, get and cancel of that id answer too, and node.fs.read
// with the default length returns a shorter chunk.
func TestOutcomesNegotiatedPayload(t *testing.T) {
	c := startClusterPolicy(t, "small-1", "max_payload = 65536\n")
	m := c.newMachine("small-1", "")
	_, nodeID := c.join(m)

	// The largest the receipt's outputs could be if the whole frame were
	// payload; the real budget is a little below.
	ceiling := protocol.ProcessOutputBudget(65536)
	run := map[string]any{"nodeId": nodeID, "processId": "head:1", "cwd": ".",
		"argv": []string{"head", "-c", "100000", "/dev/zero"}, "stdinBase64": "", "timeoutMs": 30000, "maxOutputBytes": 1048576}
	receipt := func(what string, got map[string]any) []byte {
		t.Helper()
		s, ok := got["stdoutBase64"].(string)
		if !ok || got["outputTruncated"] != true {
			t.Fatalf("%s: %v, want a receipt with its output, outputTruncated:true", what, got)
		}
		out, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(out) > ceiling || len(out) < ceiling-512 || !bytes.Equal(out, make([]byte, len(out))) {
			t.Fatalf("%s: %d output bytes (err %v), want zeros, at most %d and within 512 of it", what, len(out), err, ceiling)
		}
		return out
	}
	ran := c.op.must(t, "node.process.run", run)
	out := receipt("node.process.run", ran)
	t.Logf("run: state %v, %d of 100000 output bytes", ran["state"], len(out))
	for _, method := range []string{"node.process.get", "node.process.cancel"} {
		got := c.op.must(t, method, map[string]any{"nodeId": nodeID, "processId": "head:1"})
		if again := receipt(method, got); len(again) != len(out) || got["state"] != ran["state"] {
			t.Fatalf("%s: state %v with %d output bytes, want the run's %v with %d", method, got["state"], len(again), ran["state"], len(out))
		}
	}

	// node.fs.read, default length, of a 100000-byte file: a shorter
	// chunk, and chunk by chunk the whole file.
	data := bytes.Repeat([]byte("lemon-0123456789"), 6250)
	if err := os.WriteFile(filepath.Join(m.cwd, "big.bin"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for chunks := 0; ; chunks++ {
		if chunks > 10 {
			t.Fatalf("no eof after %d chunks (%d bytes)", chunks, len(got))
		}
		r := c.op.must(t, "node.fs.read", map[string]any{"nodeId": nodeID, "path": "big.bin", "offset": len(got)})
		b, err := base64.StdEncoding.DecodeString(r["dataBase64"].(string))
		if err != nil || num(t, r, "length") != uint64(len(b)) || num(t, r, "size") != uint64(len(data)) {
			t.Fatalf("chunk %d: length %v size %v with %d bytes (%v)", chunks, r["length"], r["size"], len(b), err)
		}
		if chunks == 0 && (len(b) >= len(data) || len(b) < 40000 || r["eof"] != false) {
			t.Fatalf("first chunk: %d bytes, eof %v; want a shorter chunk of the 100000", len(b), r["eof"])
		}
		got = append(got, b...)
		if r["eof"] == true {
			break
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("the chunks make %d bytes that differ from the file", len(got))
	}
}

// TestOutcomesRateLimitTruthful is issue 9 item 3b with the real
// binaries: a worker policy with one rate rule, module = "process",
// per_second = 0.01, burst = 1. The run of ["touch","MARK"] takes the
// only token at spawn.run and completes (its spawn.result is not
// refused after the effect); the next run is refused before its effect,
// and its flags are true: retrySafe, nothing applied, no file made.
func TestOutcomesRateLimitTruthful(t *testing.T) {
	c := startCluster(t, "rate-1")
	m := c.newMachine("rate-1", "[[rate_limits]]\nmodule = \"process\"\nper_second = 0.01\nburst = 1\n")
	_, nodeID := c.join(m)
	run := func(id, file string) map[string]any {
		return map[string]any{"nodeId": nodeID, "processId": id, "cwd": ".",
			"argv": []string{"touch", file}, "stdinBase64": "", "timeoutMs": 30000, "maxOutputBytes": 1048576}
	}
	wantExactly(t, "the first touch", c.op.must(t, "node.process.run", run("mark:1", "MARK")),
		`{"processId":"mark:1","nodeId":"`+nodeID+`","state":"completed","exitCode":0,"stdoutBase64":"","stderrBase64":"","outputTruncated":false}`)
	if _, err := os.Stat(filepath.Join(m.cwd, "MARK")); err != nil {
		t.Fatalf("MARK: %v", err)
	}
	e := c.op.callError(t, "node.process.run", run("mark:2", "MARK2"))
	if e.Code != protocol.CodeRateLimited || e.detail("retrySafe") != true || e.detail("mutationMayHaveApplied") != false {
		t.Fatalf("second touch: %+v, want RATE_LIMITED retrySafe:true mutationMayHaveApplied:false", e)
	}
	if _, err := os.Stat(filepath.Join(m.cwd, "MARK2")); !os.IsNotExist(err) {
		t.Fatalf("MARK2 after a refusal that says nothing was done: %v", err)
	}
}

// `lemon policy check` refuses a rate rule that can match nothing: a
// module that is not in the module set (module = "fss") and a host call
// no module imports; real names pass.
func TestPolicyCheckRateTargets(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, rule, want string
		code             int
	}{
		{"module fss", "module = \"fss\"\n", `module "fss" is not a module`, 1},
		{"unknown hostcall", "module = \"process\"\nhostcall = \"spawn.runn\"\n", `hostcall "spawn.runn" is not a host call`, 1},
		{"hostcall of another module", "module = \"process\"\nhostcall = \"fs.read\"\n", `hostcall "fs.read" is not a host call`, 1},
		{"process", "module = \"process\"\n", "", 0},
		{"fs.read of any module", "hostcall = \"fs.read\"\n", "", 0},
	} {
		pol := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".toml")
		if err := os.WriteFile(pol, []byte("[[rate_limits]]\n"+c.rule+"per_second = 0.01\nburst = 1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := run(t, dir, env(dir), nil, "policy", "check", "--worker", pol)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d with %q", c.name, r.code, r.stderr, c.code, c.want)
		}
	}
}
