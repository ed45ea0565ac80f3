package guest_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"lemon/hostcalls/guest"
)

// BenchmarkChecksum8MiB hashes an 8 MiB file from a real guest the way a
// checksum family does: fs.read chunk by chunk into blobs, each fed to
// blob.hash_update (and freed), then blob.hash_sum. The guest never
// holds the bytes.
func BenchmarkChecksum8MiB(b *testing.B) {
	n := newNode(b, guest.Config{})
	data := bytes.Repeat([]byte("0123456789abcdef"), 512<<10)
	p := filepath.Join(n.dir, "f.bin")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		b.Fatal(err)
	}
	n.mustCall(b, "guest.checksum", map[string]any{"path": p})
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		n.mustCall(b, "guest.checksum", map[string]any{"path": p})
	}
}

// BenchmarkLogWrite100 writes 100 guest log records per op (one request)
// to a JSON handler writing to a buffer, with a bucket that never empties.
func BenchmarkLogWrite100(b *testing.B) {
	n := newNode(b, guest.Config{LogPerSecond: 1e9, LogBurst: 1 << 30})
	n.mustCall(b, "guest.logmany", map[string]any{"count": 100})
	b.ResetTimer()
	for range b.N {
		out := n.mustCall(b, "guest.logmany", map[string]any{"count": 100})
		if out["logged"] != float64(100) {
			b.Fatalf("logged %v", out["logged"])
		}
	}
}
