package e2e

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"lemon/client"
	"lemon/client/transfer"
	"lemon/protocol"
)

// Issue 14's tests (docs/FS.md, "Transfers"): lemon fs get and put over
// the bulk data path, interrupted, resumed, tampered with, at 1 GiB and
// for a tree of 10,000 files.

func sparseFile(t *testing.T, path string, n int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(n); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// pseudoRandomFile writes n incompressible bytes quickly (ChaCha8) and
// returns their sha256.
func pseudoRandomFile(t *testing.T, path string, n int64) string {
	t.Helper()
	var seed [32]byte
	crand.Read(seed[:])
	r := rand.NewChaCha8(seed)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for left := n; left > 0; {
		r.Read(buf)
		k := min(int64(len(buf)), left)
		if _, err := f.Write(buf[:k]); err != nil {
			t.Fatal(err)
		}
		left -= k
	}
	f.Close()
	return fileSHA256(t, path)
}

// waitSize waits until path holds at least n bytes.
func waitSize(t *testing.T, p *proc, path string, n int64) {
	t.Helper()
	deadline := time.Now().Add(callWait)
	for time.Now().Before(deadline) {
		if fi, err := os.Stat(path); err == nil && fi.Size() >= n {
			return
		}
		if p.exited() {
			t.Fatalf("%s exited before %s reached %d bytes\n%s", p.name, path, n, p.output())
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s did not reach %d bytes", path, n)
}

// nodePart finds the part file a put of name leaves in dir.
func nodeParts(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, ".lemon-part-*"))
	return m
}

func mustNotExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("%s exists (%v); want nothing at the final name", path, err)
	}
}

// TestBulkInterruptLeavesNothing: SIGINT or SIGTERM during lemon fs put
// or get exits 130 and leaves nothing at the final name; a get also
// removes its local part file.
func TestBulkInterruptLeavesNothing(t *testing.T) {
	d := startDev(t, t.TempDir())
	local := t.TempDir()
	environ := env(d.op.home, "LEMON_OPERATOR_TOKEN="+d.token)
	const big = 4 << 30 // sparse: long enough to interrupt at any speed here
	src := filepath.Join(local, "src.bin")
	sparseFile(t, src, big)
	sparseFile(t, filepath.Join(d.cwd, "down.bin"), big)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		p := start(t, "lemon fs put", local, environ, "fs", "--controller", d.url, "put", d.nodeName, src, "up.bin")
		deadline := time.Now().Add(callWait)
		for len(nodeParts(t, d.cwd)) == 0 && time.Now().Before(deadline) && !p.exited() {
			time.Sleep(5 * time.Millisecond)
		}
		parts := nodeParts(t, d.cwd)
		if len(parts) != 1 {
			t.Fatalf("no part file on the node during put: %v\n%s", parts, p.output())
		}
		waitSize(t, p, parts[0], 1<<20)
		if code := p.signal(t, sig); code != 130 ||
			!strings.Contains(p.output(), "lemon fs: interrupted; the part file stays on the node: rerun with --resume\n") {
			t.Fatalf("put, %v: exit %d, want 130 and what the interrupt left\n%s", sig, code, p.output())
		}
		mustNotExist(t, filepath.Join(d.cwd, "up.bin"))
		os.Remove(parts[0])

		dst := filepath.Join(local, "down.bin")
		p = start(t, "lemon fs get", local, environ, "fs", "--controller", d.url, "get", d.nodeName, "down.bin", dst)
		waitSize(t, p, transfer.LocalPart(dst), 1<<20)
		if code := p.signal(t, sig); code != 130 ||
			!strings.Contains(p.output(), "lemon fs: interrupted; the partial download was removed\n") {
			t.Fatalf("get, %v: exit %d, want 130 and what the interrupt left\n%s", sig, code, p.output())
		}
		mustNotExist(t, dst)
		mustNotExist(t, transfer.LocalPart(dst))
	}
}

// relaunchDev starts `lemon dev` again on the home and state of a killed one.
func relaunchDev(t *testing.T, base string) *devNode {
	t.Helper()
	os.Remove(filepath.Join(base, "home", "state", "wazero-cache"))
	return startDev(t, base)
}

var resumedRE = regexp.MustCompile(`resuming from byte (\d+)`)

// TestBulkResumeAfterWorkerKilled: lemon dev (controller and node) is
// killed during a put and during a get; after a restart, --resume
// continues from the verified offset and the copy is byte-identical.
func TestBulkResumeAfterWorkerKilled(t *testing.T) {
	base := t.TempDir()
	d := startDev(t, base)
	local := t.TempDir()
	const size = 192 << 20
	src := filepath.Join(local, "src.bin")
	want := pseudoRandomFile(t, src, size)
	lemonFS := func(d *devNode, args ...string) *proc {
		return start(t, "lemon fs", local, env(d.op.home, "LEMON_OPERATOR_TOKEN="+d.token),
			append([]string{"fs", "--controller", d.url}, args...)...)
	}
	resumedAt := func(p *proc) int64 {
		t.Helper()
		if code := p.wait(t); code != 0 {
			t.Fatalf("resumed transfer: exit %d\n%s", code, p.output())
		}
		m := resumedRE.FindStringSubmatch(p.output())
		if m == nil {
			t.Fatalf("the transfer did not resume\n%s", p.output())
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n
	}

	p := lemonFS(d, "put", d.nodeName, src, "big.bin")
	deadline := time.Now().Add(callWait)
	for len(nodeParts(t, d.cwd)) == 0 && time.Now().Before(deadline) && !p.exited() {
		time.Sleep(2 * time.Millisecond)
	}
	parts := nodeParts(t, d.cwd)
	if len(parts) != 1 {
		t.Fatalf("no part file during put\n%s", p.output())
	}
	waitSize(t, p, parts[0], 8<<20)
	d.p.kill()
	if code := p.wait(t); code != 1 {
		t.Fatalf("put with the node killed: exit %d, want 1\n%s", code, p.output())
	}
	mustNotExist(t, filepath.Join(d.cwd, "big.bin"))
	d = relaunchDev(t, base)
	if n := resumedAt(lemonFS(d, "put", "--resume", d.nodeName, src, "big.bin")); n <= 0 || n >= size {
		t.Fatalf("put resumed from %d", n)
	}
	if got := fileSHA256(t, filepath.Join(d.cwd, "big.bin")); got != want {
		t.Fatalf("resumed put: sha256 %s, want %s", got, want)
	}
	if parts := nodeParts(t, d.cwd); len(parts) != 0 {
		t.Fatalf("part files left on the node: %v", parts)
	}

	dst := filepath.Join(local, "back.bin")
	p = lemonFS(d, "get", d.nodeName, "big.bin", dst)
	waitSize(t, p, transfer.LocalPart(dst), 8<<20)
	d.p.kill()
	if code := p.wait(t); code != 1 || !strings.Contains(p.output(), "--resume") {
		t.Fatalf("get with the node killed: exit %d, want 1 and a hint to resume\n%s", code, p.output())
	}
	mustNotExist(t, dst)
	d = relaunchDev(t, base)
	if n := resumedAt(lemonFS(d, "get", "--resume", d.nodeName, "big.bin", dst)); n <= 0 || n >= size {
		t.Fatalf("get resumed from %d", n)
	}
	if got := fileSHA256(t, dst); got != want {
		t.Fatalf("resumed get: sha256 %s, want %s", got, want)
	}
	mustNotExist(t, transfer.LocalPart(dst))
}

// tamperProxy forwards TCP to the controller. On data connections (the
// request line starts "GET /ws/data") it can flip one byte at offset at of
// one direction, or cut the connection there.
type tamperProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	mode   string // "", "flip-up", "flip-down", "cut-up", "cut-down"
	at     int64
	hits   atomic.Int64
}

func newTamperProxy(t *testing.T, target string) *tamperProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tamperProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *tamperProxy) set(mode string, at int64) {
	p.mu.Lock()
	p.mode, p.at = mode, at
	p.mu.Unlock()
}

func (p *tamperProxy) serve(c net.Conn) {
	defer c.Close()
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer u.Close()
	br := bufio.NewReader(c)
	head, _ := br.Peek(12)
	p.mu.Lock()
	mode, at := p.mode, p.at
	p.mu.Unlock()
	if string(head) != "GET /ws/data" {
		mode = ""
	}
	copyDir := func(dst net.Conn, src io.Reader, dir string) {
		var n int64
		buf := make([]byte, 64<<10)
		for {
			k, err := src.Read(buf)
			if k > 0 {
				b := buf[:k]
				if mode != "" && strings.HasSuffix(mode, dir) && n <= at && at < n+int64(k) {
					p.hits.Add(1)
					if strings.HasPrefix(mode, "cut") {
						dst.Write(b[:at-n])
						c.Close()
						u.Close()
						return
					}
					b[at-n] ^= 0x20
				}
				n += int64(k)
				if _, err := dst.Write(b); err != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		c.Close()
		u.Close()
	}
	go copyDir(u, br, "up")
	copyDir(c, u, "down")
}

// TestBulkTamperedOrTruncatedStreamDetected: a byte flipped in either
// direction of the data connection fails the transfer with a checksum
// mismatch, and a cut connection fails it too; in every case nothing is
// at the final name, and a tampered put leaves no part file on the node.
func TestBulkTamperedOrTruncatedStreamDetected(t *testing.T) {
	d := startDev(t, t.TempDir())
	proxy := newTamperProxy(t, d.controllerAddr)
	url := "ws://" + proxy.ln.Addr().String() + "/ws"
	local := t.TempDir()
	src := filepath.Join(local, "src.bin")
	pseudoRandomFile(t, src, 8<<20)
	pseudoRandomFile(t, filepath.Join(d.cwd, "remote.bin"), 8<<20)
	environ := env(d.op.home, "LEMON_OPERATOR_TOKEN="+d.token)
	// Far from any frame header: frames are at most 256 KiB.
	const at = 3<<20 + 100_000
	for _, tc := range []struct{ mode, cmd, want string }{
		{"flip-up", "put", "checksum"},
		{"flip-down", "get", "checksum"},
		{"cut-up", "put", ""},
		{"cut-down", "get", ""},
	} {
		proxy.set(tc.mode, at)
		before := proxy.hits.Load()
		dst := filepath.Join(local, "got.bin")
		args := []string{"fs", "--controller", url, "get", d.nodeName, "remote.bin", dst}
		if tc.cmd == "put" {
			dst = filepath.Join(d.cwd, "sent.bin")
			args = []string{"fs", "--controller", url, "put", d.nodeName, src, "sent.bin"}
		}
		r := run(t, local, environ, nil, args...)
		if proxy.hits.Load() == before {
			t.Fatalf("%s: the proxy never reached byte %d", tc.mode, at)
		}
		if r.code != 1 || tc.want != "" && !strings.Contains(r.stderr, tc.want) {
			t.Fatalf("%s %s: exit %d, stderr %q; want exit 1 mentioning %q", tc.mode, tc.cmd, r.code, r.stderr, tc.want)
		}
		mustNotExist(t, dst)
		if tc.mode == "flip-up" {
			if parts := nodeParts(t, d.cwd); len(parts) != 0 {
				t.Fatalf("a tampered put left %v", parts)
			}
		}
		if tc.cmd == "get" && tc.want != "" {
			mustNotExist(t, transfer.LocalPart(dst))
		}
		for _, p := range nodeParts(t, d.cwd) {
			os.Remove(p)
		}
		os.Remove(transfer.LocalPart(filepath.Join(local, "got.bin")))
	}
	proxy.set("", 0)
	if r := run(t, local, environ, nil, "fs", "--controller", url, "put", d.nodeName, src, "sent.bin"); r.code != 0 {
		t.Fatalf("untampered put: exit %d %s", r.code, r.stderr)
	}
}

func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			n, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return n << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// Peak resident memory allowed for a 1 GiB transfer: lemon dev (controller
// and node in one process, wasm modules loaded) and the lemon fs process.
// lemon dev's peak is mostly its start (compiling the module set); 1 GiB
// transfers may raise it by at most maxDevGrowth over 64 MiB transfers.
// Garbage collection timing and a further module instance for concurrent
// calls move the peak by up to about 40 MiB from run to run; memory that
// grew with the file would be about 960 MiB more.
const (
	maxDevRSS    = 512 << 20
	maxDevGrowth = 64 << 20
	maxCLIRSS    = 64 << 20
)

// TestBulk1GiBBoundedRSSResponsive moves 1 GiB each way with bounded peak
// RSS (VmHWM) in every process, while node.fs.stat calls to the same node
// keep a p99 under 50 ms.
func TestBulk1GiBBoundedRSSResponsive(t *testing.T) {
	d := startDev(t, t.TempDir())
	local := t.TempDir()
	lemonFS := func(args ...string) int64 {
		t.Helper()
		cmd := exec.Command(lemonBin, append([]string{"fs", "--controller", d.url}, args...)...)
		cmd.Env = env(d.op.home, "LEMON_OPERATOR_TOKEN="+d.token)
		cmd.Dir = local
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("lemon fs %s: %v\n%s", args[0], err, out)
		}
		return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	}
	src := filepath.Join(local, "src.bin")
	sparseFile(t, src, 1<<30)
	conn, err := client.Dial(context.Background(), d.url, client.Options{Token: d.token})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The same calls without a transfer, for comparison in the log.
	var base []time.Duration
	for i := 0; i < 200; i++ {
		t0 := time.Now()
		if _, perr := conn.Call(context.Background(), "node.fs.stat", map[string]any{"nodeId": d.nodeID, "path": "."}); perr != nil {
			t.Fatalf("stat: %v", perr)
		}
		base = append(base, time.Since(t0))
		time.Sleep(5 * time.Millisecond)
	}
	sort.Slice(base, func(i, j int) bool { return base[i] < base[j] })
	t.Logf("node.fs.stat without a transfer: %d calls, p50 %v, p99 %v", len(base), base[len(base)/2], base[len(base)*99/100])
	var lat []time.Duration
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		params := map[string]any{"nodeId": d.nodeID, "path": "."}
		for !stop.Load() {
			t0 := time.Now()
			if _, perr := conn.Call(context.Background(), "node.fs.stat", params); perr != nil {
				t.Errorf("stat during transfer: %v", perr)
				return
			}
			lat = append(lat, time.Since(t0))
			time.Sleep(5 * time.Millisecond)
		}
	}()
	// Warm up with 64 MiB each way, with the stat calls already running (a
	// call during a transfer needs a second fs module instance): the 1 GiB
	// transfers may then raise
	// lemon dev's peak by at most maxDevGrowth, whatever the file size.
	small := filepath.Join(local, "small.bin")
	sparseFile(t, small, 64<<20)
	lemonFS("put", d.nodeName, small, "small.bin")
	lemonFS("get", d.nodeName, "small.bin", filepath.Join(local, "small-back.bin"))
	hwm0 := vmHWM(t, d.p.cmd.Process.Pid)
	for _, args := range [][]string{
		{"put", d.nodeName, src, "big.bin"},
		{"get", d.nodeName, "big.bin", filepath.Join(local, "back.bin")},
	} {
		rss := lemonFS(args...)
		t.Logf("lemon fs %s 1 GiB: peak RSS %d MiB", args[0], rss>>20)
		if rss > maxCLIRSS {
			t.Errorf("lemon fs %s: peak RSS %d MiB, want at most %d", args[0], rss>>20, maxCLIRSS>>20)
		}
	}
	stop.Store(true)
	wg.Wait()
	if fi, err := os.Stat(filepath.Join(local, "back.bin")); err != nil || fi.Size() != 1<<30 {
		t.Fatalf("back.bin: %v", err)
	}
	hwm := vmHWM(t, d.p.cmd.Process.Pid)
	t.Logf("lemon dev: peak RSS %d MiB after 64 MiB each way, %d MiB after 1 GiB each way", hwm0>>20, hwm>>20)
	if hwm > maxDevRSS || hwm-hwm0 > maxDevGrowth {
		t.Errorf("lemon dev: peak RSS %d MiB (%d before), want at most %d and at most %d more",
			hwm>>20, hwm0>>20, maxDevRSS>>20, maxDevGrowth>>20)
	}
	if len(lat) < 50 {
		t.Fatalf("only %d stat calls during the transfers", len(lat))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	t.Logf("node.fs.stat during 1 GiB transfers: %d calls, p50 %v, p99 %v", len(lat), p50, p99)
	if p99 >= 50*time.Millisecond {
		t.Errorf("node.fs.stat p99 %v during a transfer, want under 50 ms", p99)
	}
}

// treeEntry is what a copy must keep of a file: bytes, mode, mtime.
type treeEntry struct {
	data    string
	mode    fs.FileMode
	mtimeMs int64
}

func readTree(t *testing.T, root string) map[string]treeEntry {
	t.Helper()
	out := map[string]treeEntry{}
	err := filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = treeEntry{string(b), fi.Mode().Perm(), fi.ModTime().UnixMilli()}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, got, want map[string]treeEntry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d files, want %d", what, len(got), len(want))
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Fatalf("%s: %s differs (present %v, mode %v want %v, mtime %d want %d)", what, k, ok, g.mode, w.mode, g.mtimeMs, w.mtimeMs)
		}
	}
}

// TestBulkTree10000 copies a tree of 10,000 small files (100 directories
// of 100, 0 to 2 KiB each, varied modes and mtimes) to the node with put -r
// and back with get -r: byte-identical, modes and mtimes kept.
func TestBulkTree10000(t *testing.T) {
	d := startDev(t, t.TempDir())
	local := t.TempDir()
	root := filepath.Join(local, "tree")
	r := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := 0; i < 100; i++ {
		dir := filepath.Join(root, fmt.Sprintf("d%02d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 100; j++ {
			p := filepath.Join(dir, fmt.Sprintf("f%02d.dat", j))
			b := make([]byte, r.IntN(2049))
			for k := range b {
				b[k] = byte(r.Uint32())
			}
			mode := []fs.FileMode{0o644, 0o600, 0o755, 0o640}[r.IntN(4)]
			if err := os.WriteFile(p, b, mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, mode)
			mt := base.Add(time.Duration(r.IntN(1e6)) * time.Millisecond)
			os.Chtimes(p, mt, mt)
		}
	}
	want := readTree(t, root)
	environ := env(d.op.home, "LEMON_OPERATOR_TOKEN="+d.token)
	t0 := time.Now()
	if r := run(t, local, environ, nil, "fs", "--controller", d.url, "put", "-r", "--parallel", "8", d.nodeName, root, "copy"); r.code != 0 {
		t.Fatalf("put -r: exit %d %s", r.code, r.stderr)
	}
	t.Logf("put -r of 10,000 files: %v", time.Since(t0))
	sameTree(t, "put -r", readTree(t, filepath.Join(d.cwd, "copy")), want)
	back := filepath.Join(local, "back")
	t0 = time.Now()
	if r := run(t, local, environ, nil, "fs", "--controller", d.url, "get", "-r", "--parallel", "8", d.nodeName, "copy", back); r.code != 0 {
		t.Fatalf("get -r: exit %d %s", r.code, r.stderr)
	}
	t.Logf("get -r of 10,000 files: %v", time.Since(t0))
	sameTree(t, "get -r", readTree(t, back), want)
}

// TestBulkPutHeldForApproval: a put whose request is held for an approval
// longer than the controller holds a caller's data socket (TransferCallerWaitMs) still
// completes once approved: the CLI dials its data connection again while
// the request is pending, and one approval covers the whole file.
func TestBulkPutHeldForApproval(t *testing.T) {
	c, ops := authorityCluster(t, "[limits]\napproval_timeout_ms = 120000\n", map[string]string{
		"dev":  "scopes = [\"operator.admin\"]\n[operators.policy]\nrequire_approval = [\"node.fs.transfer.put\"]",
		"lead": "scopes = [\"operator.approvals\"]",
	})
	m := c.newMachine("worker-1", "")
	c.join(m)
	dev, lead := ops["dev"], ops["lead"]
	src := filepath.Join(dev.home, "src.bin")
	want := pseudoRandomFile(t, src, 3<<20)
	p := start(t, "held put", dev.home, env(dev.home, "LEMON_OPERATOR_TOKEN="+dev.token),
		"fs", "--controller", dev.url, "put", "worker-1", src, "held.bin")
	id := p.waitFor(t, approvalIDRE, callWait)[1]
	time.Sleep(protocol.TransferCallerWaitMs*time.Millisecond + time.Second)
	mustNotExist(t, filepath.Join(m.cwd, "held.bin"))
	if r := run(t, lead.home, env(lead.home, "LEMON_OPERATOR_TOKEN="+lead.token), nil,
		"approvals", "--controller", lead.url, "approve", id); r.code != 0 {
		t.Fatalf("approve: %d %s", r.code, r.stderr)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("held put: exit %d\n%s", code, p.output())
	}
	if got := fileSHA256(t, filepath.Join(m.cwd, "held.bin")); got != want {
		t.Fatalf("held put: sha256 %s, want %s", got, want)
	}
}
