package regfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestAdv3ReadBounds: at the limit passes, one past is ErrTooLarge; a
// FIFO (no writer), a directory and a device are ErrNotRegular at once.
func TestAdv3ReadBounds(t *testing.T) {
	dir := t.TempDir()
	at := filepath.Join(dir, "at")
	os.WriteFile(at, make([]byte, 1000), 0o600)
	if b, err := Read(at, 1000); err != nil || len(b) != 1000 {
		t.Fatalf("at the limit: %d bytes, %v", len(b), err)
	}
	if _, err := Read(at, 999); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("one past the limit: %v, want ErrTooLarge", err)
	}
	if _, err := Read(os.DevNull, 10); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("device: %v", err)
	}
	if _, err := Read(dir, 10); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("directory: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	done := make(chan error, 1)
	go func() { _, err := Read(fifo, 10); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Fatalf("fifo: %v", err)
		}
	case <-time.After(10 * time.Second):
		if f, e := os.OpenFile(fifo, os.O_WRONLY, 0); e == nil {
			f.Close()
		}
		t.Fatal("fifo: Read blocked")
	}
	if _, err := Read(filepath.Join(dir, "missing"), 10); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
}
