package e2e

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fileMiB is the size of the round trip of issue 3's "Must show".
const fileMiB = 100

// TestFSPutGet100MiB is issue 3's "Must show": `lemon fs put` then
// `lemon fs get` of 100 MiB of random bytes through `lemon dev`
// round-trips byte-identical. It logs MiB/s each way.
func TestFSPutGet100MiB(t *testing.T) {
	d := startDev(t, t.TempDir())
	local := t.TempDir()
	src := filepath.Join(local, "src.bin")
	want := writeRandomFile(t, src, fileMiB<<20)

	// fsCmd runs lemon fs and returns its wall time and the CPU time
	// that lemon fs and lemon dev spent meanwhile.
	type cost struct{ wall, cliCPU, devCPU time.Duration }
	fsCmd := func(args ...string) cost {
		t.Helper()
		devBefore := cpuTime(d.p.cmd.Process.Pid)
		start := time.Now()
		r := run(t, local, env(d.op.home, "LEMON_OPERATOR_TOKEN="+d.token),
			nil, append([]string{"fs", "--controller", d.url}, args...)...)
		c := cost{wall: time.Since(start), cliCPU: r.cpu, devCPU: cpuTime(d.p.cmd.Process.Pid) - devBefore}
		if r.code != 0 {
			t.Fatalf("lemon fs %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
		}
		return c
	}
	// The node resolves "big.bin" against its default cwd.
	put := fsCmd("put", d.nodeName, src, "big.bin")
	if got := fileSHA256(t, filepath.Join(d.cwd, "big.bin")); got != want {
		t.Fatalf("the node's copy differs: sha256 %s, want %s", got, want)
	}
	back := filepath.Join(local, "back.bin")
	get := fsCmd("get", d.nodeID, "big.bin", back)
	if got := fileSHA256(t, back); got != want {
		t.Fatalf("lemon fs get returned different bytes: sha256 %s, want %s", got, want)
	}
	for _, x := range []struct {
		dir string
		c   cost
	}{{"put", put}, {"get", get}} {
		t.Logf("%d MiB %s through lemon dev: %.1f s, %.1f MiB/s; CPU: lemon dev %.1f s (%.0f ms/MiB), lemon fs %.1f s",
			fileMiB, x.dir, x.c.wall.Seconds(), fileMiB/x.c.wall.Seconds(), x.c.devCPU.Seconds(),
			float64(x.c.devCPU.Milliseconds())/fileMiB, x.c.cliCPU.Seconds())
	}
	t.Logf("sha256 of all three copies: %s", want)
}

// writeRandomFile writes n random bytes to path and returns their sha256.
func writeRandomFile(t *testing.T, path string, n int64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, n); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
