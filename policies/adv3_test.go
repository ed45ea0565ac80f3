package policies

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAdv3PolicyFileBounded: a policy path naming a FIFO or a device
// (/dev/zero would fill memory) is refused at once, and a file one byte
// past MaxPolicyFileBytes before it is parsed.
func TestAdv3PolicyFileBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	big := filepath.Join(dir, "big.toml")
	os.WriteFile(big, []byte("#"+strings.Repeat("x", MaxPolicyFileBytes)), 0o600)
	for name, path := range map[string]string{"fifo": fifo, "zero": "/dev/zero", "big": big} {
		for _, load := range []func(string) error{
			func(p string) error { _, err := LoadWorker(p); return err },
			func(p string) error { _, err := LoadController(p); return err },
		} {
			done := make(chan error, 1)
			go func() { done <- load(path) }()
			select {
			case err := <-done:
				if err == nil {
					t.Fatalf("%s: loaded", name)
				}
			case <-time.After(10 * time.Second):
				if f, e := os.OpenFile(fifo, os.O_WRONLY, 0); e == nil {
					f.Close()
				}
				t.Fatalf("%s: still reading after 10 s", name)
			}
		}
	}
}
