//go:build !wasip1

package fs_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"lemon/host/hosttest"
	"lemon/protocol"
)

// BenchmarkRatioWrite: node.fs.write of 4 KiB with a revision
// (expectedModifiedAtMs, the compare-and-swap) through the module, the
// gate and fs.write_at, against the same work natively: under a lock,
// lstat and compare the mtime, open, pwrite, ftruncate, fstat (and the
// mtime bump the CAS rule needs). docs/BENCHMARKS.md, "Module ABI".
func BenchmarkRatioWrite(b *testing.B) {
	f := newFixture(b)
	data := make([]byte, 4096)
	rand.Read(data)
	enc := base64.StdEncoding.EncodeToString(data)
	modPath, natPath := filepath.Join(f.root, "mod.bin"), filepath.Join(f.root, "nat.bin")
	for _, p := range []string{modPath, natPath} {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	fi, _ := os.Stat(modPath)
	modRev := fi.ModTime().UnixMilli()
	fi, _ = os.Stat(natPath)
	natRev := fi.ModTime().UnixMilli()
	var mu sync.Mutex
	module := func() error {
		args := `{"nodeId":"n1","path":"mod.bin","dataBase64":"` + enc + `","offset":0,"truncate":true,"expectedModifiedAtMs":` + fmt.Sprint(modRev) + `}`
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out, perr := f.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "w", NodeID: "n1", Method: "node.fs.write", Args: json.RawMessage(args)})
		if perr != nil {
			return perr
		}
		var r protocol.FSWriteResult
		if err := json.Unmarshal(out, &r); err != nil || r.BytesWritten != 4096 {
			return fmt.Errorf("write result %s", out)
		}
		modRev = r.MtimeMs
		return nil
	}
	native := func() error {
		mu.Lock()
		defer mu.Unlock()
		var st syscall.Stat_t
		if err := syscall.Lstat(natPath, &st); err != nil {
			return err
		}
		if st.Mtim.Sec*1000+st.Mtim.Nsec/1e6 != natRev {
			return errors.New("native revision conflict")
		}
		fd, err := syscall.Open(natPath, syscall.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer syscall.Close(fd)
		if _, err := syscall.Pwrite(fd, data, 0); err != nil {
			return err
		}
		if err := syscall.Ftruncate(fd, int64(len(data))); err != nil {
			return err
		}
		if err := syscall.Fstat(fd, &st); err != nil {
			return err
		}
		ms := st.Mtim.Sec*1000 + st.Mtim.Nsec/1e6
		if ms <= natRev {
			ms = natRev + 1
			ts := []syscall.Timespec{syscall.NsecToTimespec(ms * 1e6), syscall.NsecToTimespec(ms * 1e6)}
			if err := syscall.UtimesNano(natPath, ts); err != nil {
				return err
			}
		}
		natRev = ms
		return nil
	}
	hosttest.SideBySide(b, module, native)
}

// BenchmarkRatioDeletePreview500 (report only): node.fs.delete.preview of
// a directory of 500 files (recursive) through the module, fs.walk and
// the module's volatile store, against the same work natively: read the
// directory, lstat every entry, hash each entry's identity, make a token.
func BenchmarkRatioDeletePreview500(b *testing.B) {
	f := newFixture(b)
	f.files(b, "big", 500)
	dir := filepath.Join(f.root, "big")
	args := json.RawMessage(`{"nodeId":"n1","path":"big","recursive":true}`)
	module := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out, perr := f.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "p", NodeID: "n1", Method: "node.fs.delete.preview", Args: args})
		if perr != nil {
			return perr
		}
		var r protocol.FSDeletePreviewResult
		if err := json.Unmarshal(out, &r); err != nil || r.CandidateCount != 501 {
			return fmt.Errorf("preview %s", out)
		}
		return nil
	}
	native := func() error {
		d, err := os.Open(dir)
		if err != nil {
			return err
		}
		names, err := d.Readdirnames(-1)
		d.Close()
		if err != nil {
			return err
		}
		sort.Strings(names)
		h := sha256.New()
		var buf [8]byte
		for _, n := range names {
			var st syscall.Stat_t
			if err := syscall.Lstat(dir+"/"+n, &st); err != nil {
				return err
			}
			h.Write([]byte(n))
			for _, v := range []uint64{st.Dev, st.Ino, uint64(st.Mode), uint64(st.Size), uint64(st.Mtim.Nano())} {
				binary.BigEndian.PutUint64(buf[:], v)
				h.Write(buf[:])
			}
		}
		var tok [32]byte
		rand.Read(tok[:])
		_ = sha256.Sum256(tok[:])
		if len(h.Sum(nil)) != 32 || len(names) != 500 {
			return errors.New("native walk")
		}
		return nil
	}
	hosttest.SideBySide(b, module, native)
}
