package e2e

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"lemon/audit"
)

// nodeMetricsRE finds the node's metrics address in its text line
// ("metrics on http://...") or its JSON record ("url":"http://...").
var nodeMetricsRE = regexp.MustCompile(`(?:metrics on |"url":")(http://[^\s"]+)/metrics`)

// TestObservabilityThroughController is issue 13's "Must show" for
// observability (docs/OPERATIONS.md): a controller with --audit-file and
// JSON debug logs, a node with --audit-file and --metrics-listen; calls
// that carry canaries in a path, argv, a secret name and a secret value
// move the counters of both /metrics, the controller's record of each
// node call joins the node's host-call records by invokeId, and no
// canary or token is in an audit file, a log or a metric.
func TestObservabilityThroughController(t *testing.T) {
	c0dir := t.TempDir()
	ctlAudit := filepath.Join(c0dir, "controller-audit.jsonl")
	nodeToken := "lnt_" + randHex(24)
	c := startClusterWith(t, "[[node_tokens]]\nname = \"obs-node\"\ntoken_env = \"E2E_NODE_TOKEN\"\n",
		[]string{"E2E_NODE_TOKEN=" + nodeToken},
		"--audit-file", ctlAudit, "--log-format", "json", "--log-level", "debug")
	c.nodeToken = nodeToken
	keyDir := filepath.Join(c.dir, "keys")
	if err := os.Mkdir(keyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(keyDir, "vault.key")
	if r := run(t, keyDir, env(keyDir), nil, "vault", "gen-key", "--key-file", keyFile); r.code != 0 {
		t.Fatalf("lemon vault gen-key: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	m := c.newMachine("obs-node", fmt.Sprintf("[vault]\nkey_file = %q\n", keyFile))
	nodeAudit := filepath.Join(m.home, "node-audit.jsonl")
	m.args = []string{"--audit-file", nodeAudit, "--metrics-listen", "127.0.0.1:0", "--log-format", "json", "--log-level", "debug"}
	node, nodeID := c.join(m)
	nodeBase := node.waitFor(t, nodeMetricsRE, readyWait)[1]
	// --log-format json: every stderr line is a JSON object, the startup
	// notices ("listening", "state directory", "metrics listening") too.
	for _, p := range []*proc{c.ctl, node} {
		for _, line := range strings.Split(strings.TrimSpace(p.stderr.String()), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] == nil {
				t.Errorf("%s: a stderr line is not a JSON log record: %q", p.name, line)
			}
		}
	}
	ctlBase := "http://" + strings.TrimSuffix(strings.TrimPrefix(c.url, "ws://"), "/ws")

	for _, base := range []string{ctlBase, nodeBase} {
		if got := httpGet(t, base+"/healthz", 200); got != "ok\n" {
			t.Fatalf("%s/healthz: %q", base, got)
		}
		if got := httpGet(t, base+"/readyz", 200); got != "ready\n" {
			t.Fatalf("%s/readyz: %q", base, got)
		}
	}
	okStat := `lemon_controller_requests_total{code="",method="node.fs.stat",outcome="ok"}`
	ctlBefore := metricValue(httpGet(t, ctlBase+"/metrics", 200), okStat)
	nodeBefore := metricValue(httpGet(t, nodeBase+"/metrics", 200), `lemon_hostcall_total{hostcall="fs.stat",module="fs",outcome="ok"}`)

	canaries := map[string]string{
		"path":         "PATH-" + randHex(12),
		"argv":         "ARGV-" + randHex(12),
		"secret name":  "SNAME-" + randHex(12),
		"secret value": "SVALUE-" + randHex(16),
		"node token":   nodeToken,
		"op token":     c.opToken,
	}
	file := filepath.Join(m.cwd, canaries["path"]+".txt")
	if err := os.WriteFile(file, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.op.must(t, "node.fs.stat", map[string]any{"nodeId": nodeID, "path": file})
	c.op.must(t, "node.fs.stat", map[string]any{"nodeId": nodeID, "path": file})
	c.op.callError(t, "node.fs.stat", map[string]any{"nodeId": nodeID, "path": filepath.Join(m.cwd, canaries["path"]+"-missing")})
	c.op.must(t, "node.process.run", map[string]any{"nodeId": nodeID, "processId": "obs:1", "cwd": ".",
		"argv": []string{"echo", canaries["argv"]}, "stdinBase64": base64.StdEncoding.EncodeToString(nil),
		"timeoutMs": 30000, "maxOutputBytes": 4096})
	c.op.must(t, "node.secrets.set", map[string]any{"nodeId": nodeID, "name": "e2e/" + canaries["secret name"],
		"value": canaries["secret value"], "operationId": "obs:set-1"})
	c.op.must(t, "node.list", map[string]any{})

	ctlMetrics := httpGet(t, ctlBase+"/metrics", 200)
	nodeMetrics := httpGet(t, nodeBase+"/metrics", 200)
	if got := metricValue(ctlMetrics, okStat); got != ctlBefore+2 {
		t.Errorf("controller node.fs.stat ok: %v, then %v; want +2", ctlBefore, got)
	}
	if got := metricValue(nodeMetrics, `lemon_hostcall_total{hostcall="fs.stat",module="fs",outcome="ok"}`); got < nodeBefore+2 {
		t.Errorf("node fs.stat host calls: %v, then %v; want at least +2", nodeBefore, got)
	}
	for _, want := range []string{
		`lemon_controller_connections{role="node"} 1`,
		`lemon_controller_nodes{state="online"} 1`,
		`lemon_controller_module_set_pinned 1`,
		`lemon_controller_requests_total{code="NOT_FOUND",method="node.fs.stat",outcome="error"}`,
		`lemon_controller_requests_total{code="",method="node.secrets.set",outcome="ok"} 1`,
		`lemon_controller_request_duration_seconds_bucket{method="node.list"`,
	} {
		if !strings.Contains(ctlMetrics, want) {
			t.Errorf("controller /metrics lacks %s", want)
		}
	}
	for _, want := range []string{
		`lemon_node_invocations_total{method="node.process.run",outcome="ok"} 1`,
		`lemon_node_vault_operations_total{operation="set",outcome="ok"} 1`,
		`lemon_node_processes_active 0`,
		`lemon_node_pool_instances{module="fs"}`,
		`lemon_hostcall_duration_seconds_bucket{hostcall="spawn.start"`,
	} {
		if !strings.Contains(nodeMetrics, want) {
			t.Errorf("node /metrics lacks %s", want)
		}
	}

	// Join: every controller record of a routed call has an invokeId the
	// node's host-call records carry, with the same method.
	ctlRecs, nodeRecs := readAudit(t, ctlAudit), readAudit(t, nodeAudit)
	byInvoke := map[string][]audit.Record{}
	for _, r := range nodeRecs {
		if r.Source != "node" || r.InvokeID == "" || r.HostCall == "" {
			t.Fatalf("node record %+v", r)
		}
		byInvoke[r.InvokeID] = append(byInvoke[r.InvokeID], r)
	}
	joined := map[string]int{}
	for _, r := range ctlRecs {
		if r.Source != "controller" || r.Principal != "env" || len(r.Scopes) == 0 {
			t.Fatalf("controller record %+v", r)
		}
		if r.InvokeID == "" {
			continue
		}
		hc := byInvoke[r.InvokeID]
		if r.Outcome == "ok" && len(hc) == 0 {
			t.Errorf("controller record %s %s joins no node record", r.Method, r.InvokeID)
		}
		for _, h := range hc {
			if h.Method != r.Method || h.NodeID != nodeID {
				t.Errorf("joined records differ: %+v vs %+v", r, h)
			}
			// The principal reaches the node in the execution context
			// the controller built: the same operator entry on both.
			if h.Principal != r.Principal {
				t.Errorf("node principal %q, controller %q", h.Principal, r.Principal)
			}
			joined[h.HostCall]++
		}
	}
	for _, hc := range []string{"fs.stat", "spawn.start", "vault.set"} {
		if joined[hc] == 0 {
			t.Errorf("no joined record of host call %s: %v", hc, joined)
		}
	}

	// Stop both so every log line and record is flushed, then search.
	if code := node.signal(t, syscall.SIGTERM); code != 0 {
		t.Errorf("node exit %d", code)
	}
	if code := c.ctl.signal(t, syscall.SIGTERM); code != 0 {
		t.Errorf("controller exit %d", code)
	}
	texts := map[string]string{
		"controller audit": readFile(t, ctlAudit), "node audit": readFile(t, nodeAudit),
		"controller log": c.ctl.output(), "node log": node.output(),
		"controller metrics": ctlMetrics, "node metrics": nodeMetrics,
	}
	// The search itself works: the operator's own output holds the secret
	// name and the path.
	if found := findCanaries("operator output", []byte(strings.Join(c.op.outputs, "\n")), canaries); len(found) < 2 {
		t.Fatalf("the canary search misses the operator's output: %v", found)
	}
	for where, text := range texts {
		if leaks := findCanaries(where, []byte(text), canaries); len(leaks) > 0 {
			t.Errorf("canaries found: %v", leaks)
		}
	}
	for _, want := range []string{`"msg":"operator connected"`, `"msg":"node connected"`, `"addr":"127.0.0.1"`} {
		if !strings.Contains(texts["controller log"], want) {
			t.Errorf("controller log lacks %s", want)
		}
	}
}

func httpGet(t *testing.T, url string, want int) string {
	t.Helper()
	cl := &http.Client{Timeout: callWait}
	resp, err := cl.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d %q, want %d", url, resp.StatusCode, b, want)
	}
	return string(b)
}

// metricValue is the value of the sample whose name and labels are series
// exactly (0 when absent).
func metricValue(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readAudit parses an audit file; every line must be one record.
func readAudit(t *testing.T, path string) []audit.Record {
	t.Helper()
	var out []audit.Record
	deadline := time.Now().Add(exitWait)
	for {
		out = out[:0]
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r audit.Record
			dec := json.NewDecoder(strings.NewReader(sc.Text()))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&r); err != nil {
				f.Close()
				t.Fatalf("%s: line %q: %v", path, sc.Text(), err)
			}
			out = append(out, r)
		}
		f.Close()
		if len(out) > 0 || time.Now().After(deadline) {
			return out
		}
		time.Sleep(50 * time.Millisecond)
	}
}
