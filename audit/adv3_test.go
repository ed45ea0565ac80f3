package audit

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAdv3OpenNotRegular: --audit-file naming a FIFO without a reader, a
// device or a directory is refused at once, naming no path; a regular
// file opens.
func TestAdv3OpenNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "canary-fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	for name, path := range map[string]string{"fifo": fifo, "device": os.DevNull, "directory": dir} {
		done := make(chan error, 1)
		go func() {
			s, err := Open(Config{File: path})
			if s != nil {
				s.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("%s: opened", name)
			}
			if strings.Contains(err.Error(), "canary") || strings.Contains(err.Error(), dir) {
				t.Fatalf("%s: error names the path: %v", name, err)
			}
		case <-time.After(10 * time.Second):
			if r, e := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); e == nil {
				r.Close()
			}
			t.Fatalf("%s: Open blocked", name)
		}
	}
	s, err := Open(Config{File: filepath.Join(dir, "audit.jsonl")})
	if err != nil {
		t.Fatalf("a regular file: %v", err)
	}
	s.Close()
}
