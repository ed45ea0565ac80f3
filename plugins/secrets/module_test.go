//go:build !wasip1

// Tests of the secrets module through the real host (wazero, the gate,
// input blobs) with the real vault behind it.
package secrets_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lemon/host"
	"lemon/host/hosttest"
	"lemon/hostcalls"
	"lemon/hostcalls/vault"
	"lemon/protocol"
)

func TestMain(m *testing.M) { hosttest.Main(m) }

type fixture struct {
	h     *host.Host
	v     *vault.Vault
	root  string
	log   *hosttest.LogBuffer
	mu    sync.Mutex
	args  []string // every host-call args JSON the module sent
	calls map[string]int
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	root := t.TempDir()
	keyFile := filepath.Join(root, "master.key")
	if err := vault.GenerateKeyFile(keyFile); err != nil {
		t.Fatal(err)
	}
	v, err := vault.New(vault.Config{Dir: filepath.Join(root, "state"), KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	f := &fixture{v: v, root: root, log: &hosttest.LogBuffer{}, calls: map[string]int{}}
	// Wrap each entry to record what the module passes to the host.
	tbl := v.Table()
	for i := range tbl {
		inner := tbl[i].Func
		name := tbl[i].Name
		tbl[i].Func = func(ctx context.Context, c hostcalls.Call, args []byte) ([]byte, error) {
			f.mu.Lock()
			f.args = append(f.args, string(args))
			f.calls[name]++
			f.mu.Unlock()
			return inner(ctx, c, args)
		}
	}
	f.h = hosttest.NewHost(t, host.Config{Ceiling: hostcalls.AllCapabilities, Tables: []hostcalls.Table{tbl},
		Logger: slog.New(slog.NewJSONHandler(f.log, nil))}, "secrets", "plugins/secrets")
	return f
}

func (f *fixture) invoke(t testing.TB, method, args string) (string, *protocol.Error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, perr := f.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "i1", NodeID: "node-id", SessionGeneration: 1,
		Method: method, Args: json.RawMessage(args)})
	return string(out), perr
}

func (f *fixture) must(t testing.TB, method, args, want string) {
	t.Helper()
	out, perr := f.invoke(t, method, args)
	if perr != nil {
		t.Fatalf("%s: %v", method, perr)
	}
	if want != "" && out != want {
		t.Fatalf("%s = %s\nwant %s", method, out, want)
	}
}

func TestMethodsAdvertised(t *testing.T) {
	f := newFixture(t)
	got := f.h.Methods()
	for _, m := range []string{"node.secrets.set", "node.secrets.list", "node.secrets.delete", "node.secrets.receipt"} {
		if got[m] != 1 {
			t.Errorf("%s not served: %v", m, got)
		}
	}
	if _, ok := got["node.secrets.get"]; ok || len(got) != 4 {
		t.Fatalf("methods = %v", got)
	}
}

// TestLostResponseEndToEnd: set with an operationId, drop the reply, query
// the receipt, repeat the set: one vault write in total.
func TestLostResponseEndToEnd(t *testing.T) {
	f := newFixture(t)
	set := `{"nodeId":"node-id","name":"integration/token","value":"VALUE_FROM_PRIVATE_BACKEND","operationId":"install:token-1"}`
	applied := `{"name":"integration/token","set":true,"operationId":"install:token-1","status":"applied","currentBindingMatches":true}`
	f.must(t, "node.secrets.set", set, applied) // reply "lost"
	f.must(t, "node.secrets.receipt", `{"nodeId":"node-id","operationId":"install:token-1"}`,
		`{"nodeId":"node-id","operationId":"install:token-1","status":"applied","name":"integration/token","currentBindingMatches":true}`)
	f.must(t, "node.secrets.set", set, applied)
	if f.v.Writes() != 1 {
		t.Fatalf("vault writes = %d, want 1", f.v.Writes())
	}
	// A different value under the same ID is a conflict, not a replacement.
	_, perr := f.invoke(t, "node.secrets.set", strings.Replace(set, "VALUE_FROM", "OTHER_FROM", 1))
	if perr == nil || perr.Code != protocol.CodeConflict || perr.DomainCode() != protocol.DomainSecretOperationConflict {
		t.Fatalf("conflict = %v", perr)
	}
	if f.v.Writes() != 1 {
		t.Fatal("conflict wrote")
	}
}

func TestShapesAndErrors(t *testing.T) {
	f := newFixture(t)
	f.must(t, "node.secrets.set", `{"nodeId":"node-id","name":" b ","value":""}`, `{"name":"b","set":true}`)
	f.must(t, "node.secrets.set", `{"nodeId":"node-id","name":"a","value":"x"}`, `{"name":"a","set":true}`)
	f.must(t, "node.secrets.list", `{"nodeId":"node-id"}`, `{"names":["a","b"],"limit":500,"truncated":false}`)
	f.must(t, "node.secrets.delete", `{"nodeId":"node-id","name":"a"}`, `{"name":"a","deleted":true}`)
	f.must(t, "node.secrets.delete", `{"nodeId":"node-id","name":"a"}`, `{"name":"a","deleted":true}`)
	f.must(t, "node.secrets.list", `{"nodeId":"node-id"}`, `{"names":["b"],"limit":500,"truncated":false}`)
	f.must(t, "node.secrets.receipt", `{"nodeId":"node-id","operationId":"nope"}`,
		`{"nodeId":"node-id","operationId":"nope","status":"not_found","name":null,"currentBindingMatches":false}`)
	f.must(t, "node.secrets.set", `{"nodeId":"node-id","name":" lemon_bot/invocations/run-9 ","value":"p","operationId":"run-9"}`, "")

	big := strings.Repeat("v", 1<<20)
	f.must(t, "node.secrets.set", `{"nodeId":"node-id","name":"big","value":"`+big+`"}`, `{"name":"big","set":true}`)
	cases := []struct {
		args  string
		code  string
		field string
	}{
		{`{"nodeId":"node-id","name":"big","value":"` + big + `v"}`, protocol.CodeInvalidParams, "value"},
		{`{"nodeId":"node-id","name":"a"}`, protocol.CodeInvalidParams, "value"},
		{`{"nodeId":"node-id","name":"a","value":5}`, protocol.CodeInvalidParams, "value"},
		{`{"nodeId":"node-id","name":"` + strings.Repeat("n", 257) + `","value":"x"}`, protocol.CodeInvalidParams, "name"},
		{`{"nodeId":"node-id","name":"a\u0000","value":"x"}`, protocol.CodeInvalidParams, "name"},
		{`{"nodeId":"node-id","name":"a","value":"x","operationId":"a b"}`, protocol.CodeInvalidParams, "operationId"},
		{`{"nodeId":"node-id","name":"lemon_bot/invocations/r1","value":"x","operationId":"r2"}`, protocol.CodeInvalidParams, "operationId"},
		{`{"nodeId":"node-id","name":"lemon_bot/invocations/r1","value":"x"}`, protocol.CodeInvalidParams, "operationId"},
		{`{"nodeId":"node-id","name":"a","value":"x","owner":"o"}`, protocol.CodeInvalidParams, "owner"},
		{`{"name":"a","value":"x"}`, protocol.CodeInvalidParams, "nodeId"},
	}
	before := f.v.Writes()
	calls := f.calls[vault.HostCallSet]
	for _, c := range cases {
		_, perr := f.invoke(t, "node.secrets.set", c.args)
		if perr == nil || perr.Code != c.code || perr.Details == nil || perr.Details.Field != c.field {
			t.Errorf("%.80s: %+v", c.args, perr)
		}
	}
	if f.v.Writes() != before || f.calls[vault.HostCallSet] != calls {
		t.Fatal("an invalid set reached the vault")
	}
	for _, c := range []struct{ method, args, field string }{
		{"node.secrets.list", `{"nodeId":"node-id","limit":10}`, "limit"},
		{"node.secrets.delete", `{"nodeId":"node-id","name":""}`, "name"},
		{"node.secrets.receipt", `{"nodeId":"node-id","operationId":"` + strings.Repeat("o", 129) + `"}`, "operationId"},
		{"node.secrets.receipt", `{"nodeId":"node-id"}`, "operationId"},
	} {
		_, perr := f.invoke(t, c.method, c.args)
		if perr == nil || perr.Details == nil || perr.Details.Field != c.field {
			t.Errorf("%s %s: %+v", c.method, c.args, perr)
		}
	}
}

// invokeAs runs method as node nodeID ("" : no authenticated identity).
func (f *fixture) invokeAs(t testing.TB, nodeID, method, args string) (string, *protocol.Error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, perr := f.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "i1", NodeID: nodeID, SessionGeneration: 1,
		Method: method, Args: json.RawMessage(args)})
	return string(out), perr
}

// TestReceiptRules checks the module's receipt logic over the vault
// primitives (moved here from the vault's own tests, docs/SECRETS.md
// "Receipts"): operation ids are scoped to the authenticated node
// identity, need one, stop matching when the name is deleted or the key
// rotated, and a name holds at most 128 receipts (the 128th passes, a new
// 129th is refused before anything changes; a repeat at capacity and a
// set without operationId still work).
func TestReceiptRules(t *testing.T) {
	f := newFixture(t)
	set := func(node, name, value, op string) (string, *protocol.Error) {
		return f.invokeAs(t, node, "node.secrets.set",
			`{"nodeId":"n","name":"`+name+`","value":"`+value+`","operationId":"`+op+`"}`)
	}
	receipt := func(node, op string) string {
		t.Helper()
		out, perr := f.invokeAs(t, node, "node.secrets.receipt", `{"nodeId":"n","operationId":"`+op+`"}`)
		if perr != nil {
			t.Fatalf("receipt %s/%s: %v", node, op, perr)
		}
		return out
	}
	if _, perr := set("node-a", "k", "v", "op-1"); perr != nil {
		t.Fatal(perr)
	}
	// The same id under another node identity is another operation.
	if got := receipt("node-b", "op-1"); got != `{"nodeId":"node-b","operationId":"op-1","status":"not_found","name":null,"currentBindingMatches":false}` {
		t.Fatalf("receipt under another node = %s", got)
	}
	if _, perr := set("node-b", "k", "other", "op-1"); perr != nil {
		t.Fatalf("node-b's op-1: %v", perr)
	}
	if got := receipt("node-a", "op-1"); got != `{"nodeId":"node-a","operationId":"op-1","status":"applied","name":"k","currentBindingMatches":false}` {
		t.Fatalf("node-a after node-b replaced k = %s", got)
	}
	// Without an authenticated identity an operation id cannot be scoped.
	for _, c := range []struct{ method, args string }{
		{"node.secrets.set", `{"nodeId":"n","name":"k","value":"v","operationId":"op-2"}`},
		{"node.secrets.receipt", `{"nodeId":"n","operationId":"op-1"}`},
	} {
		_, perr := f.invokeAs(t, "", c.method, c.args)
		if perr == nil || perr.Code != protocol.CodeUnavailable || perr.DomainCode() != protocol.DomainVaultUnavailable {
			t.Fatalf("%s without identity: %v", c.method, perr)
		}
	}
	// Deleting the name keeps the receipt; it stops matching and a repeat
	// conflicts.
	if _, perr := set("node-a", "gone", "v", "op-del"); perr != nil {
		t.Fatal(perr)
	}
	f.must(t, "node.secrets.delete", `{"nodeId":"n","name":"gone"}`, `{"name":"gone","deleted":true}`)
	if got := receipt("node-id", "op-del"); !strings.Contains(got, `"status":"not_found"`) {
		t.Fatalf("op-del under node-id = %s", got)
	}
	if got := receipt("node-a", "op-del"); got != `{"nodeId":"node-a","operationId":"op-del","status":"applied","name":"gone","currentBindingMatches":false}` {
		t.Fatalf("after delete = %s", got)
	}
	if _, perr := set("node-a", "gone", "v", "op-del"); perr == nil || perr.DomainCode() != protocol.DomainSecretOperationConflict {
		t.Fatalf("repeat after delete: %v", perr)
	}
	// Capacity: 128 receipts per name, deleted names included.
	for i := 0; i < protocol.SecretReceiptsPerName; i++ {
		if _, perr := set("node-a", "cap", "v"+itoa(i), "cap-"+itoa(i)); perr != nil {
			t.Fatalf("receipt %d: %v", i+1, perr)
		}
	}
	w := f.v.Writes()
	_, perr := set("node-a", "cap", "new", "cap-128")
	if perr == nil || perr.Code != protocol.CodeConflict || perr.DomainCode() != protocol.DomainSecretReceiptCapacity ||
		*perr.Details.MutationMayHaveApplied {
		t.Fatalf("129th receipt: %+v", perr)
	}
	if got := receipt("node-a", "cap-128"); !strings.Contains(got, `"status":"not_found"`) || f.v.Writes() != w {
		t.Fatalf("refused operation left a receipt or a write: %s", got)
	}
	if _, perr := set("node-a", "cap", "v127", "cap-127"); perr != nil || f.v.Writes() != w {
		t.Fatalf("repeat at capacity: %v, writes %d", perr, f.v.Writes()-w)
	}
	f.must(t, "node.secrets.set", `{"nodeId":"n","name":"cap","value":"plain"}`, `{"name":"cap","set":true}`)
	if got := receipt("node-a", "cap-0"); got != `{"nodeId":"node-a","operationId":"cap-0","status":"applied","name":"cap","currentBindingMatches":false}` {
		t.Fatalf("oldest receipt pruned? %s", got)
	}
	// A key rotation re-encrypts at a new revision: bindings stop matching.
	if _, perr := set("node-a", "rot", "v", "op-rot"); perr != nil {
		t.Fatal(perr)
	}
	newKey := filepath.Join(f.root, "new.key")
	if err := vault.GenerateKeyFile(newKey); err != nil {
		t.Fatal(err)
	}
	k, err := vault.LoadKeyFile(newKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.v.RotateKey(k); err != nil {
		t.Fatal(err)
	}
	if got := receipt("node-a", "op-rot"); got != `{"nodeId":"node-a","operationId":"op-rot","status":"applied","name":"rot","currentBindingMatches":false}` {
		t.Fatalf("after rotation = %s", got)
	}
	if _, perr := set("node-a", "rot", "v", "op-rot"); perr == nil || perr.DomainCode() != protocol.DomainSecretOperationConflict {
		t.Fatalf("repeat after rotation: %v", perr)
	}
}

func TestCapabilityDenied(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, perr := f.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "i-deny", NodeID: "node-id", Method: "node.secrets.set",
		Args:             json.RawMessage(`{"nodeId":"node-id","name":"a","value":"x"}`),
		ExecutionContext: hosttest.Context(t, "i-deny", "read")})
	if perr == nil || perr.Code != protocol.CodeForbidden {
		t.Fatalf("set without the secrets capability: %v", perr)
	}
	if f.v.Writes() != 0 {
		t.Fatal("denied set wrote")
	}
}

// TestCanaryEndToEnd plants a canary name and value through the host and
// searches the audit log, every error, every host-call argument the module
// sent and every file under the node's directories.
func TestCanaryEndToEnd(t *testing.T) {
	const name = "CANARY-NAME-0d9e41f2"
	const value = "CANARY-VALUE-7b3c5a18"
	f := newFixture(t)
	var errs []string
	try := func(method, args string) {
		out, perr := f.invoke(t, method, args)
		if perr != nil {
			b, _ := json.Marshal(perr)
			errs = append(errs, string(b))
		}
		if strings.Contains(out, value) {
			t.Errorf("%s payload holds the value", method)
		}
	}
	try("node.secrets.set", `{"nodeId":"node-id","name":"`+name+`","value":"`+value+`","operationId":"op-c"}`)
	try("node.secrets.set", `{"nodeId":"node-id","name":"`+name+`","value":"`+value+`-2","operationId":"op-c"}`)
	try("node.secrets.set", `{"nodeId":"node-id","name":"`+name+`\u0000","value":"`+value+`"}`)
	try("node.secrets.set", `{"nodeId":"node-id","name":"lemon_bot/invocations/`+name+`","value":"`+value+`","operationId":"x"}`)
	try("node.secrets.receipt", `{"nodeId":"node-id","operationId":"op-c"}`)
	try("node.secrets.list", `{"nodeId":"node-id"}`)
	try("node.secrets.delete", `{"nodeId":"node-id","name":"`+name+`"}`)
	if len(errs) != 3 {
		t.Fatalf("want 3 errors, got %d", len(errs))
	}
	for _, e := range errs {
		if strings.Contains(e, name) || strings.Contains(e, value) {
			t.Errorf("error carries the canary: %s", e)
		}
	}
	logText := f.log.String()
	if n := strings.Count(logText, "\n"); n < 5 {
		t.Fatalf("only %d audit lines", n)
	}
	for _, line := range strings.Split(strings.TrimSpace(logText), "\n") {
		if strings.Contains(line, "CANARY") {
			t.Errorf("audit line carries the canary: %s", line)
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev["count"] != float64(1) {
			t.Errorf("audit line %s", line)
		}
		for k := range ev {
			switch k {
			case "time", "level", "msg", "method", "module", "hostcall", "outcome", "count", "invokeId":
			default:
				t.Errorf("audit event has field %q", k)
			}
		}
	}
	for _, a := range f.args {
		if strings.Contains(a, value) {
			t.Errorf("the module handled the plaintext value: %s", a)
		}
	}
	f.v.Close()
	filepath.WalkDir(f.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, _ := os.ReadFile(p)
		if bytes.Contains(b, []byte(name)) || bytes.Contains(b, []byte(value)) || bytes.Contains(b, []byte("CANARY")) {
			t.Errorf("%s holds the canary", filepath.Base(p))
		}
		return nil
	})
}

// TestListThroughHostBoundary: the module shapes node.secrets.list from
// one vault.list of 500: byte for byte json.Marshal of the payload
// (HTML characters and non-ASCII names included) with an empty vault, at
// 500 names and, truncated, at 501.
func TestListThroughHostBoundary(t *testing.T) {
	f := newFixture(t)
	if out, perr := f.invoke(t, "node.secrets.list", `{"nodeId":"node-id"}`); perr != nil || out != `{"names":[],"limit":500,"truncated":false}` {
		t.Fatalf("empty vault: %s %v", out, perr)
	}
	for i := 0; i < 499; i++ {
		if _, err := f.v.Put(vault.PutRequest{Name: "s/" + itoa(100000+i), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.v.Put(vault.PutRequest{Name: "<a>&b/\u2028\u00e9", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{500, 501} {
		if n == 501 {
			if _, err := f.v.Put(vault.PutRequest{Name: "0-first", Value: []byte("v")}); err != nil {
				t.Fatal(err)
			}
		}
		out, perr := f.invoke(t, "node.secrets.list", `{"nodeId":"node-id"}`)
		if perr != nil {
			t.Fatal(perr)
		}
		l, perr := f.v.List(500)
		if perr != nil {
			t.Fatal(perr)
		}
		plain, _ := json.Marshal(protocol.SecretsListResult{Names: l.Names, Limit: 500, Truncated: l.More})
		if out != string(plain) {
			t.Fatalf("n=%d:\n got %.200s\nwant %.200s", n, out, plain)
		}
		var r protocol.SecretsListResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Names) != 500 || r.Limit != 500 || r.Truncated != (n == 501) || (n == 501) != (r.Names[0] == "0-first") {
			t.Fatalf("n=%d: %d names, truncated=%v, first %q", n, len(r.Names), r.Truncated, r.Names[0])
		}
		if !strings.Contains(out, `"\u003ca\u003e\u0026b/\u2028é"`) {
			t.Fatalf("n=%d: HTML characters not escaped: %.300s", n, out)
		}
	}
	if f.calls[vault.HostCallList] != 3 {
		t.Fatalf("host calls %v", f.calls)
	}
}

// BenchmarkSetWithReceiptThroughHost measures node.secrets.set with an
// operationId through the wasm module and the gate (fsync'd write).
func BenchmarkSetWithReceiptThroughHost(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		args := `{"nodeId":"node-id","name":"bench/` + itoa(i) + `","value":"0123456789abcdef0123456789abcdef","operationId":"op-` + itoa(i) + `"}`
		if _, perr := f.h.Invoke(ctx, protocol.InvokeRequest{NodeID: "node-id", Method: "node.secrets.set", Args: json.RawMessage(args)}); perr != nil {
			b.Fatal(perr)
		}
	}
}

// BenchmarkList500ThroughHost measures node.secrets.list of 500 names
// (names of 36 bytes) through the wasm module and the gate.
func BenchmarkList500ThroughHost(b *testing.B) {
	f := newFixture(b)
	for i := 0; i < 500; i++ {
		if _, err := f.v.Put(vault.PutRequest{Name: "integration/service-" + itoa(100000+i) + "/api-token", Value: []byte("v")}); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	args := json.RawMessage(`{"nodeId":"node-id"}`)
	for b.Loop() {
		out, perr := f.h.Invoke(ctx, protocol.InvokeRequest{NodeID: "node-id", Method: "node.secrets.list", Args: args})
		if perr != nil || len(out) < 500*36 {
			b.Fatal(perr)
		}
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
