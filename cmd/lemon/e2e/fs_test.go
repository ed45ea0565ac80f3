package e2e

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
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

// TestDevListDeepMaximalNames is issue 9's listing through `lemon dev`
// with the default 1 MiB maxPayload: 17 nested directories with 200-byte
// names (the last adjusted so the canonical path is exactly 3,438 bytes)
// holding 500 files with 255-byte names. node.fs.list answers all 500
// entries, each without a path field (it was payload_too_large, marked
// not retry-safe, while every entry repeated the directory's path).
func TestDevListDeepMaximalNames(t *testing.T) {
	d := startDev(t, t.TempDir())
	base, err := filepath.EvalSymlinks(d.cwd)
	if err != nil {
		t.Fatal(err)
	}
	const depth, nameLen, want = 17, 200, 3438
	last := nameLen + want - (len(base) + depth*(nameLen+1))
	if last < 1 || last > 255 {
		t.Skipf("temp dir %q is too long to build a %d-byte path", base, want)
	}
	dir := base
	for i := 0; i < depth; i++ {
		n := nameLen
		if i == depth-1 {
			n = last
		}
		dir += "/" + strings.Repeat(string(rune('a'+i)), n)
	}
	if len(dir) != want {
		t.Fatalf("fixture path is %d bytes", len(dir))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 500; i++ {
		name := strings.Repeat("x", 252) + fmt.Sprintf("%03d", i)
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := d.op.call(t, "node.fs.list", map[string]any{"nodeId": d.nodeID, "path": dir})
	if r.code != 0 {
		t.Fatalf("node.fs.list: exit %d: %s", r.code, r.stderr)
	}
	var out struct {
		Path      string           `json:"path"`
		Entries   []map[string]any `json:"entries"`
		Truncated bool             `json:"truncated"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Path != dir || len(out.Entries) != 500 || out.Truncated {
		t.Fatalf("listing: path %d bytes, %d entries, truncated %v", len(out.Path), len(out.Entries), out.Truncated)
	}
	for _, e := range out.Entries {
		if _, ok := e["path"]; ok || e["type"] != "regular" || len(e["name"].(string)) != 255 {
			t.Fatalf("entry %v", e)
		}
	}
	t.Logf("500 entries under a %d-byte path: %d-byte payload", len(dir), len(r.stdout))
}
