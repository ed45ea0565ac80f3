package vault

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestAdv3KeyFileFifo: a vault key_file naming a FIFO is refused at once
// (ErrKeyFileMode) instead of blocking the node's start on open.
func TestAdv3KeyFileFifo(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "key")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	done := make(chan error, 1)
	go func() { _, err := LoadKeyFile(fifo); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrKeyFileMode) {
			t.Fatalf("%v, want ErrKeyFileMode", err)
		}
	case <-time.After(10 * time.Second):
		if f, e := os.OpenFile(fifo, os.O_WRONLY, 0); e == nil {
			f.Close()
		}
		t.Fatal("LoadKeyFile blocked on a FIFO")
	}
	if _, err := LoadKeyFile(os.DevNull); !errors.Is(err, ErrKeyFileMode) {
		t.Fatalf("a device: %v", err)
	}
}
