package controller

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"lemon/client/tlsdev"
)

// TestAdv3LoadTLSNotRegular: a --tls-cert/--tls-key naming a FIFO or a
// device is refused at once; a real pair loads.
func TestAdv3LoadTLSNotRegular(t *testing.T) {
	dir := t.TempDir()
	f, err := tlsdev.Write(dir, []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTLS(f.Cert, f.Key); err != nil {
		t.Fatalf("a real pair: %v", err)
	}
	fifo := filepath.Join(dir, "fifo.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	for name, pair := range map[string][2]string{"fifo cert": {fifo, f.Key}, "fifo key": {f.Cert, fifo},
		"zero key": {f.Cert, "/dev/zero"}} {
		done := make(chan error, 1)
		go func() { _, err := LoadTLS(pair[0], pair[1]); done <- err }()
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("%s: loaded", name)
			}
		case <-time.After(10 * time.Second):
			if w, e := os.OpenFile(fifo, os.O_WRONLY, 0); e == nil {
				w.Close()
			}
			t.Fatalf("%s: LoadTLS blocked", name)
		}
	}
}

// TestAdv3OperatorNameControl: a Config whose operator name holds a
// control character is refused by New (every node request of the entry
// would otherwise fail INTERNAL building its context).
func TestAdv3OperatorNameControl(t *testing.T) {
	cfg := testConfig()
	cfg.Operators[0].Name = "ad\x1bmin"
	if s, err := New(cfg); err == nil {
		s.Close()
		t.Fatal("accepted")
	}
}
