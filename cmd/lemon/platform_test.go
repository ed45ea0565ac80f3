package main

import (
	"context"
	"strings"
	"testing"
)

func TestNodeLinuxOnly(t *testing.T) {
	noEnv := func(string) string { return "" }
	old := goos
	goos = "darwin"
	defer func() { goos = old }()
	for name, run := range map[string]func(*strings.Builder) int{
		"lemon node join": func(w *strings.Builder) int {
			return runNodeJoin(context.Background(), []string{"--controller", "ws://127.0.0.1:1/ws"}, noEnv, w)
		},
		"lemon dev": func(w *strings.Builder) int { return runDev(context.Background(), nil, noEnv, w, w) },
	} {
		var out strings.Builder
		if code := run(&out); code != 1 || !strings.Contains(out.String(), name+": the node runs on Linux only (this binary is for darwin/") {
			t.Fatalf("%s: exit %d, %q", name, code, out.String())
		}
	}
}
