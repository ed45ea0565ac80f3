package spawn

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lemon/protocol"
)

func TestCompletedReceiptCarriesExactStreams(t *testing.T) {
	f := newFixture(t, nil)
	r := req("probe:fixed-1", "sh", "-c", "cat; printf 'diagnostic\\n' >&2")
	r.Stdin = []byte("Hello\n")
	rc := f.mustRun(r)
	if rc.State != protocol.ProcessStateCompleted || exitOf(rc) != "0" || string(rc.Stdout) != "Hello\n" ||
		string(rc.Stderr) != "diagnostic\n" || rc.OutputTruncated {
		t.Fatalf("receipt %+v stdout %q stderr %q", rc, rc.Stdout, rc.Stderr)
	}
}

func TestExitStatusAndEmptyOutputs(t *testing.T) {
	f := newFixture(t, nil)
	rc := f.mustRun(req("e3", "sh", "-c", "exit 3"))
	if rc.State != protocol.ProcessStateCompleted || exitOf(rc) != "3" {
		t.Fatalf("receipt %+v", rc)
	}
	// Known zero bytes are empty, not unknown.
	if rc.Stdout == nil || rc.Stderr == nil || len(rc.Stdout) != 0 || len(rc.Stderr) != 0 || rc.OutputTruncated {
		t.Fatalf("empty outputs %+v", rc)
	}
	// A process killed by a signal it did not get from us: completed,
	// exit code minus the signal number.
	rc = f.mustRun(req("self-kill", "sh", "-c", "kill -TERM $$"))
	if rc.State != protocol.ProcessStateCompleted || exitOf(rc) != "-15" {
		t.Fatalf("self-signalled receipt %+v", rc)
	}
}

func TestEmptyStdinIsEOF(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxPayload = 4 << 20 })
	rc := f.mustRun(req("cat-empty", "cat"))
	if rc.State != protocol.ProcessStateCompleted || exitOf(rc) != "0" || len(rc.Stdout) != 0 {
		t.Fatalf("%+v", rc)
	}
	// Large stdin is delivered exactly.
	big := bytes.Repeat([]byte{0, 1, 2, 0xff}, 256*1024) // 1 MiB
	r := req("cat-big", "cat")
	r.Stdin = big
	rc = f.mustRun(r)
	if !bytes.Equal(rc.Stdout, big) || rc.OutputTruncated {
		t.Fatalf("1 MiB stdin round trip: got %d bytes truncated=%v", len(rc.Stdout), rc.OutputTruncated)
	}
}

func TestArgvIsLiteral(t *testing.T) {
	f := newFixture(t, nil)
	rc := f.mustRun(req("argv", "printf", "%s|", "", "a b", `'"$HOME*`, "é", "; rm -rf /"))
	want := `|a b|'"$HOME*|é|; rm -rf /|`
	if string(rc.Stdout) != want {
		t.Fatalf("stdout %q, want %q", rc.Stdout, want)
	}
	// argv[0] reaches the program as sent.
	rc = f.mustRun(req("argv0", "sh", "-c", `printf %s "$0"`))
	if string(rc.Stdout) != "sh" {
		t.Fatalf("$0 = %q", rc.Stdout)
	}
}

func TestEnvironmentIsFixed(t *testing.T) {
	t.Setenv("LEMON_CANARY_TOKEN", "worker-secret")
	f := newFixture(t, nil)
	rc := f.mustRun(req("env", "env"))
	want := "PATH=/usr/bin:/bin\nHOME=" + f.root + "\nLANG=C.UTF-8\n"
	if string(rc.Stdout) != want {
		t.Fatalf("env %q, want %q", rc.Stdout, want)
	}
}

func TestOnlyStdioInherited(t *testing.T) {
	f := newFixture(t, nil)
	// An open descriptor of the worker (the store file is one) must not
	// reach the child.
	rc := f.mustRun(req("fds", "ls", "/proc/self/fd"))
	got := strings.Fields(string(rc.Stdout))
	// ls itself opens one descriptor to read the directory.
	if len(got) > 4 {
		t.Fatalf("child descriptors %v", got)
	}
	for _, fd := range got {
		n, _ := strconv.Atoi(fd)
		if n > 3 {
			t.Fatalf("child inherited descriptor %d (all: %v)", n, got)
		}
	}
}

func TestCwdIsTheAdmittedDescriptor(t *testing.T) {
	f := newFixture(t, nil)
	sub := filepath.Join(f.root, "sub")
	os.Mkdir(sub, 0o700)
	r := req("pwd", "pwd", "-P")
	r.Cwd = "sub"
	rc := f.mustRun(r)
	if string(rc.Stdout) != sub+"\n" {
		t.Fatalf("pwd %q, want %q", rc.Stdout, sub)
	}
	// The descriptor decides, not the returned path string.
	f.s.cfg.Dirs = lyingDirs{fdOf: sub}
	r = req("pwd2", "pwd", "-P")
	r.Cwd = "elsewhere"
	rc = f.mustRun(r)
	if string(rc.Stdout) != sub+"\n" {
		t.Fatalf("pwd %q, want the descriptor's directory %q", rc.Stdout, sub)
	}
	// Refused cwd: the resolver's error, nothing spent.
	f.s.cfg.Dirs = testDirs{root: f.root}
	r = req("outside", "true")
	r.Cwd = "/"
	if _, err := f.run(r); domain(err) != "FORBIDDEN/path_not_allowed" {
		t.Fatalf("outside cwd: %v", err)
	}
	f.nothingStarted()
}

// lyingDirs returns a descriptor of fdOf and a canonical path that does not
// exist.
type lyingDirs struct{ fdOf string }

func (d lyingDirs) OpenDir(string) (int, string, error) {
	fd, err := unix.Open(d.fdOf, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	return fd, "/nonexistent/elsewhere", err
}

func TestInvalidUTF8OutputIsByteExact(t *testing.T) {
	f := newFixture(t, nil)
	rc := f.mustRun(req("bytes", "printf", `\377\376\000abc\300\n`))
	want := []byte{0xff, 0xfe, 0x00, 'a', 'b', 'c', 0xc0, '\n'}
	if !bytes.Equal(rc.Stdout, want) {
		t.Fatalf("stdout % x, want % x", rc.Stdout, want)
	}
}

func TestOutputCapIsCombined(t *testing.T) {
	f := newFixture(t, nil)
	// Exactly at the cap: complete, not truncated.
	r := req("at-cap", "sh", "-c", "printf 12345; printf 67890 >&2")
	r.MaxOutputBytes = 10
	rc := f.mustRun(r)
	if rc.State != protocol.ProcessStateCompleted || len(rc.Stdout)+len(rc.Stderr) != 10 || rc.OutputTruncated {
		t.Fatalf("at cap: %+v", rc)
	}
	// One byte over: truncated to the cap.
	r = req("over-cap", "sh", "-c", "printf 12345; printf 678901 >&2")
	r.MaxOutputBytes = 10
	rc = f.mustRun(r)
	if len(rc.Stdout)+len(rc.Stderr) != 10 || !rc.OutputTruncated || rc.ExitCode == nil {
		t.Fatalf("one over: %+v", rc)
	}
	// A flood: the group is stopped once the cap is passed.
	r = req("flood", "sh", "-c", "yes & yes >&2; wait")
	r.MaxOutputBytes = 100
	h, _, err := f.start(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	rc, _ = h.Result()
	if rc.State != protocol.ProcessStateCancelled || exitOf(rc) != "-9" || !rc.OutputTruncated ||
		len(rc.Stdout)+len(rc.Stderr) != 100 {
		t.Fatalf("flood: %+v (%d+%d bytes)", rc, len(rc.Stdout), len(rc.Stderr))
	}
	if live := groupGone(t, h.r.pgid); len(live) != 0 {
		t.Fatalf("group members alive after overflow: %v", live)
	}
	if h.r.exit.stopped != reasonOverflow {
		t.Fatalf("reason %q", h.r.exit.stopped)
	}
}

func TestPayloadBudgetCapsOutput(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxPayload = 8192 })
	r := req("budget", "head", "-c", "100000", "/dev/zero")
	rc := f.mustRun(r)
	if len(rc.Stdout) != protocol.ProcessOutputBudget(8192) || !rc.OutputTruncated {
		t.Fatalf("budgeted output %d bytes, truncated %v", len(rc.Stdout), rc.OutputTruncated)
	}
}

func TestTimeoutKillsGroupHoldingStdout(t *testing.T) {
	// Margins for a loaded machine: the shell must print the grandchild's
	// pid before the timeout, and the killed grandchild must close stdout
	// within WaitDelay for the output to count as complete.
	f := newFixture(t, func(cfg *Config) { cfg.WaitDelay = 2 * time.Second })
	// The child forks a grandchild that holds stdout, then waits too.
	r := req("grandchild", "sh", "-c", "sleep 30 & echo $!; sleep 30")
	r.timeout = 2 * time.Second
	h, _, err := f.start(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := h.Result()
	if err != nil {
		t.Fatal(err)
	}
	if rc.State != protocol.ProcessStateCancelled || exitOf(rc) != "-9" || rc.OutputTruncated {
		t.Fatalf("receipt %+v", rc)
	}
	gpid, _ := strconv.Atoi(strings.TrimSpace(string(rc.Stdout)))
	if gpid <= 0 || !gone(gpid) {
		t.Fatalf("grandchild %d still alive (stdout %q)", gpid, rc.Stdout)
	}
	if live := groupGone(t, h.r.pgid); len(live) != 0 {
		t.Fatalf("group %d still has %v", h.r.pgid, live)
	}
	if h.r.exit.stopped != reasonTimeout {
		t.Fatalf("reason %q", h.r.exit.stopped)
	}
}

func TestGrandchildHoldingPipeAfterExitCannotHangWait(t *testing.T) {
	f := newFixture(t, nil)
	// The leader exits at once; its background grandchild keeps stdout.
	r := req("daemonish", "sh", "-c", "sleep 30 & echo $!")
	h, _, err := f.start(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := h.Result()
	if err != nil {
		t.Fatal(err)
	}
	// Its own exit was observed; output may be incomplete (pipes were
	// closed after WaitDelay) and the group was cleaned up.
	if rc.State != protocol.ProcessStateCompleted || exitOf(rc) != "0" || !rc.OutputTruncated {
		t.Fatalf("receipt %+v", rc)
	}
	gpid, _ := strconv.Atoi(strings.TrimSpace(string(rc.Stdout)))
	if gpid <= 0 || !gone(gpid) {
		t.Fatalf("grandchild %d alive", gpid)
	}
	if live := groupGone(t, h.r.pgid); len(live) != 0 {
		t.Fatalf("group still has %v", live)
	}
}

func TestSignalsGroupAtMostOnce(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	f := newFixture(t, nil)
	f.s.killFn = func(r *run) error {
		mu.Lock()
		calls++
		mu.Unlock()
		return r.killMembers()
	}
	r := req("once", "sh", "-c", "sleep 30 & yes; wait")
	r.MaxOutputBytes = 10
	r.timeout = 50 * time.Millisecond
	h, _, err := f.start(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	h.Result()
	// Overflow, timeout, a cancel and pipe cleanup all converge on one
	// signal.
	f.cancel("once", 0)
	h.r.stop(reasonCancel)
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Fatalf("group signalled %d times", calls)
	}
}

func TestFirstSignalFailureIsAnError(t *testing.T) {
	f := newFixture(t, nil)
	f.s.killFn = func(*run) error { return unix.EPERM }
	r := req("eperm", "sleep", "0.3")
	r.timeout = 20 * time.Millisecond
	h, _, err := f.start(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Result()
	if domain(err) != "INTERNAL_ERROR/process_signal_failed" {
		t.Fatalf("result error %v", err)
	}
	pe := err.(*protocol.Error)
	if *pe.Details.RetrySafe || !*pe.Details.MutationMayHaveApplied {
		t.Fatalf("retry details %+v", pe.Details)
	}
	if !h.r.exit.signalFailed {
		t.Fatalf("spawn.wait does not say the signal failed: %+v", h.r.exit)
	}
}

func TestStartFailuresAreErrorsAndSpendNothing(t *testing.T) {
	f := newFixture(t, nil)
	noexec := filepath.Join(f.root, "noexec")
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o600)
	garbage := filepath.Join(f.root, "garbage")
	os.WriteFile(garbage, []byte("\x00\x01\x02 not a program"), 0o700)
	cases := []struct {
		id   string
		argv []string
		want string
	}{
		{"missing", []string{"lemon-no-such-command"}, "NOT_FOUND/executable_not_found"},
		{"missing-abs", []string{"/nonexistent/cmd"}, "NOT_FOUND/executable_not_found"},
		{"not-exec", []string{noexec}, "FORBIDDEN/permission_denied"},
		{"dir", []string{"/usr"}, "FORBIDDEN/permission_denied"},
		{"format", []string{garbage}, "INVALID_PARAMS/exec_format_error"},
	}
	for _, c := range cases {
		_, err := f.run(req(c.id, c.argv...))
		if domain(err) != c.want {
			t.Errorf("%s: %v, want %s", c.id, err, c.want)
			continue
		}
		pe := err.(*protocol.Error)
		if !*pe.Details.RetrySafe || *pe.Details.MutationMayHaveApplied {
			t.Errorf("%s: retry details %+v", c.id, pe.Details)
		}
		if strings.Contains(pe.Message, "/") || strings.Contains(pe.Message, "lemon-no-such") {
			t.Errorf("%s: message leaks: %q", c.id, pe.Message)
		}
		f.nothingStarted()
	}
	// The largest valid argv runs.
	big := req("argv-max", "true", strings.Repeat("a", protocol.ProcessArgvMaxBytes-4))
	if rc := f.mustRun(big); rc.State != protocol.ProcessStateCompleted {
		t.Fatalf("largest argv %+v", rc)
	}
	// With a small stack limit the kernel's argument space shrinks to
	// 128 KiB, so the same argv (plus its NULs and environment) is E2BIG.
	var old unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_STACK, &old)
	small := old
	small.Cur = 256 << 10
	if err := unix.Setrlimit(unix.RLIMIT_STACK, &small); err != nil {
		t.Skip("cannot lower RLIMIT_STACK")
	}
	big.ProcessID = "e2big"
	_, err := f.run(big)
	unix.Setrlimit(unix.RLIMIT_STACK, &old)
	if domain(err) != "INVALID_PARAMS/argument_list_too_long" {
		t.Fatalf("e2big: %v", err)
	}
	f.nothingStarted()
}

func TestCommandPolicy(t *testing.T) {
	copyDir := t.TempDir()
	fake := filepath.Join(copyDir, "printf")
	os.Symlink("/usr/bin/cat", fake)
	// A tool and a hard link to it under another name and directory, and
	// a byte-for-byte copy (a different file).
	toolDir, linkDir := t.TempDir(), t.TempDir()
	tool, alias, clone := filepath.Join(toolDir, "tool"), filepath.Join(linkDir, "alias"), filepath.Join(linkDir, "clone")
	script := []byte("#!/bin/sh\nexit 0\n")
	if err := os.WriteFile(tool, script, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(tool, alias); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(clone, script, 0o755); err != nil {
		t.Fatal(err)
	}
	empty := []string{}
	some := []string{"printf", "/usr/bin/env"}
	all := []string{"all"}
	cases := []struct {
		name    string
		allowed *[]string
		blocked []string
		argv0   string
		ok      bool
	}{
		{"nil allows", nil, nil, "cat", true},
		{"all allows", &all, nil, "cat", true},
		{"empty allows none", &empty, nil, "true", false},
		{"allowed by name", &some, nil, "printf", true},
		{"allowed name covers its resolved path", &some, nil, "/usr/bin/printf", true},
		{"not listed", &some, nil, "cat", false},
		{"allowed by path", &some, nil, "env", true},
		{"name does not allow a look-alike", &some, nil, fake, false},
		{"blocked by name", nil, []string{"cat"}, "/usr/bin/cat", false},
		{"blocked via symlink target", nil, []string{"/usr/bin/cat"}, fake, false},
		{"blocked by target base name", nil, []string{"cat"}, fake, false},
		{"block wins over allow", &some, []string{"printf"}, "printf", false},
		{"block other", nil, []string{"rm"}, "true", true},
		{"blocked path covers a hard link", nil, []string{tool}, alias, false},
		{"blocked path covers itself", nil, []string{tool}, tool, false},
		{"a copy is another file", nil, []string{tool}, clone, true},
		{"blocked name covers a hard link of its PATH file", nil, []string{"tool"}, alias, false},
		{"blocked name does not cover a copy", nil, []string{"tool"}, clone, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, func(cfg *Config) {
				cfg.AllowedCommands, cfg.BlockedCommands = c.allowed, c.blocked
				// toolDir is on PATH, so the bare name "tool" resolves there.
				cfg.Env = append([]string{"PATH=" + toolDir + ":/usr/bin:/bin"}, "HOME="+toolDir, "LANG=C.UTF-8")
			})
			_, err := f.run(req("p", c.argv0, "x"))
			if c.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !c.ok && domain(err) != "FORBIDDEN/command_not_allowed" {
				t.Fatalf("got %v, want command_not_allowed", err)
			}
		})
	}
}

func TestRequestEndStopsRun(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	h, _, err := f.start(ctx, req("ctx", "sleep", "30"))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	rc, _ := h.Result()
	if rc.State != protocol.ProcessStateCancelled || exitOf(rc) != "-9" || h.r.exit.stopped != reasonAborted {
		t.Fatalf("%+v reason %q", rc, h.r.exit.stopped)
	}
}

func TestCloseStopsActiveRuns(t *testing.T) {
	f := newFixture(t, nil)
	h, _, err := f.start(context.Background(), req("sd", "sleep", "30"))
	if err != nil {
		t.Fatal(err)
	}
	f.s.Close()
	rc, _ := h.Result()
	if rc.State != protocol.ProcessStateCancelled || h.r.exit.stopped != reasonShutdown {
		t.Fatalf("%+v", rc)
	}
	if _, _, err := f.start(context.Background(), req("after", "true")); domain(err) != "UNAVAILABLE/process_store_unavailable" {
		t.Fatalf("start after close: %v", err)
	}
	f.s = nil
}

func TestCanaryNeverReachesDiskOrErrors(t *testing.T) {
	const canary = "CANARY-7f3a9c"
	f := newFixture(t, nil)
	var errs []string
	r := req("canary", "sh", "-c", "cat; printf %s \"$1\" >&2", "sh", canary+"-argv")
	r.Stdin = []byte(canary + "-stdin")
	rc := f.mustRun(r)
	if !strings.Contains(string(rc.Stdout), canary) || !strings.Contains(string(rc.Stderr), canary) {
		t.Fatalf("canary did not round-trip: %+v", rc)
	}
	// Failure paths with the canary in argv and cwd.
	for _, bad := range []Request{
		req("c-missing", canary+"-cmd"),
		req("c-abs", "/"+canary),
		{ProcessID: "c-cwd", Cwd: canary, Argv: []string{"true"}, TimeoutMs: 1000, MaxOutputBytes: 1},
	} {
		_, err := f.run(bad)
		if err == nil {
			t.Fatalf("%s succeeded", bad.ProcessID)
		}
		b, _ := protocolJSON(err)
		errs = append(errs, err.Error(), string(b))
	}
	f.s.Close()
	f.s = nil
	f.st.Close()
	f.st = nil
	for _, e := range errs {
		if strings.Contains(e, canary) {
			t.Fatalf("error leaks the canary: %s", e)
		}
	}
	filepath.Walk(f.dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(p)
		if bytes.Contains(b, []byte(canary)) {
			t.Errorf("%s holds the canary", p)
		}
		return nil
	})
}

func protocolJSON(err error) ([]byte, error) {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return []byte(pe.Code + pe.Message + pe.DomainCode()), nil
	}
	return []byte(err.Error()), nil
}
