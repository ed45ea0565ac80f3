package main

import (
	"bytes"
	"context"
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
