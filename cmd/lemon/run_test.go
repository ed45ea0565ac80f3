package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"lemon/client/fakecontrol"
	"lemon/protocol"
)

// runFake is a controller with one node "box" (nodeId node-box) whose
// node.process.run answers a completed receipt: stdout is the stdin sent,
// stderr "err\n", and the exit code argv[1] when it is a number.
type runFake struct {
	mu   sync.Mutex
	runs []protocol.ProcessRunParams
	srv  *fakecontrol.Server
}

func newRunFake(t *testing.T, maxPayload int) *runFake {
	f := &runFake{}
	f.srv = fakecontrol.New(fakecontrol.Options{OperatorToken: callTestToken, MaxPayload: maxPayload,
		Handle: func(_ *fakecontrol.Conn, req protocol.Request) (any, *protocol.Error) {
			switch req.Method {
			case protocol.MethodNodeList:
				return protocol.NodeListResult{Nodes: []protocol.NodeSummary{{NodeID: "node-box", Name: "box", Online: true}}}, nil
			case protocol.MethodProcessRun:
				p, perr := protocol.ParseProcessRun(req.Params)
				if perr != nil {
					return nil, perr
				}
				f.mu.Lock()
				f.runs = append(f.runs, p)
				f.mu.Unlock()
				switch p.Argv[0] {
				case "denied": // a policy refusal: no outcome flags
					return nil, protocol.DomainError(protocol.CodeForbidden, "policy_denied", "the operator policy denies this")
				case "offline": // refused with the flags saying nothing ran
					return nil, protocol.Errorf(protocol.CodeUnavailable, "node offline").WithRetry(true, false)
				case "lost": // no flags: it may have started
					return nil, protocol.Errorf(protocol.CodeUnavailable, "node connection lost")
				case "applied": // FORBIDDEN that says it may have applied
					return nil, protocol.DomainError(protocol.CodeForbidden, "x", "late").WithRetry(false, true)
				}
				in, _ := base64.StdEncoding.DecodeString(p.StdinBase64)
				code := 0
				if len(p.Argv) > 1 {
					json.Unmarshal([]byte(p.Argv[1]), &code)
				}
				out, errOut := base64.StdEncoding.EncodeToString(in), base64.StdEncoding.EncodeToString([]byte("err\n"))
				return protocol.ProcessReceipt{ProcessID: p.ProcessID, NodeID: p.NodeID, State: protocol.ProcessStateCompleted,
					ExitCode: &code, StdoutBase64: &out, StderrBase64: &errOut}, nil
			case protocol.MethodProcessGet:
				p, perr := protocol.ParseProcessID(req.Params)
				if perr != nil {
					return nil, perr
				}
				return protocol.ProcessReceipt{ProcessID: p.ProcessID, NodeID: p.NodeID, State: protocol.ProcessStateNotFound, OutputTruncated: true}, nil
			}
			return nil, protocol.Errorf(protocol.CodeMethodNotFound, "unknown method")
		}})
	t.Cleanup(f.srv.Close)
	return f
}

func (f *runFake) session() operatorSession {
	return operatorSession{url: f.srv.URL, token: callTestToken}
}

func defaultRunOptions(node string, argv ...string) *runOptions {
	return &runOptions{node: node, argv: argv, cwd: runDefaultCwd, timeout: runDefaultTimeout, maxOutput: protocol.ProcessMaxOutputMax}
}

// lemon run by node name: stdin goes in, stdout and stderr come out
// decoded, the exit code is the remote one, and the processId is on stderr
// before the output. The spec's required params get their defaults.
func TestRunSendsStdinAndExitsWithTheRemoteCode(t *testing.T) {
	f := newRunFake(t, 0)
	o := defaultRunOptions("box", "sh", "7")
	if err := o.check(pflag.NewFlagSet("t", pflag.ContinueOnError)); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := runRun(context.Background(), f.session(), o, strings.NewReader("hello\x00world\n"), false, &out, &errb)
	if code != 7 || out.String() != "hello\x00world\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	wantFirst := "lemon run: processId " + o.id + " on node node-box"
	if !strings.HasPrefix(errb.String(), wantFirst) || !strings.HasSuffix(errb.String(), "\nerr\n") {
		t.Fatalf("stderr %q, want the processId line then the remote stderr", errb.String())
	}
	p := f.runs[0]
	if p.NodeID != "node-box" || p.Cwd != "." || p.TimeoutMs != 60000 || p.MaxOutputBytes != protocol.ProcessMaxOutputMax ||
		!strings.HasPrefix(p.ProcessID, "run-") || len(p.ProcessID) != 20 {
		t.Fatalf("params %+v", p)
	}

	// A terminal stdin, or -n, sends none.
	for _, tc := range []struct {
		tty, noStdin bool
	}{{true, false}, {false, true}} {
		o := defaultRunOptions("node-box", "true")
		o.noStdin = tc.noStdin
		o.check(pflag.NewFlagSet("t", pflag.ContinueOnError))
		if code := runRun(context.Background(), f.session(), o, strings.NewReader("x"), tc.tty, &out, &errb); code != 0 {
			t.Fatalf("exit %d", code)
		}
		if last := f.runs[len(f.runs)-1]; last.StdinBase64 != "" {
			t.Fatalf("tty %v -n %v: stdin %q sent", tc.tty, tc.noStdin, last.StdinBase64)
		}
	}
}

// Stdin at the 1 MiB limit is sent; one byte more is refused before
// anything is sent (exit 2). Under a controller whose maxPayload cannot
// carry that much, the largest stdin that fits is sent and one byte more
// is refused unsent (exit 1) instead of being cut off by the client.
func TestRunStdinLimit(t *testing.T) {
	f := newRunFake(t, 2<<20)
	for _, n := range []int{protocol.ProcessStdinMaxBytes, protocol.ProcessStdinMaxBytes + 1} {
		o := defaultRunOptions("box", "cat")
		o.check(pflag.NewFlagSet("t", pflag.ContinueOnError))
		var out, errb bytes.Buffer
		code := runRun(context.Background(), f.session(), o, bytes.NewReader(make([]byte, n)), false, &out, &errb)
		if n == protocol.ProcessStdinMaxBytes && (code != 0 || out.Len() != n) {
			t.Fatalf("%d bytes: exit %d, %d bytes out, stderr %q", n, code, out.Len(), errb.String())
		}
		if n > protocol.ProcessStdinMaxBytes && (code != 2 || len(f.runs) != 1 || !strings.Contains(errb.String(), "nothing was sent")) {
			t.Fatalf("%d bytes: exit %d, %d runs, stderr %q", n, code, len(f.runs), errb.String())
		}
	}

	small := newRunFake(t, 0) // the default maxPayload, 1 MiB
	o := defaultRunOptions("box", "cat")
	o.check(pflag.NewFlagSet("t", pflag.ContinueOnError))
	fits := func(n int) bool {
		p := protocol.ProcessRunParams{NodeID: "node-box", ProcessID: o.id, Cwd: o.cwd, Argv: o.argv,
			StdinBase64: base64.StdEncoding.EncodeToString(make([]byte, n)), TimeoutMs: 60000, MaxOutputBytes: o.maxOutput}
		return runFrameBytes(p) <= protocol.DefaultMaxPayload
	}
	most, over := 0, protocol.DefaultMaxPayload // fits(most), !fits(over)
	for over-most > 1 {
		if mid := (most + over) / 2; fits(mid) {
			most = mid
		} else {
			over = mid
		}
	}
	for _, n := range []int{most, most + 1} {
		var out, errb bytes.Buffer
		code := runRun(context.Background(), small.session(), o, bytes.NewReader(make([]byte, n)), false, &out, &errb)
		if n == most && (code != 0 || out.Len() != n) {
			t.Fatalf("%d bytes (the most that fits): exit %d, stderr %q", n, code, errb.String())
		}
		if n > most && (code != 1 || len(small.runs) != 1 || !strings.Contains(errb.String(), "nothing was sent") ||
			strings.Contains(errb.String(), "processId")) {
			t.Fatalf("%d bytes: exit %d, %d runs, stderr %q", n, code, len(small.runs), errb.String())
		}
	}
}

// Every flag bound at its edge: at the limit passes, one past fails.
func TestRunOptionBounds(t *testing.T) {
	type tc struct {
		name string
		set  func(o *runOptions)
		ok   bool
	}
	cases := []tc{
		{"timeout 1s", func(o *runOptions) { o.timeout = time.Second }, true},
		{"timeout 999ms", func(o *runOptions) { o.timeout = 999 * time.Millisecond }, false},
		{"timeout 30m", func(o *runOptions) { o.timeout = 30 * time.Minute }, true},
		{"timeout 30m1ms", func(o *runOptions) { o.timeout = 30*time.Minute + time.Millisecond }, false},
		{"timeout 1.5ms", func(o *runOptions) { o.timeout = 1500*time.Millisecond + 500*time.Microsecond }, false},
		{"max-output 1", func(o *runOptions) { o.maxOutput = 1 }, true},
		{"max-output 0", func(o *runOptions) { o.maxOutput = 0 }, false},
		{"max-output max", func(o *runOptions) { o.maxOutput = protocol.ProcessMaxOutputMax }, true},
		{"max-output max+1", func(o *runOptions) { o.maxOutput = protocol.ProcessMaxOutputMax + 1 }, false},
		{"id 128", func(o *runOptions) { o.id = strings.Repeat("a", 128) }, true},
		{"id 129", func(o *runOptions) { o.id = strings.Repeat("a", 129) }, false},
		{"id slash", func(o *runOptions) { o.id = "a/b" }, false},
		{"cwd ..", func(o *runOptions) { o.cwd = "../x" }, false},
		{"argv 128", func(o *runOptions) { o.argv = make([]string, 128); o.argv[0] = "true" }, true},
		{"argv 129", func(o *runOptions) { o.argv = make([]string, 129); o.argv[0] = "true" }, false},
		{"argv relative", func(o *runOptions) { o.argv = []string{"./x"} }, false},
	}
	for _, c := range cases {
		o := defaultRunOptions("box", "true")
		c.set(o)
		err := o.check(pflag.NewFlagSet("t", pflag.ContinueOnError))
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok=%v", c.name, err, c.ok)
		}
		if err != nil && strings.Contains(err.Error(), "./x") {
			t.Errorf("%s: the error echoes argv: %v", c.name, err)
		}
	}
}

// A receipt's exit code and state become lemon run's exit code and a line
// on stderr; nothing but a clean completed run is silent.
func TestPrintReceipt(t *testing.T) {
	b64 := func(s string) *string { e := base64.StdEncoding.EncodeToString([]byte(s)); return &e }
	intp := func(n int) *int { return &n }
	for _, c := range []struct {
		r        protocol.ProcessReceipt
		summary  bool
		code     int
		out, err string
	}{
		{protocol.ProcessReceipt{State: "completed", ExitCode: intp(0), StdoutBase64: b64("hi\n"), StderrBase64: b64("")}, false, 0, "hi\n", ""},
		{protocol.ProcessReceipt{State: "completed", ExitCode: intp(3), StdoutBase64: b64(""), StderrBase64: b64("e")}, false, 3, "", "e"},
		{protocol.ProcessReceipt{State: "completed", ExitCode: intp(0), StdoutBase64: b64("a"), StderrBase64: b64("")}, true, 0, "a",
			"lemon run: p1 on node n1: completed, exit code 0\n"},
		{protocol.ProcessReceipt{State: "cancelled", ExitCode: intp(-9), StdoutBase64: b64("part"), StderrBase64: b64(""), OutputTruncated: true}, false, 1, "part",
			"lemon run: p1 on node n1: cancelled, exit code -9; output truncated\n"},
		{protocol.ProcessReceipt{State: "completed", ExitCode: intp(-15), StdoutBase64: b64(""), StderrBase64: b64("")}, false, 143, "", ""},
		{protocol.ProcessReceipt{State: "running", OutputTruncated: true}, false, 1, "",
			"lemon run: p1 on node n1: running; 'lemon run n1 --get p1' again later; output not available\n"},
		{protocol.ProcessReceipt{State: "outcome_unknown", OutputTruncated: true}, true, 1, "",
			"lemon run: p1 on node n1: outcome_unknown; output not available\n"},
		{protocol.ProcessReceipt{State: "not_found", OutputTruncated: true}, true, 1, "", "lemon run: no run p1 on node n1\n"},
	} {
		c.r.ProcessID, c.r.NodeID = "p1", "n1"
		raw, _ := json.Marshal(c.r)
		var out, errb bytes.Buffer
		code := printReceipt(raw, false, c.summary, "n1", 0, &out, &errb)
		if code != c.code || out.String() != c.out || errb.String() != c.err {
			t.Errorf("%s %v: exit %d, stdout %q, stderr %q; want %d, %q, %q", c.r.State, c.summary, code, out.String(), errb.String(), c.code, c.out, c.err)
		}
	}
	if code := printReceipt(json.RawMessage(`{"state":"completed"}`), false, false, "n1", 0, &bytes.Buffer{}, &bytes.Buffer{}); code != 1 {
		t.Errorf("malformed receipt: exit %d", code)
	}
}

// --get prints the receipt again, by node name, and never runs anything.
func TestRunGet(t *testing.T) {
	f := newRunFake(t, 0)
	o := &runOptions{node: "box", get: "run-1"}
	if err := o.check(pflag.NewFlagSet("t", pflag.ContinueOnError)); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := runRun(context.Background(), f.session(), o, strings.NewReader("x"), false, &out, &errb); code != 1 ||
		errb.String() != "lemon run: no run run-1 on node node-box\n" || len(f.runs) != 0 {
		t.Fatalf("exit %d, stderr %q, %d runs", code, errb.String(), len(f.runs))
	}
}

// A refused run says "refused; nothing ran" (finding: it used to say the
// run may have started): a FORBIDDEN without outcome flags, or flags
// saying mutationMayHaveApplied:false. Without flags, or with
// mutationMayHaveApplied:true, the reconciliation hint names the node as
// typed ("box", not its nodeId).
func TestRunRefusedSaysNothingRan(t *testing.T) {
	f := newRunFake(t, 0)
	for _, c := range []struct{ argv0, last string }{
		{"denied", "lemon run: refused; nothing ran\n"},
		{"offline", "lemon run: refused; nothing ran\n"},
		{"lost", "lemon run: the run may have started: 'lemon run box --get p-1' shows what became of it (do not run it again under a new id)\n"},
		{"applied", "lemon run: the run may have started: 'lemon run box --get p-1' shows what became of it (do not run it again under a new id)\n"},
	} {
		o := defaultRunOptions("box", c.argv0)
		o.id = "p-1"
		if err := o.check(pflag.NewFlagSet("t", pflag.ContinueOnError)); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		code := runRun(context.Background(), f.session(), o, nil, true, &out, &errb)
		lines := strings.SplitAfter(errb.String(), "\n")
		if code != 1 || len(lines) != 4 || lines[2] != c.last ||
			lines[0] != "lemon run: processId p-1 on node node-box (lemon run box --get p-1 shows what became of it)\n" {
			t.Errorf("%s: exit %d, stderr %q", c.argv0, code, errb.String())
		}
	}
}

// A run lemon run sent that comes back cancelled without an output
// overflow timed out: the line says so, with the --timeout given.
func TestPrintReceiptTimedOut(t *testing.T) {
	intp := func(n int) *int { return &n }
	e := ""
	for _, c := range []struct {
		r    protocol.ProcessReceipt
		want string
	}{
		{protocol.ProcessReceipt{State: "cancelled", ExitCode: intp(-9), StdoutBase64: &e, StderrBase64: &e},
			"lemon run: p1 on node n1: timed out after 2s and was killed, exit code -9\n"},
		{protocol.ProcessReceipt{State: "cancelled", ExitCode: intp(0), StdoutBase64: &e, StderrBase64: &e},
			"lemon run: p1 on node n1: timed out after 2s and was stopped, exit code 0\n"},
		{protocol.ProcessReceipt{State: "cancelled", ExitCode: intp(-9), StdoutBase64: &e, StderrBase64: &e, OutputTruncated: true},
			"lemon run: p1 on node n1: cancelled, exit code -9; output truncated\n"},
		{protocol.ProcessReceipt{State: "running", OutputTruncated: true},
			"lemon run: p1 on node n1: running; 'lemon run box --get p1' again later; output not available\n"},
	} {
		c.r.ProcessID, c.r.NodeID = "p1", "n1"
		raw, _ := json.Marshal(c.r)
		var out, errb bytes.Buffer
		if code := printReceipt(raw, false, false, "box", 2*time.Second, &out, &errb); code != 1 || errb.String() != c.want {
			t.Errorf("%+v: exit %d, stderr %q, want %q", c.r, code, errb.String(), c.want)
		}
	}
}
