package fs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"lemon/hostcalls"
	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// Benchmarks of 1 MiB reads and writes and of stat: through the host-call
// table (JSON args, confinement walk, blob hand-off) and natively with the
// os package on the same file, for the ratio in docs/BENCHMARKS.md.

func benchEnv(b *testing.B) (*env, []byte) {
	data := bytes.Repeat([]byte("0123456789abcdef"), (1<<20)/16)
	e := newEnv(b, []node{{path: "root/dir/sub/file.bin", file: string(data)}}, "root")
	return e, data
}

func hostCall(e *env, name string) hostcalls.Func {
	for _, hc := range e.f.Table() {
		if hc.Name == name {
			return hc.JSONFunc()
		}
	}
	panic(name)
}

func BenchmarkRead1MiBHostCall(b *testing.B) {
	e, data := benchEnv(b)
	fn := hostCall(e, "fs.read")
	args := []byte(`{"path":"dir/sub/file.bin","offset":0,"length":1048576}`)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		call := newCall()
		out, err := fn(context.Background(), call, args)
		if err != nil {
			b.Fatal(err)
		}
		var r protocol.FSReadCall
		json.Unmarshal(out, &r)
		if got, _ := call.Blob(r.Blob); len(got) != len(data) {
			b.Fatal("short read")
		}
	}
}

func BenchmarkRead1MiBNative(b *testing.B) {
	e, data := benchEnv(b)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		f, err := os.Open(e.abs("root/dir/sub/file.bin"))
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 1<<20)
		if n, _ := f.ReadAt(buf, 0); n != len(data) {
			b.Fatal("short read")
		}
		f.Close()
	}
}

func BenchmarkWrite1MiBHostCall(b *testing.B) {
	e, data := benchEnv(b)
	fn := hostCall(e, "fs.write_at")
	rev := e.mtime("root/dir/sub/file.bin")
	call := newCall()
	id := call.PutBlob(data)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		lo, hi := rev*1e6, rev*1e6+999_999
		args, _ := json.Marshal(contract.FSWriteAtArgs{Path: "dir/sub/file.bin", Blob: id, Truncate: true,
			Expect: contract.FSExpect{MtimeNsMin: &lo, MtimeNsMax: &hi}, MtimeNsAfter: hi + 1})
		out, err := fn(context.Background(), call, args)
		if err != nil {
			b.Fatal(err)
		}
		var r contract.FSWriteAtResult
		json.Unmarshal(out, &r)
		rev = r.MtimeNs / 1e6
	}
}

func BenchmarkWrite1MiBNative(b *testing.B) {
	e, data := benchEnv(b)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		f, err := os.OpenFile(e.abs("root/dir/sub/file.bin"), os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.WriteAt(data, 0); err != nil {
			b.Fatal(err)
		}
		f.Truncate(int64(len(data)))
		f.Close()
	}
}

func BenchmarkStatHostCall(b *testing.B) {
	e, _ := benchEnv(b)
	fn := hostCall(e, "fs.open")
	args := []byte(`{"path":"dir/sub/file.bin"}`)
	for b.Loop() {
		c := newCall()
		_, err := fn(context.Background(), c, args)
		c.end()
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStatNative(b *testing.B) {
	e, _ := benchEnv(b)
	for b.Loop() {
		if _, err := os.Stat(e.abs("root/dir/sub/file.bin")); err != nil {
			b.Fatal(err)
		}
	}
}

// benchDir500 makes root/big with 500 empty files named file-NNNNNN.txt.
func benchDir500(b *testing.B) *env {
	e := newEnv(b, nil, "root")
	if err := os.Mkdir(e.abs("root/big"), 0o755); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 500; i++ {
		if err := os.WriteFile(e.abs(fmt.Sprintf("root/big/file-%06d.txt", i)), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return e
}

// BenchmarkList500Primitives: the host side of a 500-entry node.fs.list:
// fs.open, fs.readdir and fs.statat of the 500 names (lstat and two
// access checks per entry) through the host-call table, without wasm;
// compare plugins/fs BenchmarkRatioList500.
func BenchmarkList500Primitives(b *testing.B) {
	e := benchDir500(b)
	open, readdir, statat := hostCall(e, "fs.open"), hostCall(e, "fs.readdir"), hostCall(e, "fs.statat")
	names := make([]string, 500)
	for i := range names {
		names[i] = fmt.Sprintf("file-%06d.txt", i)
	}
	args, _ := json.Marshal(map[string]any{"handle": 1, "names": names})
	for b.Loop() {
		call := newCall()
		_, err := open(context.Background(), call, []byte(`{"path":"big"}`))
		if err == nil {
			_, err = readdir(context.Background(), call, []byte(`{"handle":1}`))
		}
		if err == nil {
			_, err = statat(context.Background(), call, args)
		}
		call.end()
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkList500Native: os.ReadDir and an lstat per entry of the same
// directory (no access checks, no JSON).
func BenchmarkList500Native(b *testing.B) {
	e := benchDir500(b)
	for b.Loop() {
		ents, err := os.ReadDir(e.abs("root/big"))
		if err != nil || len(ents) != 500 {
			b.Fatal(err)
		}
		for _, d := range ents {
			if _, err := d.Info(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkStatHostCallWorkspace is BenchmarkStatHostCall under an
// execution context's workspace: every call resolves and pins the
// workspace directory (FS.Workspace) before its own walk.
func BenchmarkStatHostCallWorkspace(b *testing.B) {
	e, _ := benchEnv(b)
	fn := hostCall(e, "fs.open")
	args := []byte(`{"path":"sub/file.bin"}`)
	for b.Loop() {
		call := newCall()
		call.auth.Workspace = e.abs("root/dir")
		_, err := fn(context.Background(), call, args)
		call.end()
		if err != nil {
			b.Fatal(err)
		}
	}
}
