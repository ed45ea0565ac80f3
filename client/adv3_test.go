package client_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lemon/client"
)

// TestAdv3CAFileNotRegular: a FIFO, a directory or a device given as
// --ca-file is refused at once with ErrCAFile, never read or waited on
// (opening a FIFO with no writer blocks forever).
func TestAdv3CAFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "canary-fifo.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	for name, path := range map[string]string{"fifo": fifo, "directory": dir, "device": os.DevNull} {
		done := make(chan error, 1)
		go func() { _, err := client.LoadCAFile(path); done <- err }()
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			// Unblock the open so the goroutine ends.
			if f, e := os.OpenFile(fifo, os.O_WRONLY, 0); e == nil {
				f.Close()
			}
			t.Fatalf("%s: LoadCAFile still blocked after 10 s", name)
		}
		if err == nil || !errors.Is(err, client.ErrCAFile) {
			t.Fatalf("%s: %v, want ErrCAFile", name, err)
		}
		if strings.Contains(err.Error(), "canary") || strings.Contains(err.Error(), dir) {
			t.Fatalf("%s: error names the path: %v", name, err)
		}
	}
}
