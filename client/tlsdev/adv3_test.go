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
