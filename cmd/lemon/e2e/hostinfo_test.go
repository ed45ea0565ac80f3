package e2e

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/sys/unix"

	"lemon/client"
	"lemon/protocol"
)

// TestDevHostInfo is issue 2's "Must show" through `lemon dev`: real
// host measurements, authentication and parameter errors with `lemon
// call`'s exit codes, and a clean Ctrl-C.
func TestDevHostInfo(t *testing.T) {
	d := startDev(t, t.TempDir())
	cwd, err := filepath.EvalSymlinks(d.cwd)
	if err != nil {
		t.Fatal(err)
	}
	if d.started != cwd {
		t.Errorf("lemon dev serves %q, want the directory it runs in, %q", d.started, cwd)
	}

	// lemon dev keeps the controller in memory (docs/DEPLOY.md, "State
	// directory"): no durable store anywhere under its HOME.
	filepath.WalkDir(d.home, func(path string, e os.DirEntry, err error) error {
		if err == nil && e.Name() == "controller.db" {
			t.Errorf("lemon dev wrote a controller store: %s", path)
		}
		return nil
	})

	uptimeBefore := procUptime(t)
	info := d.op.must(t, "node.host.info", map[string]any{"nodeId": d.nodeID})
	uptimeNow := procUptime(t)

	t.Run("values", func(t *testing.T) {
		nproc, err := exec.Command("nproc").Output()
		if err != nil {
			t.Fatalf("nproc: %v", err)
		}
		want, _ := strconv.ParseUint(strings.TrimSpace(string(nproc)), 10, 64)
		if got := num(t, info, "cpuCount"); got != want || got != uint64(runtime.NumCPU()) {
			t.Errorf("cpuCount = %d, nproc = %d, runtime.NumCPU = %d", got, want, runtime.NumCPU())
		}
		if got, want := num(t, info, "memTotalBytes"), memTotalBytes(t); got != want {
			t.Errorf("memTotalBytes = %d, MemTotal of /proc/meminfo = %d bytes", got, want)
		}
		var st unix.Statfs_t
		if err := unix.Statfs(cwd, &st); err != nil {
			t.Fatal(err)
		}
		if got, want := num(t, info, "diskTotalBytes"), st.Blocks*uint64(st.Bsize); got != want {
			t.Errorf("diskTotalBytes = %d, statfs(cwd) Blocks×Bsize = %d", got, want)
		}
		up := float64(num(t, info, "uptimeSec"))
		// Whole seconds read during the call: between the readings taken
		// just before and just after it (rounding slack: half a second up,
		// one down).
		if up > uptimeNow+0.5 || up < uptimeBefore-1 {
			t.Errorf("uptimeSec = %.0f, /proc/uptime before the call %.2f, after %.2f", up, uptimeBefore, uptimeNow)
		}
		host, _ := os.Hostname()
		if info["hostname"] != host || info["os"] != "linux" || info["defaultCwd"] != cwd {
			t.Errorf("hostname %v os %v defaultCwd %v; want %q linux %q", info["hostname"], info["os"], info["defaultCwd"], host, cwd)
		}
		if runtime.GOARCH == "amd64" && info["arch"] != "x86_64-pc-linux-gnu" {
			t.Errorf("arch = %v, want x86_64-pc-linux-gnu", info["arch"])
		}
		if free := num(t, info, "memFreeBytes"); free == 0 || free > num(t, info, "memTotalBytes") {
			t.Errorf("memFreeBytes = %d", free)
		}
		t.Logf("node.host.info: cpuCount %v memTotalBytes %v diskTotalBytes %v uptimeSec %v (/proc/uptime %.2f)",
			info["cpuCount"], info["memTotalBytes"], info["diskTotalBytes"], info["uptimeSec"], uptimeNow)
	})

	t.Run("errors", func(t *testing.T) {
		// A wrong token: UNAUTHORIZED, exit 1, and the token nowhere.
		wrong := "lop_" + randHex(24)
		bad := newOperator(t, d.url, wrong)
		r := bad.call(t, "node.host.info", map[string]any{"nodeId": d.nodeID})
		if r.code != 1 || r.stdout != "" {
			t.Fatalf("wrong token: exit %d stdout %q", r.code, r.stdout)
		}
		if e := decodeError(t, r.stderr); e.Code != protocol.CodeUnauthorized || e.detail("code") != "operator_auth_invalid" {
			t.Errorf("wrong token: %+v, want UNAUTHORIZED/operator_auth_invalid", e)
		}
		if strings.Contains(r.stdout+r.stderr, wrong) {
			t.Errorf("lemon call echoed the wrong token")
		}

		// No token: `lemon call` refuses before dialling (usage, exit 2)
		// ...
		nr := run(t, bad.home, env(bad.home), []byte(`{}`), "call", "--controller", d.url, "node.list", "-")
		if nr.code != 2 || nr.stdout != "" || !strings.Contains(nr.stderr, "LEMON_OPERATOR_TOKEN") {
			t.Errorf("no token: exit %d stdout %q stderr %q, want exit 2 naming LEMON_OPERATOR_TOKEN", nr.code, nr.stdout, nr.stderr)
		}
		// ... and a connect without a token is UNAUTHORIZED at the controller.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := client.Dial(ctx, d.url, client.Options{})
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeUnauthorized || pe.DomainCode() != "operator_auth_missing" {
			t.Errorf("connect without a token: %v, want UNAUTHORIZED/operator_auth_missing", err)
		}

		// A request before connect.
		if e := rawBeforeConnect(t, d.url); e.Code != protocol.CodeHandshakeRequired {
			t.Errorf("request before connect: %+v, want HANDSHAKE_REQUIRED", e)
		}

		// A frame over maxPayload is refused and closes that socket only.
		if e, closeCode := rawOversized(t, d.url, d.token); e.Code != protocol.CodeInvalidRequest || e.detail("code") != protocol.DomainPayloadTooLarge || closeCode != 1009 {
			t.Errorf("oversized frame: %+v, close %d; want INVALID_REQUEST/payload_too_large and close 1009", e, closeCode)
		}

		// Missing nodeId; unknown node.
		if e := d.op.callError(t, "node.host.info", map[string]any{}); e.Code != protocol.CodeInvalidParams || e.detail("field") != "nodeId" {
			t.Errorf("missing nodeId: %+v, want INVALID_PARAMS on nodeId", e)
		}
		if e := d.op.callError(t, "node.host.info", map[string]any{"nodeId": "node-" + strings.Repeat("0", 32)}); e.Code != protocol.CodeNotFound {
			t.Errorf("unknown node: %+v, want NOT_FOUND", e)
		}
		// Exit 0 with the payload on stdout and nothing on stderr.
		if r := d.op.call(t, "node.list", map[string]any{}); r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, d.nodeID) {
			t.Errorf("node.list: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}

		// Neither token ever reaches any output.
		for _, out := range append(append([]string{d.p.output()}, d.op.outputs...), bad.outputs...) {
			if strings.Contains(out, d.token) {
				t.Errorf("the operator token appears in an output")
			}
			if strings.Contains(out, wrong) {
				t.Errorf("the wrong token appears in an output")
			}
		}
	})

	t.Run("sigint", func(t *testing.T) {
		// A run in progress when Ctrl-C arrives: the stop must take it
		// down too.
		conn := dialOperator(t, d.url, d.token)
		runDone := make(chan *protocol.Error, 1)
		go func() {
			_, perr := conn.Call(context.Background(), "node.process.run", map[string]any{
				"nodeId": d.nodeID, "processId": "sigint:sleep", "cwd": ".", "argv": []string{"sleep", "120"},
				"stdinBase64": "", "timeoutMs": 600000, "maxOutputBytes": 1024})
			runDone <- perr
		}()
		var before []procInfo
		if !eventually(time.Minute, func() bool {
			before = descendants(d.p.cmd.Process.Pid)
			for _, p := range before {
				if p.comm == "sleep" {
					return true
				}
			}
			return false
		}) {
			t.Fatalf("the sleep run never started\n%s", d.p.output())
		}
		if code := d.p.signal(t, syscall.SIGINT); code != 0 {
			t.Fatalf("lemon dev exit %d after SIGINT, want 0\n%s", code, d.p.output())
		}
		if !strings.Contains(d.p.stderr.String(), "lemon dev: stopped") {
			t.Errorf("no stop line:\n%s", d.p.stderr.String())
		}
		for _, p := range before {
			if !eventually(5*time.Second, func() bool { return !alive(p) }) {
				t.Errorf("process %d (%s) outlived lemon dev", p.pid, p.comm)
				syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
		select {
		case perr := <-runDone:
			if perr == nil {
				t.Errorf("the interrupted run reported success")
			}
		case <-time.After(10 * time.Second):
			t.Errorf("the interrupted run's caller was never answered")
		}
	})
}

// rawBeforeConnect sends a request before connect on a bare WebSocket and
// returns the error.
func rawBeforeConnect(t *testing.T, url string) errObject {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"req","id":"early","method":"node.list","params":{}}`)); err != nil {
		t.Fatal(err)
	}
	var res struct {
		Type  string    `json:"type"`
		ID    string    `json:"id"`
		OK    bool      `json:"ok"`
		Error errObject `json:"error"`
	}
	if err := ws.ReadJSON(&res); err != nil {
		t.Fatal(err)
	}
	if res.Type != "res" || res.ID != "early" || res.OK {
		t.Fatalf("unexpected frame %+v", res)
	}
	return res.Error
}

// rawOversized connects as an operator on a bare WebSocket, sends a
// request frame of maxPayload+1 bytes and returns the error response and
// the close code.
func rawOversized(t *testing.T, url, token string) (errObject, int) {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	connect := `{"type":"req","id":"c1","method":"connect","params":{"role":"operator","auth":{"token":"` + token + `"},"client":{"id":"e2e","version":"1"}}}`
	if err := ws.WriteMessage(websocket.TextMessage, []byte(connect)); err != nil {
		t.Fatal(err)
	}
	var hello struct {
		Type   string `json:"type"`
		Policy struct {
			MaxPayload int `json:"maxPayload"`
		} `json:"policy"`
	}
	if err := ws.ReadJSON(&hello); err != nil || hello.Type != "hello-ok" || hello.Policy.MaxPayload == 0 {
		t.Fatalf("connect: %+v %v", hello, err)
	}
	head := `{"type":"req","id":"big","method":"node.list","params":{"pad":"`
	tail := `"}}`
	pad := strings.Repeat("x", hello.Policy.MaxPayload+1-len(head)-len(tail))
	if err := ws.WriteMessage(websocket.TextMessage, []byte(head+pad+tail)); err != nil {
		t.Fatal(err)
	}
	var res struct {
		Type  string    `json:"type"`
		OK    bool      `json:"ok"`
		Error errObject `json:"error"`
	}
	if err := ws.ReadJSON(&res); err != nil || res.Type != "res" || res.OK {
		t.Fatalf("oversized frame: %+v %v", res, err)
	}
	_, _, err = ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		t.Fatalf("the socket was not closed with a close frame: %v", err)
	}
	return res.Error, ce.Code
}

func memTotalBytes(t *testing.T) uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) == 3 && fields[0] == "MemTotal:" && fields[2] == "kB" {
			kb, err := strconv.ParseUint(fields[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb * 1024
		}
	}
	t.Fatal("no MemTotal in /proc/meminfo")
	return 0
}

func procUptime(t *testing.T) float64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
