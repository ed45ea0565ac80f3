package client_test

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lemon/client"
	"lemon/client/fakecontrol"
	"lemon/client/tlsdev"
)

// tlsServer starts a fake controller serving certPEM/keyPEM and returns it
// with the CA file dialers need.
func tlsServer(t *testing.T, hosts []string, notBefore, notAfter time.Time) (*fakecontrol.Server, string) {
	t.Helper()
	ca, err := tlsdev.NewCA("test CA", time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(hosts, notBefore, notAfter)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := fakecontrol.New(fakecontrol.Options{OperatorToken: opToken, Handle: echoHandler(nil),
		TLS: &tls.Config{Certificates: []tls.Certificate{pair}}})
	t.Cleanup(srv.Close)
	return srv, caFile
}

func dialReason(t *testing.T, url string, opts client.Options) string {
	t.Helper()
	opts.Token = opToken
	opts.HandshakeTimeout = 10 * time.Second
	c, err := client.Dial(context.Background(), url, opts)
	if err == nil {
		c.Close()
		t.Fatalf("dial %s succeeded", url)
	}
	var de *client.DialError
	if !errors.As(err, &de) {
		t.Fatalf("dial error %T %v, want *DialError", err, err)
	}
	if strings.Contains(err.Error(), opToken) {
		t.Fatalf("error leaks the token: %v", err)
	}
	return de.Reason
}

func TestDialTLSWithCAFile(t *testing.T) {
	t.Setenv(client.EnvCAFile, "")
	now := time.Now()
	srv, caFile := tlsServer(t, []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour))
	if !strings.HasPrefix(srv.URL, "wss://") {
		t.Fatalf("URL %s", srv.URL)
	}
	c, err := client.Dial(context.Background(), srv.URL, client.Options{Token: opToken, CAFile: caFile})
	if err != nil {
		t.Fatalf("dial with --ca-file: %v", err)
	}
	c.Close()
	// The same through the environment.
	t.Setenv(client.EnvCAFile, caFile)
	c, err = client.Dial(context.Background(), srv.URL, client.Options{Token: opToken})
	if err != nil {
		t.Fatalf("dial with %s: %v", client.EnvCAFile, err)
	}
	c.Close()
}

func TestDialTLSFailureMessages(t *testing.T) {
	t.Setenv(client.EnvCAFile, "")
	now := time.Now()
	good, caFile := tlsServer(t, []string{"127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour))
	wrongHost, wrongCA := tlsServer(t, []string{"elsewhere.example"}, now.Add(-time.Hour), now.Add(time.Hour))
	expired, expiredCA := tlsServer(t, []string{"127.0.0.1"}, now.Add(-2*time.Hour), now.Add(-time.Hour))
	plain := fakecontrol.New(fakecontrol.Options{OperatorToken: opToken, Handle: echoHandler(nil)})
	t.Cleanup(plain.Close)

	cases := []struct {
		name, url, ca, want string
	}{
		{"unknown CA", good.URL, "", client.ReasonUnknownCA},
		{"wrong host name", wrongHost.URL, wrongCA, client.ReasonWrongHost},
		{"expired", expired.URL, expiredCA, client.ReasonExpired},
		{"ws against TLS", "ws://" + strings.TrimPrefix(good.URL, "wss://"), caFile, client.ReasonWantWSS},
		{"wss against plain", "wss://" + strings.TrimPrefix(plain.URL, "ws://"), caFile, client.ReasonWantWS},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := dialReason(t, tc.url, client.Options{CAFile: tc.ca}); got != tc.want {
				t.Fatalf("reason %q, want %q", got, tc.want)
			}
		})
	}
	if !strings.Contains(client.ReasonUnknownCA, "--ca-file") || !strings.Contains(client.ReasonUnknownCA, client.EnvCAFile) {
		t.Fatalf("the unknown-CA message does not say what to do: %q", client.ReasonUnknownCA)
	}
}

func TestDialCAFileRefused(t *testing.T) {
	t.Setenv(client.EnvCAFile, "")
	dir := t.TempDir()
	empty := filepath.Join(dir, "secret-dir-canary", "none.pem")
	os.MkdirAll(filepath.Dir(empty), 0o755)
	os.WriteFile(empty, []byte("not a certificate"), 0o644)
	big := filepath.Join(dir, "big.pem")
	os.WriteFile(big, make([]byte, 1<<20+1), 0o644)
	limit := filepath.Join(dir, "limit.pem")
	// Exactly 1 MiB: a valid bundle padded with a trailing comment line.
	ca, err := tlsdev.NewCA("x", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	pad := make([]byte, 1<<20-len(ca.PEM))
	for i := range pad {
		pad[i] = '#'
	}
	os.WriteFile(limit, append(append([]byte{}, ca.PEM...), pad...), 0o644)
	if _, err := client.LoadCAFile(limit); err != nil {
		t.Fatalf("a 1 MiB bundle: %v", err)
	}
	for name, path := range map[string]string{"no certificate": empty, "over 1 MiB": big,
		"missing": filepath.Join(dir, "secret-dir-canary", "missing.pem")} {
		_, err := client.Dial(context.Background(), "wss://127.0.0.1:1/ws", client.Options{Token: opToken, CAFile: path})
		if err == nil || !errors.Is(err, client.ErrCAFile) {
			t.Fatalf("%s: %v, want ErrCAFile", name, err)
		}
		if strings.Contains(err.Error(), "secret-dir-canary") || strings.Contains(err.Error(), dir) {
			t.Fatalf("%s: error names the path: %v", name, err)
		}
	}
}
