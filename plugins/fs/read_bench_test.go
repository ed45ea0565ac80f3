//go:build !wasip1

package fs_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"lemon/host/hosttest"
	"lemon/plugins/fs/shape"
	"lemon/protocol"
)

// Ratio benchmarks of issue 11 (docs/BENCHMARKS.md, "Module ABI"): each
// interleaves the method through the real host and module with the same
// work in plain Go. Rerun:
//
//	go test -run '^$' -bench 'BenchmarkRatio' -benchtime 2000x ./plugins/fs/

// BenchmarkRatioStat: node.fs.stat through the module (bound: module p50
// ≤ 30 µs) beside a native stat + access checks + payload encode.
func BenchmarkRatioStat(b *testing.B) {
	f := newFixture(b)
	f.files(b, "big", 1)
	path := filepath.Join(f.root, "big", "file-000000.txt")
	args := `{"nodeId":"n1","path":"big/file-000000.txt"}`
	hosttest.SideBySide(b, func() error {
		_, perr := f.invoke(b, "node.fs.stat", args)
		return asErr(perr)
	}, func() error {
		_, err := nativeStat(path)
		return err
	})
}

// BenchmarkRatioList500: a 500-entry node.fs.list through the module
// (bound: ≤ 2× native) beside os.File.Readdirnames + lstat + access
// checks + the same payload encoded with encoding/json.
func BenchmarkRatioList500(b *testing.B) {
	f := newFixture(b)
	f.files(b, "big", 500)
	dir := filepath.Join(f.root, "big")
	args := `{"nodeId":"n1","path":"big"}`
	hosttest.SideBySide(b, func() error {
		out, perr := f.invoke(b, "node.fs.list", args)
		if perr == nil && len(out) < 500*100 {
			return errors.New("short listing")
		}
		return asErr(perr)
	}, func() error {
		_, err := nativeList(dir, false)
		return err
	})
}

// BenchmarkRatioRead1MiB: a 1 MiB node.fs.read through the module
// (bound: ≤ 1.3× native) beside a native open + read + base64 + payload
// encode.
func BenchmarkRatioRead1MiB(b *testing.B) {
	f := newFixture(b)
	path := filepath.Join(f.root, "chunk.bin")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o644); err != nil {
		b.Fatal(err)
	}
	args := `{"nodeId":"n1","path":"chunk.bin"}`
	b.SetBytes(1 << 20)
	hosttest.SideBySide(b, func() error {
		out, perr := f.invoke(b, "node.fs.read", args)
		if perr == nil && len(out) < 4<<20/3 {
			return errors.New("short read")
		}
		return asErr(perr)
	}, func() error {
		fh, err := os.Open(path)
		if err != nil {
			return err
		}
		defer fh.Close()
		st, err := fh.Stat()
		if err != nil {
			return err
		}
		buf := make([]byte, protocol.FSMaxReadLength)
		n, err := fh.ReadAt(buf, 0)
		if n == 0 && err != nil {
			return err
		}
		_, err = json.Marshal(protocol.FSReadResult{Path: path, DataBase64: base64.StdEncoding.EncodeToString(buf[:n]),
			Length: int64(n), Size: st.Size(), Mime: shape.MIME(path), EOF: int64(n) >= st.Size()})
		return err
	})
}

func asErr(perr *protocol.Error) error {
	if perr == nil {
		return nil
	}
	return perr
}
