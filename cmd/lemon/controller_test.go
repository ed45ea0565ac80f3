package main

import (
	"bytes"
	"net"
	"strings"
	"testing"
)

// A controller that cannot bind says why, once, without Go's
// "listen tcp" prefix: the port is taken.
func TestControllerListenFailureNamesTheReason(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	var out bytes.Buffer
	noEnv := func(string) string { return "" }
	if code := runController([]string{"--listen", addr, "--state", t.TempDir()}, noEnv, &out); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	stderr := out.String()
	want := "lemon controller: cannot listen on " + addr + ": bind: address already in use\n"
	if !strings.HasSuffix(stderr, want) || strings.Contains(stderr, "listen tcp") {
		t.Fatalf("stderr %q, want it to end with %q", stderr, want)
	}
}
