//go:build !wasip1

package fs_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"lemon/protocol"
)

// The 1 MiB read and write through the wasm module, the gate and the
// blob path; compare with BenchmarkRead1MiBNative / BenchmarkWrite1MiBNative
// in hostcalls/fs (the same operation done natively in Go).

func BenchmarkRead1MiBThroughModule(b *testing.B) {
	f := newFixture(b)
	data := make([]byte, 1<<20)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(f.root, "big.bin"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	args := `{"nodeId":"n1","path":"big.bin","offset":0,"length":1048576}`
	b.SetBytes(1 << 20)
	for b.Loop() {
		out, perr := f.invoke(b, "node.fs.read", args)
		if perr != nil {
			b.Fatal(perr)
		}
		if len(out) < 1<<20 {
			b.Fatalf("short read payload: %d bytes", len(out))
		}
	}
}

func BenchmarkWrite1MiBThroughModule(b *testing.B) {
	f := newFixture(b)
	data := make([]byte, 1<<20)
	rand.Read(data)
	enc := base64.StdEncoding.EncodeToString(data)
	ctx := context.Background()
	var mtime int64
	b.SetBytes(1 << 20)
	i := 0
	for b.Loop() {
		args := `{"nodeId":"n1","path":"out.bin","dataBase64":"` + enc + `","offset":0,"truncate":true,"expectedModifiedAtMs":` + fmt.Sprint(mtime) + `}`
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		out, perr := f.h.Invoke(cctx, protocol.InvokeRequest{InvokeID: "w", NodeID: "n1", Method: "node.fs.write", Args: json.RawMessage(args)})
		cancel()
		if perr != nil {
			b.Fatalf("write %d: %v", i, perr)
		}
		var r struct {
			MtimeMs int64 `json:"mtimeMs"`
		}
		json.Unmarshal(out, &r)
		mtime = r.MtimeMs
		i++
	}
	b.StopTimer()
	got, err := os.ReadFile(filepath.Join(f.root, "out.bin"))
	if err != nil || !bytes.Equal(got, data) {
		b.Fatal("written file differs")
	}
}
