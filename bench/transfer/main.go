// Command transfer benchmarks `lemon fs get/put` against OpenSSH's sftp on
// loopback (docs/BENCHMARKS.md, "File transfers"): one lemon controller
// over ws:// and one over wss:// (a self-signed certificate made here),
// each with one `lemon node join`, and one sshd on a loopback port with
// temporary host and user keys. Rounds are interleaved; each row prints the
// median throughput, the CPU per MiB of every process involved (client and
// servers) and the lemon/sftp throughput ratio.
//
//	./build.sh && go run ./bench/transfer [-mib 256] [-rounds 3]
//
// It needs sshd (bench/transfer/install-sshd.sh installs it) and runs as
// any user that may start sshd on a high port.
package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"lemon/client"
)

var (
	mib    = flag.Int("mib", 256, "file size in MiB")
	rounds = flag.Int("rounds", 3, "interleaved rounds per row")
	keep   = flag.Bool("keep", false, "keep the scratch directory")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/transfer:", err)
		os.Exit(1)
	}
}

type procs struct{ cmds []*exec.Cmd }

func (p *procs) stop() {
	for _, c := range p.cmds {
		if c.Process != nil {
			c.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, c := range p.cmds {
		if c.Process != nil {
			done := make(chan struct{})
			go func() { c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				c.Process.Kill()
			}
		}
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "lemon-bench-transfer-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}
	ps := &procs{}
	defer ps.stop()

	lemon := filepath.Join(dir, "lemon")
	fmt.Fprintln(os.Stderr, "building lemon ...")
	if out, err := exec.Command("go", "build", "-o", lemon, "./cmd/lemon").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/lemon (run ./build.sh first): %v\n%s", err, out)
	}
	src := filepath.Join(dir, "local", "src.bin")
	os.MkdirAll(filepath.Dir(src), 0o700)
	if err := randomFile(src, int64(*mib)<<20); err != nil {
		return err
	}
	cert, key, err := selfSigned(dir)
	if err != nil {
		return err
	}

	type lemonSide struct {
		name, url, token, nodeDir string
		pids                      []int
		env                       []string
	}
	var sides []*lemonSide
	for _, tls := range []bool{false, true} {
		s := &lemonSide{name: "ws", token: "lop_" + hexRand(24)}
		home := filepath.Join(dir, "ctl-ws")
		args := []string{"controller", "--listen", "127.0.0.1:0"}
		if tls {
			s.name, home = "wss", filepath.Join(dir, "ctl-wss")
			args = append(args, "--tls-cert", cert, "--tls-key", key)
		}
		os.MkdirAll(home, 0o700)
		nodeToken := "lnt_" + hexRand(24)
		pol := filepath.Join(home, "controller.toml")
		os.WriteFile(pol, []byte("[[node_tokens]]\nname = \"bench\"\ntoken_env = \"BENCH_NODE_TOKEN\"\n"), 0o600)
		args = append(args, "--policy", pol, "--state", filepath.Join(home, "state"))
		s.env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "SSL_CERT_FILE=" + cert}
		ctl := exec.Command(lemon, args...)
		ctl.Env = append(s.env, "LEMON_CONTROL_PLANE_OPERATOR_TOKEN="+s.token, "BENCH_NODE_TOKEN="+nodeToken)
		ctl.Dir = home
		m, err := startAndWait(ps, ctl, regexp.MustCompile(`listening on (wss?://\S+/ws)`))
		if err != nil {
			return err
		}
		s.url = m[1]
		nodeHome := filepath.Join(dir, "node-"+s.name)
		s.nodeDir = filepath.Join(nodeHome, "work")
		os.MkdirAll(s.nodeDir, 0o700)
		node := exec.Command(lemon, "node", "join", "--controller", s.url, "--name", "bench", "--cwd", s.nodeDir,
			"--state", filepath.Join(nodeHome, "state"))
		node.Env = append([]string{"HOME=" + nodeHome, "PATH=" + os.Getenv("PATH"), "SSL_CERT_FILE=" + cert},
			"LEMON_NODE_TOKEN="+nodeToken)
		node.Dir = s.nodeDir
		node.Stderr = io.Discard
		if err := node.Start(); err != nil {
			return err
		}
		ps.cmds = append(ps.cmds, node)
		if err := waitOnline(s.url, s.token, cert); err != nil {
			return fmt.Errorf("%s node: %w", s.name, err)
		}
		s.pids = []int{ctl.Process.Pid, node.Process.Pid}
		sides = append(sides, s)
	}

	ssh, err := startSSHD(ps, dir)
	if err != nil {
		return err
	}

	local := filepath.Dir(src)
	type sample struct{ wall, cpu time.Duration }
	res := map[string][]sample{}
	lemonRun := func(s *lemonSide, dirn string) (sample, error) {
		var args []string
		if dirn == "put" {
			args = []string{"fs", "--controller", s.url, "put", "--overwrite", "bench", src, "big.bin"}
		} else {
			args = []string{"fs", "--controller", s.url, "get", "--overwrite", "bench", "big.bin", filepath.Join(local, "back.bin")}
		}
		before := cpuOf(s.pids...)
		cmd := exec.Command(lemon, args...)
		cmd.Env = append(s.env, "LEMON_OPERATOR_TOKEN="+s.token)
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		wall := time.Since(t0)
		if err != nil {
			return sample{}, fmt.Errorf("lemon %s %s: %v\n%s", s.name, dirn, err, out)
		}
		return sample{wall, cpuOf(s.pids...) - before + cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}, nil
	}
	sftpRun := func(dirn string) (sample, error) {
		batch := "put " + src + " " + filepath.Join(ssh.root, "big.bin") + "\n"
		if dirn == "get" {
			batch = "get " + filepath.Join(ssh.root, "big.bin") + " " + filepath.Join(local, "back.bin") + "\n"
		}
		bf := filepath.Join(dir, "batch")
		os.WriteFile(bf, []byte(batch), 0o600)
		before := cpuOf(ssh.pid) + childCPU(ssh.pid)
		cmd := exec.Command("sftp", "-q", "-b", bf, "-P", strconv.Itoa(ssh.port), "-i", ssh.userKey,
			"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
			"-o", "LogLevel=ERROR", ssh.user+"@127.0.0.1")
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		wall := time.Since(t0)
		if err != nil {
			return sample{}, fmt.Errorf("sftp %s: %v\n%s", dirn, err, out)
		}
		// The session's sshd and sftp-server were waited for by the
		// listener: their CPU is in its children's times.
		time.Sleep(50 * time.Millisecond)
		after := cpuOf(ssh.pid) + childCPU(ssh.pid)
		return sample{wall, after - before + cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}, nil
	}
	// Warm up: every path once (first module instantiation, page cache).
	for _, s := range sides {
		if _, err := lemonRun(s, "put"); err != nil {
			return err
		}
		if _, err := lemonRun(s, "get"); err != nil {
			return err
		}
	}
	if _, err := sftpRun("put"); err != nil {
		return err
	}
	for r := 0; r < *rounds; r++ {
		for _, dirn := range []string{"get", "put"} {
			for _, s := range sides {
				x, err := lemonRun(s, dirn)
				if err != nil {
					return err
				}
				res["lemon "+s.name+" "+dirn] = append(res["lemon "+s.name+" "+dirn], x)
				y, err := sftpRun(dirn)
				if err != nil {
					return err
				}
				res["sftp "+s.name+" "+dirn] = append(res["sftp "+s.name+" "+dirn], y)
			}
		}
		fmt.Fprintf(os.Stderr, "round %d of %d done\n", r+1, *rounds)
	}
	median := func(xs []sample) sample {
		sort.Slice(xs, func(i, j int) bool { return xs[i].wall < xs[j].wall })
		return xs[len(xs)/2]
	}
	size := float64(int64(*mib) << 20)
	fmt.Printf("lemon fs vs sftp, loopback, %d MiB random file, median of %d interleaved rounds (%s)\n\n",
		*mib, *rounds, time.Now().Format("2006-01-02 15:04"))
	fmt.Println("| direction | transport | lemon MB/s | sftp MB/s | lemon / sftp | lemon CPU ms/MiB | sftp CPU ms/MiB |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, dirn := range []string{"get", "put"} {
		for _, s := range sides {
			l, o := median(res["lemon "+s.name+" "+dirn]), median(res["sftp "+s.name+" "+dirn])
			lr, or := size/l.wall.Seconds()/1e6, size/o.wall.Seconds()/1e6
			fmt.Printf("| %s | %s | %.0f | %.0f | %.2f | %.2f | %.2f |\n", dirn, s.name, lr, or, lr/or,
				float64(l.cpu.Microseconds())/1000/float64(*mib), float64(o.cpu.Microseconds())/1000/float64(*mib))
		}
	}
	return nil
}

// randomFile writes n pseudo-random bytes (incompressible; ChaCha8).
func randomFile(path string, n int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	var seed [32]byte
	crand.Read(seed[:])
	r := rand.NewChaCha8(seed)
	buf := make([]byte, 1<<20)
	for n > 0 {
		r.Read(buf)
		k := min(int64(len(buf)), n)
		if _, err := f.Write(buf[:k]); err != nil {
			f.Close()
			return err
		}
		n -= k
	}
	return f.Close()
}

func hexRand(n int) string {
	b := make([]byte, n)
	crand.Read(b)
	return fmt.Sprintf("%x", b)
}

func selfSigned(dir string) (certFile, keyFile string, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lemon bench"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return "", "", err
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600)
}

// startAndWait starts cmd and waits for a line of its stderr to match re.
func startAndWait(ps *procs, cmd *exec.Cmd, re *regexp.Regexp) ([]string, error) {
	pr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ps.cmds = append(ps.cmds, cmd)
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m
				sent = true
			}
		}
	}()
	select {
	case m := <-found:
		return m, nil
	case <-time.After(4 * time.Minute):
		return nil, fmt.Errorf("%s did not start", cmd.Path)
	}
}

func waitOnline(url, token, cert string) error {
	deadline := time.Now().Add(4 * time.Minute)
	for time.Now().Before(deadline) {
		os.Setenv("SSL_CERT_FILE", cert)
		conn, err := client.Dial(context.Background(), url, client.Options{Token: token})
		if err == nil {
			raw, perr := conn.Call(context.Background(), "node.list", map[string]any{})
			conn.Close()
			var l struct{ Nodes []struct{ Online bool } }
			if perr == nil && json.Unmarshal(raw, &l) == nil && len(l.Nodes) == 1 && l.Nodes[0].Online {
				return nil
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	return fmt.Errorf("not online after 4 minutes")
}

type sshd struct {
	pid, port     int
	user, userKey string
	root          string
}

// startSSHD runs OpenSSH's sshd on a free loopback port with a temporary
// host key, a temporary user key authorized for the current user, and
// OpenSSH's sftp-server as the sftp subsystem.
func startSSHD(ps *procs, dir string) (*sshd, error) {
	bin := ""
	for _, p := range []string{"/usr/sbin/sshd", "/usr/bin/sshd"} {
		if _, err := os.Stat(p); err == nil {
			bin = p
		}
	}
	if bin == "" {
		return nil, fmt.Errorf("sshd is missing: run bench/transfer/install-sshd.sh")
	}
	server := ""
	for _, p := range []string{"/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/libexec/sftp-server"} {
		if _, err := os.Stat(p); err == nil {
			server = p
		}
	}
	if server == "" {
		return nil, fmt.Errorf("OpenSSH's sftp-server is missing")
	}
	sd := filepath.Join(dir, "ssh")
	os.MkdirAll(sd, 0o700)
	for _, k := range []string{"host", "user"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(sd, k)).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ssh-keygen: %v %s", err, out)
		}
	}
	pub, _ := os.ReadFile(filepath.Join(sd, "user.pub"))
	os.WriteFile(filepath.Join(sd, "authorized_keys"), pub, 0o600)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	os.MkdirAll("/run/sshd", 0o755) // privilege separation directory
	cfg := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
AuthorizedKeysFile %s
PidFile %s
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
Subsystem sftp %s
`, port, filepath.Join(sd, "host"), filepath.Join(sd, "authorized_keys"), filepath.Join(sd, "sshd.pid"), server)
	cf := filepath.Join(sd, "sshd_config")
	os.WriteFile(cf, []byte(cfg), 0o600)
	cmd := exec.Command(bin, "-D", "-e", "-f", cf)
	if _, err := startAndWait(ps, cmd, regexp.MustCompile(`Server listening on 127\.0\.0\.1`)); err != nil {
		return nil, err
	}
	u, err := user.Current()
	if err != nil {
		return nil, err
	}
	root := filepath.Join(dir, "sftp-root")
	os.MkdirAll(root, 0o700)
	return &sshd{pid: cmd.Process.Pid, port: port, user: u.Username, userKey: filepath.Join(sd, "user"), root: root}, nil
}

// cpuOf is the user+system CPU time of processes (from /proc).
func cpuOf(pids ...int) time.Duration {
	var t time.Duration
	for _, p := range pids {
		t += statTicks(p, 14) + statTicks(p, 15)
	}
	return t
}

// childCPU is the CPU time of pid's waited-for children.
func childCPU(pid int) time.Duration { return statTicks(pid, 16) + statTicks(pid, 17) }

// statTicks reads field n (1-based, proc(5)) of /proc/pid/stat as clock
// ticks (100 Hz).
func statTicks(pid, n int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	s = s[strings.LastIndexByte(s, ')')+2:]
	f := strings.Fields(s)
	// f[0] is field 3 (state).
	if len(f) <= n-3 {
		return 0
	}
	v, _ := strconv.ParseInt(f[n-3], 10, 64)
	return time.Duration(v) * 10 * time.Millisecond
}
