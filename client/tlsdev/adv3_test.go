package tlsdev_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"lemon/client/tlsdev"
)

// TestAdv3WriteCAFifo: `lemon tls dev` over a directory whose ca.pem and
// ca-key.pem are FIFOs refuses at once instead of waiting for a writer.
func TestAdv3WriteCAFifo(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{tlsdev.CAFile, tlsdev.CAKey} {
		if err := syscall.Mkfifo(filepath.Join(dir, n), 0o600); err != nil {
			t.Skip("no FIFOs here:", err)
		}
	}
	done := make(chan error, 1)
	go func() { _, err := tlsdev.Write(dir, []string{"localhost"}); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("wrote over FIFOs")
		}
	case <-time.After(10 * time.Second):
		for _, n := range []string{tlsdev.CAFile, tlsdev.CAKey} {
			if f, e := os.OpenFile(filepath.Join(dir, n), os.O_WRONLY, 0); e == nil {
				f.Close()
			}
		}
		t.Fatal("tls dev blocked on a FIFO")
	}
}

// TestAdv3HostsMistypedIP: a host that is not an IP address but ends in
// an all-digit label (a mistyped address) is refused instead of becoming
// a DNS name no client matches; names and addresses next to it pass.
func TestAdv3HostsMistypedIP(t *testing.T) {
	for _, bad := range []string{"1.2.3.4.5", "10.0.0.256", "010.0.0.1", "host.123", "7"} {
		if _, _, err := tlsdev.ParseHosts([]string{bad}); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	for _, good := range []string{"10.0.0.5", "::1", "host1", "1host.example", "example.c0m", "*.example.com", "localhost"} {
		if _, _, err := tlsdev.ParseHosts([]string{good}); err != nil {
			t.Errorf("%s: %v", good, err)
		}
	}
}
