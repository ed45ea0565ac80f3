package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"lemon/protocol"
)

// TestSecretsThroughController is issue 5's "Must show" with the real
// binaries: a node whose worker policy names a vault key made by `lemon
// vault gen-key`, joined to `lemon controller`, driven by `lemon call`.
func TestSecretsThroughController(t *testing.T) {
	c := startCluster(t, "vault-node")
	keyDir := filepath.Join(c.dir, "keys")
	if err := os.Mkdir(keyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(keyDir, "vault.key")
	if r := run(t, keyDir, env(keyDir), nil, "vault", "gen-key", "--key-file", keyFile); r.code != 0 {
		t.Fatalf("lemon vault gen-key: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	m := c.newMachine("vault-node", fmt.Sprintf("[vault]\nkey_file = %q\n", keyFile))
	node, nodeID := c.join(m)
	vaultDB := filepath.Join(m.state, "vault", "vault.db")

	canaries := map[string]string{
		"secret name":       "NAME-" + randHex(12),
		"secret value":      "VALUE-" + randHex(16),
		"conflicting value": "OTHER-" + randHex(16),
	}
	name := "e2e/" + canaries["secret name"]
	const opID = "install:e2e-1"
	set := map[string]any{"nodeId": nodeID, "name": name, "value": canaries["secret value"], "operationId": opID}
	applied := fmt.Sprintf(`{"name":%q,"set":true,"operationId":%q,"status":"applied","currentBindingMatches":true}`, name, opID)
	receipt := fmt.Sprintf(`{"nodeId":%q,"operationId":%q,"status":"applied","name":%q,"currentBindingMatches":true}`, nodeID, opID, name)

	before := fileState(t, vaultDB)
	wantExactly(t, "set with an operationId", c.op.must(t, "node.secrets.set", set), applied)
	afterSet := fileState(t, vaultDB)
	if afterSet == before {
		t.Fatalf("the set did not change the vault file; the write check below would prove nothing")
	}
	wantExactly(t, "receipt", c.op.must(t, "node.secrets.receipt", map[string]any{"nodeId": nodeID, "operationId": opID}), receipt)

	// The same set again (a reconciliation after a lost reply): the
	// original success, and the vault file is untouched.
	wantExactly(t, "repeated set", c.op.must(t, "node.secrets.set", set), applied)
	if now := fileState(t, vaultDB); now != afterSet {
		t.Errorf("the repeated set wrote the vault: %v, then %v", afterSet, now)
	}
	wantExactly(t, "receipt after the repeat", c.op.must(t, "node.secrets.receipt", map[string]any{"nodeId": nodeID, "operationId": opID}), receipt)

	// The same ID with another value is a conflict and writes nothing.
	other := map[string]any{"nodeId": nodeID, "name": name, "value": canaries["conflicting value"], "operationId": opID}
	if e := c.op.callError(t, "node.secrets.set", other); e.Code != protocol.CodeConflict || e.detail("code") != protocol.DomainSecretOperationConflict {
		t.Errorf("conflicting set: %+v, want CONFLICT/secret_operation_conflict", e)
	}
	if now := fileState(t, vaultDB); now != afterSet {
		t.Errorf("the conflicting set wrote the vault")
	}
	wantExactly(t, "receipt of an unknown ID", c.op.must(t, "node.secrets.receipt", map[string]any{"nodeId": nodeID, "operationId": "install:none"}),
		fmt.Sprintf(`{"nodeId":%q,"operationId":"install:none","status":"not_found","name":null,"currentBindingMatches":false}`, nodeID))
	wantExactly(t, "list", c.op.must(t, "node.secrets.list", map[string]any{"nodeId": nodeID}),
		fmt.Sprintf(`{"names":[%q],"limit":500,"truncated":false}`, name))

	if code := node.signal(t, syscall.SIGTERM); code != 0 {
		t.Errorf("node exit %d after SIGTERM\n%s", code, node.output())
	}
	if code := c.ctl.signal(t, syscall.SIGTERM); code != 0 {
		t.Errorf("controller exit %d after SIGTERM\n%s", code, c.ctl.output())
	}
	// Offline, the vault opens with the key and holds one secret and one
	// receipt: two sets with one ID made one record.
	check := run(t, keyDir, env(keyDir), nil, "vault", "check", "--state", m.state, "--key-file", keyFile)
	if want := "vault opens with this key: 1 secrets, 0 expired, 0 deleted names kept for receipts, 1 receipts\n"; check.code != 0 || check.stdout != want {
		t.Errorf("lemon vault check: exit %d, stdout %q, want %q\n%s", check.code, check.stdout, want, check.stderr)
	}

	// No log line, no output but the requester's own payloads, and no file
	// of the node holds a canary in any form; the vault file is searched
	// too (it holds the value only encrypted).
	var leaks []leak
	nameSeen := 0
	leaks = append(leaks, findCanaries("node output", []byte(node.output()), canaries)...)
	leaks = append(leaks, findCanaries("controller output", []byte(c.ctl.output()), canaries)...)
	leaks = append(leaks, findCanaries("lemon vault check output", []byte(check.stdout+check.stderr), canaries)...)
	for i, out := range c.op.outputs {
		for _, l := range findCanaries(fmt.Sprintf("lemon call output %d", i+1), []byte(out), canaries) {
			// Set, receipt and list answer with the name: that is their
			// payload. A value never comes back.
			if l.canary != "secret name" {
				leaks = append(leaks, l)
			} else if l.form == "plaintext" {
				nameSeen++
			}
		}
	}
	if nameSeen == 0 {
		t.Fatalf("the search did not even find the name in the payloads that carry it")
	}
	fileLeaks, files := scanTree(t, m.home, canaries) // state dir, cwd, policy
	leaks = append(leaks, fileLeaks...)
	for _, l := range leaks {
		t.Errorf("%s", l)
	}
	if _, err := os.Stat(vaultDB); err != nil || files < 2 {
		t.Errorf("searched %d files; the vault file must be one of them", files)
	}
	// One content-free audit event per host call: method, module, host
	// call, a fixed outcome, the invokeId and count 1, nothing else.
	var got []string
	for _, ev := range slogEvents(node.stderr.String(), "execution_node.host_io") {
		keys := make([]string, 0, len(ev))
		for k := range ev {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if strings.Join(keys, ",") != "count,hostcall,invokeId,level,method,module,msg,outcome,time" || ev["count"] != "1" || ev["module"] != "secrets" {
			t.Errorf("audit event with unexpected fields: %v", ev)
		}
		got = append(got, ev["method"]+" "+ev["hostcall"]+" "+ev["outcome"])
	}
	want := []string{
		"node.secrets.set vault.set ok", "node.secrets.receipt vault.receipt ok",
		"node.secrets.set vault.set ok", "node.secrets.receipt vault.receipt ok",
		"node.secrets.set vault.set secret_operation_conflict", "node.secrets.receipt vault.receipt ok",
		"node.secrets.list vault.list ok",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("audit events:\n got  %q\n want %q", got, want)
	}
	audits := len(got)
	t.Logf("no canary in %d node log lines (%d audit events), %d controller log lines, %d files under the node home (state directory included) (vault file %d bytes)",
		lineCount(node.output()), audits, lineCount(c.ctl.output()), files, fileState(t, vaultDB).size)
}

// fileStat identifies a file's content and metadata.
type fileStat struct {
	size    int64
	mtimeNs int64
	sha256  string
}

func fileState(t *testing.T, path string) fileStat {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the vault file: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return fileStat{size: fi.Size(), mtimeNs: fi.ModTime().UnixNano(), sha256: hex.EncodeToString(sum[:])}
}

var slogPair = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S*)`)

// slogEvents parses the log/slog text lines of text whose msg is msg into
// key → value (quotes removed).
func slogEvents(text, msg string) []map[string]string {
	var out []map[string]string
	for _, line := range strings.Split(text, "\n") {
		ev := map[string]string{}
		for _, m := range slogPair.FindAllStringSubmatch(line, -1) {
			v := m[2]
			if uq, err := strconv.Unquote(v); err == nil {
				v = uq
			}
			ev[m[1]] = v
		}
		if ev["msg"] == msg {
			out = append(out, ev)
		}
	}
	return out
}
