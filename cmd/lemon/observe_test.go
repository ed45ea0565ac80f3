package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
)

// TestObservabilityFlagErrors: bad log and audit flags are usage errors
// (exit 2) that name the flag, for controller, node join and dev.
func TestObservabilityFlagErrors(t *testing.T) {
	getenv := func(string) string { return "" }
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--log-format", "xml"}, "--log-format must be text or json"},
		{[]string{"--log-level", "loud"}, "--log-level must be debug, info, warn or error"},
		{[]string{"--audit-fail-closed"}, "--audit-fail-closed needs --audit-file"},
	} {
		var stderr bytes.Buffer
		if code := runController(c.args, getenv, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("controller %v: exit %d %q", c.args, code, stderr.String())
		}
		if c.args[0] == "--audit-fail-closed" {
			stderr.Reset()
			if code := runDev(context.Background(), c.args, getenv, &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("dev %v: exit %d %q", c.args, code, stderr.String())
			}
			continue
		}
		stderr.Reset()
		args := append([]string{"--controller", "ws://127.0.0.1:1/ws"}, c.args...)
		if code := runNodeJoin(context.Background(), args, getenv, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("node join %v: exit %d %q", c.args, code, stderr.String())
		}
	}
	var stderr bytes.Buffer
	if code := runNodeJoin(context.Background(), []string{"--controller", "ws://127.0.0.1:1/ws", "--audit-fail-closed"}, getenv, &stderr); code != 2 {
		t.Errorf("node join accepts --audit-fail-closed: exit %d", code)
	}
}

// TestAuditFileUnopenable: an audit file that cannot be opened stops the
// controller at start (exit 1) without naming the path's content.
func TestAuditFileUnopenable(t *testing.T) {
	var stderr bytes.Buffer
	dir := t.TempDir() + "/missing-CANARY"
	code := runController([]string{"--listen", "127.0.0.1:0", "--audit-file", dir + "/audit.jsonl"}, func(string) string { return "" }, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "cannot open the audit file: no such file or directory") {
		t.Fatalf("exit %d %q", code, stderr.String())
	}
	if strings.Contains(stderr.String(), "CANARY") {
		t.Fatalf("the error names the path: %q", stderr.String())
	}
}

// A lifecycle notice is its text line in text mode and one JSON record at
// INFO in json mode, whatever the log level.
func TestNoticeFormats(t *testing.T) {
	var b bytes.Buffer
	(&obsFlags{logFormat: "text", logLevel: "error"}).notice(&b, "lemon controller", "listening on ws://127.0.0.1:1/ws", "listening", "url", "ws://127.0.0.1:1/ws")
	if b.String() != "lemon controller: listening on ws://127.0.0.1:1/ws\n" {
		t.Fatalf("text: %q", b.String())
	}
	b.Reset()
	(&obsFlags{logFormat: "json", logLevel: "error"}).notice(&b, "lemon controller", "listening on ws://127.0.0.1:1/ws", "listening", "url", "ws://127.0.0.1:1/ws")
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil || rec["level"] != "INFO" || rec["msg"] != "listening" ||
		rec["cmd"] != "lemon controller" || rec["url"] != "ws://127.0.0.1:1/ws" || strings.Count(b.String(), "\n") != 1 {
		t.Fatalf("json: %q", b.String())
	}
}

// lemon controller --log-format json writes its state notice as JSON
// (its failed start stays a plain line).
func TestControllerJSONNotices(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var out bytes.Buffer
	dir := t.TempDir()
	code := runController([]string{"--listen", ln.Addr().String(), "--state", dir, "--log-format", "json"}, func(string) string { return "" }, &out)
	lines := strings.SplitN(out.String(), "\n", 2)
	var rec map[string]any
	if code != 1 || json.Unmarshal([]byte(lines[0]), &rec) != nil || rec["msg"] != "state directory" || rec["dir"] != dir {
		t.Fatalf("exit %d, stderr %q", code, out.String())
	}
}
