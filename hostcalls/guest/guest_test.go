package guest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lemon/host"
	"lemon/host/hosttest"
	"lemon/hostcalls"
	"lemon/hostcalls/fs"
	"lemon/hostcalls/guest"
	"lemon/hostcalls/guestcall"
	"lemon/hostcalls/vault"
	"lemon/policies"
	"lemon/protocol"
)

func TestMain(m *testing.M) { hosttest.Main(m) }

// canary is a secret value planted in every test that handles secrets; it
// must appear in no log record, error or result.
const canary = "CANARY-s3cr3t-7f1c9e"

const policyTOML = `
[modules.guestmod]
greeting = "hello"
retries = 3
ratio = 0.5
verbose = true
tags = ["a", "b"]

[modules.guestmod2]
mine = "only-guestmod2"
`

type node struct {
	h    *host.Host
	g    *guest.Guest
	logs *hosttest.LogBuffer
	dir  string
}

// newNode is a host over real fs, vault and guest families with the
// guestmod, guestmod2 and secrets modules loaded, logging JSON at debug.
func newNode(t testing.TB, gcfg guest.Config) *node {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	logs := &hosttest.LogBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	pol, err := policies.ParseWorker([]byte(policyTOML))
	if err != nil {
		t.Fatal(err)
	}
	f, err := fs.New(fs.Config{DefaultCwd: dir, Roots: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	key := filepath.Join(t.TempDir(), "vault.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("cd", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := vault.New(vault.Config{Dir: filepath.Join(t.TempDir(), "vault"), KeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	gcfg.Logger = logger
	gcfg.Settings = pol.Modules
	g := guest.New(gcfg)
	h, err := host.New(ctx, host.Config{CacheDir: hosttest.CacheDir(t), Ceiling: hostcalls.AllCapabilities,
		Tables: []hostcalls.Table{f.Table(), v.Table(), g.Table()}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	for family, pkg := range map[string]string{"guestmod": "host/testdata/guestmod",
		"guestmod2": "host/testdata/guestmod2", "secrets": "plugins/secrets"} {
		wasm := hosttest.Build(t, pkg)
		if _, err := h.Load(ctx, hosttest.Pin(family, wasm), wasm); err != nil {
			t.Fatalf("load %s: %v", family, err)
		}
	}
	return &node{h: h, g: g, logs: logs, dir: dir}
}

func (n *node) call(t testing.TB, method string, params any) (map[string]any, *protocol.Error) {
	t.Helper()
	args, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	payload, perr := n.h.Invoke(context.Background(), protocol.InvokeRequest{
		InvokeID: "inv-" + method, NodeID: "node-1", Method: method, Args: args})
	if perr != nil {
		return nil, perr
	}
	var out map[string]any
	if err := json.Unmarshal(payload, &out); err != nil {
		t.Fatalf("%s: payload %s: %v", method, payload, err)
	}
	return out, nil
}

func (n *node) mustCall(t testing.TB, method string, params any) map[string]any {
	t.Helper()
	out, perr := n.call(t, method, params)
	if perr != nil {
		t.Fatalf("%s: %v", method, perr)
	}
	return out
}

// records returns the log records whose msg is msg.
func (n *node) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(n.logs.String(), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

func TestLogRecordIsTaggedAndLevelled(t *testing.T) {
	n := newNode(t, guest.Config{})
	for _, level := range []string{"debug", "info", "warn", "error"} {
		n.mustCall(t, "guest.log", map[string]any{"level": level, "message": "hello " + level})
	}
	recs := n.records(t, "execution_node.guest_log")
	if len(recs) != 4 {
		t.Fatalf("got %d guest_log records, want 4: %s", len(recs), n.logs)
	}
	for i, want := range []string{"DEBUG", "INFO", "WARN", "ERROR"} {
		r := recs[i]
		if r["level"] != want || r["module"] != "guestmod" || r["method"] != "guest.log" ||
			r["invokeId"] != "inv-guest.log" || r["message"] != "hello "+strings.ToLower(want) {
			t.Errorf("record %d = %v", i, r)
		}
	}
	_, perr := n.call(t, "guest.log", map[string]any{"level": "fatal", "message": "x"})
	if perr == nil || perr.Code != protocol.CodeInvalidParams || !strings.Contains(perr.Message, "level") {
		t.Fatalf("level fatal: %v", perr)
	}
}

func TestLogMessageLengthBoundary(t *testing.T) {
	n := newNode(t, guest.Config{})
	atMax := strings.Repeat("a", guestcall.MaxLogMessageBytes)
	out := n.mustCall(t, "guest.log", map[string]any{"level": "info", "message": atMax})
	if out["logged"] != true {
		t.Fatalf("message at the limit: %v", out)
	}
	_, perr := n.call(t, "guest.log", map[string]any{"level": "info", "message": atMax + "b"})
	if perr == nil || perr.Code != protocol.CodeInvalidParams || perr.Details == nil || perr.Details.Field != "message" {
		t.Fatalf("message one byte past the limit: %v", perr)
	}
	// The SDK cuts a long message at a rune boundary instead: 1,025
	// two-byte runes (2,050 bytes) become 1,024 (2,048 bytes).
	long := strings.Repeat("é", guestcall.MaxLogMessageBytes/2+1)
	if out := n.mustCall(t, "guest.log", map[string]any{"level": "info", "message": long, "sdk": true}); out["logged"] != true {
		t.Fatalf("sdk long message: %v", out)
	}
	recs := n.records(t, "execution_node.guest_log")
	if len(recs) != 2 {
		t.Fatalf("got %d records, want 2", len(recs))
	}
	if recs[0]["message"] != atMax {
		t.Errorf("message at the limit was changed")
	}
	if got := recs[1]["message"].(string); got != strings.Repeat("é", guestcall.MaxLogMessageBytes/2) {
		t.Errorf("sdk-truncated message is %d bytes", len(got))
	}
}

func TestLogEscapesControlCharacters(t *testing.T) {
	n := newNode(t, guest.Config{})
	n.mustCall(t, "guest.log", map[string]any{"level": "warn", "message": "a\nb\x1b[31m\u202ec\\"})
	recs := n.records(t, "execution_node.guest_log")
	if len(recs) != 1 || recs[0]["message"] != `a\nb\x1b[31m\u202ec\\` {
		t.Fatalf("records = %v", recs)
	}
}

func TestLogRateLimitDropsExcess(t *testing.T) {
	// A bucket of 5 that refills once in ~30 years: exactly 5 pass.
	n := newNode(t, guest.Config{LogPerSecond: 1e-9, LogBurst: 5})
	out := n.mustCall(t, "guest.logmany", map[string]any{"count": 8})
	if out["logged"] != float64(5) {
		t.Fatalf("logged %v of 8, want 5", out["logged"])
	}
	if d := n.g.Dropped("guestmod"); d != 3 {
		t.Fatalf("dropped = %d, want 3", d)
	}
	res := n.mustCall(t, "guest.log", map[string]any{"level": "info", "message": "one more"})
	if res["logged"] != false || res["dropped"] != float64(4) {
		t.Fatalf("over the limit: %v", res)
	}
	if got := len(n.records(t, "execution_node.guest_log")); got != 5 {
		t.Fatalf("%d records written, want 5", got)
	}
	// Another module has its own bucket.
	if d := n.g.Dropped("guestmod2"); d != 0 {
		t.Fatalf("guestmod2 dropped = %d", d)
	}
}

func TestTrapLogsModuleMethodAndPanic(t *testing.T) {
	n := newNode(t, guest.Config{})
	_, perr := n.call(t, "guest.panic", map[string]any{"message": "boom: the widget broke"})
	if perr == nil || perr.DomainCode() != protocol.DomainModuleTrapped {
		t.Fatalf("panic: %v", perr)
	}
	recs := n.records(t, "execution_node.module_trapped")
	if len(recs) != 1 {
		t.Fatalf("got %d module_trapped records: %s", len(recs), n.logs)
	}
	r := recs[0]
	if r["level"] != "ERROR" || r["module"] != "guestmod" || r["method"] != "guest.panic" || r["invokeId"] != "inv-guest.panic" {
		t.Fatalf("record = %v", r)
	}
	text := r["panic"].(string)
	if !strings.HasPrefix(text, "panic: boom: the widget broke") || len(text) > host.MaxPanicLogBytes {
		t.Fatalf("panic text (%d bytes) = %q", len(text), text)
	}
	// The next call on a fresh instance logs nothing of the old panic.
	n.mustCall(t, "guest.log", map[string]any{"level": "info", "message": "after"})
	if got := len(n.records(t, "execution_node.module_trapped")); got != 1 {
		t.Fatalf("%d trap records after a good call", got)
	}
	// A long panic text is bounded.
	_, perr = n.call(t, "guest.panic", map[string]any{"message": strings.Repeat("z", 5000)})
	if perr == nil {
		t.Fatal("no trap")
	}
	recs = n.records(t, "execution_node.module_trapped")
	if len(recs) != 2 || len(recs[1]["panic"].(string)) > host.MaxPanicLogBytes || !strings.HasPrefix(recs[1]["panic"].(string), "panic: zzz") {
		t.Fatalf("long panic record = %v", recs[len(recs)-1])
	}
}

func TestNonSecretBlobReadAndHash(t *testing.T) {
	n := newNode(t, guest.Config{})
	data := make([]byte, guestcall.MaxBlobRead+10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	b64 := base64.StdEncoding.EncodeToString(data)
	hexsum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

	// length at the limit passes, one past is refused.
	out := n.mustCall(t, "guest.read", map[string]any{"dataBase64": b64, "offset": 0, "length": guestcall.MaxBlobRead})
	if out["n"] != float64(guestcall.MaxBlobRead) || out["sha256"] != hexsum(data[:guestcall.MaxBlobRead]) {
		t.Fatalf("read at the limit: %v", out)
	}
	_, perr := n.call(t, "guest.read", map[string]any{"dataBase64": b64, "offset": 0, "length": guestcall.MaxBlobRead + 1})
	if perr == nil || perr.Details == nil || perr.Details.Field != "length" {
		t.Fatalf("read past the limit: %v", perr)
	}
	// A range at the end comes back short; offset == size reads nothing;
	// one past is refused.
	out = n.mustCall(t, "guest.read", map[string]any{"dataBase64": b64, "offset": len(data) - 4, "length": 100})
	if out["n"] != float64(4) || out["sha256"] != hexsum(data[len(data)-4:]) {
		t.Fatalf("tail read: %v", out)
	}
	out = n.mustCall(t, "guest.read", map[string]any{"dataBase64": b64, "offset": len(data), "length": 1})
	if out["n"] != float64(0) {
		t.Fatalf("read at the end: %v", out)
	}
	_, perr = n.call(t, "guest.read", map[string]any{"dataBase64": b64, "offset": len(data) + 1, "length": 1})
	if perr == nil || perr.Details == nil || perr.Details.Field != "offset" {
		t.Fatalf("read past the end: %v", perr)
	}
	out = n.mustCall(t, "guest.read", map[string]any{"dataBase64": b64, "all": true})
	if out["n"] != float64(len(data)) || out["sha256"] != hexsum(data) {
		t.Fatalf("read all: %v", out)
	}
	out = n.mustCall(t, "guest.sha256", map[string]any{"dataBase64": b64})
	if out["sha256"] != hexsum(data) || out["size"] != float64(len(data)) {
		t.Fatalf("sha256: %v", out)
	}
	out = n.mustCall(t, "guest.hashtwice", map[string]any{"dataBase64": b64})
	d := out["digest"].(map[string]any)
	if d["sha256"] != hexsum(append(append([]byte(nil), data...), data...)) || d["size"] != float64(2*len(data)) {
		t.Fatalf("hash twice: %v", out)
	}
	if out["afterFree"] != protocol.CodeInvalidParams {
		t.Fatalf("a freed blob is still readable: %v", out)
	}
}

func TestSecretBlobUnreadable(t *testing.T) {
	n := newNode(t, guest.Config{})
	for _, method := range []string{"guest.secret", "guest.vaultlike"} {
		out := n.mustCall(t, method, map[string]any{"value": canary})
		for _, k := range []string{"read", "sha256", "hash", "readAll"} {
			if out[k] != protocol.CodeForbidden {
				t.Errorf("%s: %s on a secret blob: %v, want FORBIDDEN", method, k, out[k])
			}
		}
	}
	// Nor can the module hand it back as an output blob.
	_, perr := n.call(t, "guest.secretout", map[string]any{"value": canary})
	if perr == nil || perr.Code != protocol.CodeInternal {
		t.Fatalf("secret as output blob: %v", perr)
	}
	if b, _ := json.Marshal(perr); bytes.Contains(b, []byte(canary)) {
		t.Fatal("the canary reached an error")
	}
	// A host call not declared to consume secrets (fs.write_at) does not see
	// the blob, so it cannot land in a file a later fs.read would bring
	// into the guest.
	p := filepath.Join(n.dir, "leak.txt")
	out := n.mustCall(t, "guest.secretwrite", map[string]any{"value": canary, "path": p})
	if out["write"] != protocol.CodeInvalidParams {
		t.Fatalf("fs.write_at of a secret blob: %v", out)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("fs.write_at of a secret blob created the file: %v", err)
	}
	// The vault's own value blob (capability "secrets") is secret without
	// the flag, and vault.set still reads it.
	set := n.mustCall(t, protocol.MethodSecretsSet, map[string]any{"nodeId": "node-1", "name": "API_TOKEN", "value": canary})
	if b, _ := json.Marshal(set); bytes.Contains(b, []byte(canary)) {
		t.Fatal("the canary reached a result")
	}
	n.call(t, "guest.panic", map[string]any{"message": "after the secret"})
	if strings.Contains(n.logs.String(), canary) {
		t.Fatalf("the canary reached the log:\n%s", n.logs)
	}
	if len(n.records(t, "execution_node.host_io")) == 0 {
		t.Fatal("no audit records: the canary search saw nothing")
	}
}

func TestChecksumOfAFileThroughBlobs(t *testing.T) {
	n := newNode(t, guest.Config{})
	data := bytes.Repeat([]byte("checksum-family "), 160<<10) // 2.5 MiB
	p := filepath.Join(n.dir, "big.bin")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out := n.mustCall(t, "guest.checksum", map[string]any{"path": p})
	sum := sha256.Sum256(data)
	if out["sha256"] != hex.EncodeToString(sum[:]) || out["size"] != float64(len(data)) {
		t.Fatalf("checksum = %v", out)
	}
	if out["chunks"].(float64) < 3 {
		t.Fatalf("read in %v chunks: the file did not cross fs.read's chunk size", out["chunks"])
	}
	// Confinement is fs.read's: a path outside the roots is refused.
	if _, perr := n.call(t, "guest.checksum", map[string]any{"path": "/etc/hostname"}); perr == nil {
		t.Fatal("a path outside the allowed roots was hashed")
	}
}

func TestSettingsReachOnlyTheirModule(t *testing.T) {
	n := newNode(t, guest.Config{})
	got := n.mustCall(t, "guest.config", map[string]any{})["settings"]
	want := map[string]any{"greeting": "hello", "retries": float64(3), "ratio": 0.5, "verbose": true, "tags": []any{"a", "b"}}
	if b1, b2 := mustJSON(t, got), mustJSON(t, want); b1 != b2 {
		t.Fatalf("guestmod settings = %s, want %s", b1, b2)
	}
	got2 := n.mustCall(t, "guest2.config", map[string]any{})["settings"]
	if b := mustJSON(t, got2); b != `{"mine":"only-guestmod2"}` {
		t.Fatalf("guestmod2 settings = %s", b)
	}
	// A module without a table gets an empty one.
	g := guest.New(guest.Config{})
	for _, hc := range g.Table() {
		if hc.Name == guestcall.ConfigGet {
			b, err := hc.Func(context.Background(), fakeCall{module: "nobody"}, []byte(`{}`))
			if err != nil || string(b) != `{"settings":{}}` {
				t.Fatalf("no table: %s %v", b, err)
			}
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fakeCall is a Call that is not the host's: it cannot say which blobs
// are secret, so the family offers it none.
type fakeCall struct {
	module string
	blobs  map[uint32][]byte
}

func (f fakeCall) Module() string                    { return f.module }
func (f fakeCall) Method() string                    { return "m" }
func (f fakeCall) Invocation() hostcalls.Invocation  { return hostcalls.Invocation{} }
func (f fakeCall) Blob(id uint32) ([]byte, bool)     { b, ok := f.blobs[id]; return b, ok }
func (f fakeCall) PutBlob(b []byte) uint32           { return 0 }
func (f fakeCall) Await(done <-chan struct{}) uint32 { return 0 }

// log.write has no field through which a blob (a secret's bytes) could
// reach a record: anything but level and message is refused.
func TestLogTakesNoBlob(t *testing.T) {
	g := guest.New(guest.Config{})
	for _, hc := range g.Table() {
		if hc.Name != guestcall.LogWrite {
			continue
		}
		_, err := hc.Func(context.Background(), fakeCall{module: "m"}, []byte(`{"level":"info","message":"x","blob":1}`))
		if pe := protocol.AsError(err); pe == nil || pe.Code != protocol.CodeInvalidParams {
			t.Fatalf("log.write with a blob field: %v", err)
		}
	}
}

func TestBlobsRefusedWithoutBlobKeeper(t *testing.T) {
	g := guest.New(guest.Config{})
	for _, hc := range g.Table() {
		if hc.Capability != hostcalls.CapNone || hc.Audit != hostcalls.AuditMeta {
			t.Errorf("%s: capability %q audit %q", hc.Name, hc.Capability, hc.Audit)
		}
		if hc.Name != guestcall.BlobSHA256 {
			continue
		}
		_, err := hc.Func(context.Background(), fakeCall{blobs: map[uint32][]byte{1: []byte("x")}}, []byte(`{"blob":1}`))
		if pe := protocol.AsError(err); pe == nil || pe.Code != protocol.CodeForbidden {
			t.Fatalf("blob.sha256 through a foreign Call: %v", err)
		}
	}
}

// TestLogDropsAreReported: the first record kept after drops says how
// many were dropped (a fixed clock, advanced by hand).
func TestLogDropsAreReported(t *testing.T) {
	logs := &hosttest.LogBuffer{}
	now := time.Unix(1000, 0)
	g := guest.New(guest.Config{Logger: slog.New(slog.NewJSONHandler(logs, nil)), LogPerSecond: 1, LogBurst: 2,
		Now: func() time.Time { return now }})
	var write hostcalls.Func
	for _, hc := range g.Table() {
		if hc.Name == guestcall.LogWrite {
			write = hc.Func
		}
	}
	logged := func() bool {
		b, err := write(context.Background(), fakeCall{module: "m"}, []byte(`{"level":"info","message":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		var r guestcall.LogResult
		json.Unmarshal(b, &r)
		return r.Logged
	}
	if !logged() || !logged() || logged() || logged() {
		t.Fatal("a bucket of 2 did not keep exactly the first 2")
	}
	now = now.Add(time.Second) // one token back
	if !logged() {
		t.Fatal("no token after a second")
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[2], `"droppedBefore":2`) || strings.Contains(lines[1], "droppedBefore") {
		t.Fatalf("records:\n%s", logs)
	}
	if g.Dropped("m") != 2 {
		t.Fatalf("dropped = %d", g.Dropped("m"))
	}
}
