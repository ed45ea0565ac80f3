package main

import (
	"bytes"
	"net"
	"strings"
	"testing"
)

// Cluster flags that do not fit together, or a missing or malformed
// secret, stop the controller before it starts, and no message repeats
// the secret.
func TestControllerClusterFlagErrors(t *testing.T) {
	const canary = "canary:cluster-secret-0123456789"
	noEnv := func(string) string { return "" }
	cases := []struct {
		args   []string
		secret string
		want   string
	}{
		{[]string{"--cluster-peers", "127.0.0.1:7251"}, "", "--cluster-peers needs --cluster-listen"},
		{[]string{"--cluster-listen", "127.0.0.1:0", "--nats", "nats://127.0.0.1:4222"}, "", "exclude each other"},
		{[]string{"--cluster-listen", "127.0.0.1:0"}, "", "a cluster secret is required"},
		{[]string{"--cluster-listen", "127.0.0.1:0"}, canary, "printable ASCII"},
	}
	for _, c := range cases {
		t.Setenv("LEMON_CLUSTER_SECRET", c.secret)
		t.Setenv("LEMON_CLUSTER_SECRET_FILE", "")
		var out bytes.Buffer
		args := append([]string{"--listen", "127.0.0.1:0", "--state", t.TempDir()}, c.args...)
		if code := runController(args, noEnv, &out); code != 1 {
			t.Errorf("%v: exit code %d, want 1", c.args, code)
		}
		if s := out.String(); !strings.Contains(s, c.want) || strings.Contains(s, "canary") {
			t.Errorf("%v: stderr %q, want %q and no secret", c.args, s, c.want)
		}
	}
}

// A clustered controller says it waits for JetStream before the buckets
// exist (a cluster of one here), then goes on to listen.
func TestControllerClusterSaysItWaitsForJetStream(t *testing.T) {
	t.Setenv("LEMON_CLUSTER_SECRET", "cluster-secret-0123456789abcdef")
	t.Setenv("LEMON_CLUSTER_SECRET_FILE", "")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var out bytes.Buffer
	args := []string{"--listen", busy.Addr().String(), "--state", t.TempDir(), "--cluster-listen", "127.0.0.1:0", "--cluster-name", "c1"}
	if code := runController(args, func(string) string { return "" }, &out); code != 1 {
		t.Fatalf("exit %d, want 1 (listen address busy)\n%s", code, out.String())
	}
	s := out.String()
	w := strings.Index(s, "lemon controller: waiting for the cluster's JetStream (peers, buckets)\n")
	if w < 0 || w > strings.Index(s, "cannot listen on") {
		t.Fatalf("stderr %q", s)
	}
}
