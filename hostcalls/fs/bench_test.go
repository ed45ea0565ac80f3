package fs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"lemon/hostcalls"
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
			return hc.Func
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
	fn := hostCall(e, "fs.write")
	rev := e.mtime("root/dir/sub/file.bin")
	call := newCall()
	id := call.PutBlob(data)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		args, _ := json.Marshal(protocol.FSWriteCall{Path: "dir/sub/file.bin", Blob: id, Truncate: true, ExpectedModifiedAtMs: &rev})
		out, err := fn(context.Background(), call, args)
		if err != nil {
			b.Fatal(err)
		}
		var r protocol.FSWriteResult
		json.Unmarshal(out, &r)
		rev = r.MtimeMs
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

// BenchmarkList500PayloadHostCall: fs.list_payload of 500 entries through
// the host-call table (lstat and two access checks per entry, MIME types,
// the ~100 KB payload JSON and its blob), without wasm; compare
// plugins/fs BenchmarkList500ThroughHost.
func BenchmarkList500PayloadHostCall(b *testing.B) {
	e := benchDir500(b)
	fn := hostCall(e, "fs.list_payload")
	args := []byte(`{"path":"big","showHidden":false}`)
	for b.Loop() {
		call := newCall()
		if _, err := fn(context.Background(), call, args); err != nil {
			b.Fatal(err)
		}
		if len(call.blobs[1]) < 500*100 {
			b.Fatal("short listing")
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
