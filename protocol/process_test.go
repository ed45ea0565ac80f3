package protocol

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func runParams(mut func(m map[string]any)) json.RawMessage {
	m := map[string]any{
		"nodeId": "n1", "processId": "probe:fixed-1", "cwd": ".",
		"argv": []any{"printf", "%s", "x"}, "stdinBase64": "SGVsbG8K",
		"timeoutMs": 30000, "maxOutputBytes": 1048576,
	}
	if mut != nil {
		mut(m)
	}
	b, _ := json.Marshal(m)
	return b
}

func TestParseProcessRunValid(t *testing.T) {
	p, err := ParseProcessRun(runParams(nil))
	if err != nil {
		t.Fatal(err)
	}
	if p.ProcessID != "probe:fixed-1" || p.Cwd != "." || len(p.Argv) != 3 || p.Argv[1] != "%s" ||
		p.StdinBase64 != "SGVsbG8K" || p.TimeoutMs != 30000 || p.MaxOutputBytes != 1048576 || p.NodeID != "n1" {
		t.Fatalf("decoded %+v", p)
	}
}

func TestParseProcessRunRejects(t *testing.T) {
	long := strings.Repeat("a", 129)
	cases := []struct {
		name  string
		mut   func(m map[string]any)
		raw   string
		field string
	}{
		{name: "missing cwd", mut: func(m map[string]any) { delete(m, "cwd") }, field: "cwd"},
		{name: "null cwd", mut: func(m map[string]any) { m["cwd"] = nil }, field: "cwd"},
		{name: "missing stdin", mut: func(m map[string]any) { delete(m, "stdinBase64") }, field: "stdinBase64"},
		{name: "missing timeout", mut: func(m map[string]any) { delete(m, "timeoutMs") }, field: "timeoutMs"},
		{name: "missing maxOutputBytes", mut: func(m map[string]any) { delete(m, "maxOutputBytes") }, field: "maxOutputBytes"},
		{name: "missing nodeId", mut: func(m map[string]any) { delete(m, "nodeId") }, field: "nodeId"},
		{name: "env not allowed", mut: func(m map[string]any) { m["env"] = map[string]any{} }, field: "env"},
		{name: "unknown key is not echoed unless identifier-like", mut: func(m map[string]any) { m["SECRET-value"] = 1 }, field: "?"},
		{name: "case variant key", mut: func(m map[string]any) { delete(m, "cwd"); m["CWD"] = "." }, field: "CWD"},
		{name: "empty processId", mut: func(m map[string]any) { m["processId"] = "" }, field: "processId"},
		{name: "processId 129", mut: func(m map[string]any) { m["processId"] = long }, field: "processId"},
		{name: "processId slash", mut: func(m map[string]any) { m["processId"] = "a/b" }, field: "processId"},
		{name: "processId space", mut: func(m map[string]any) { m["processId"] = "a b" }, field: "processId"},
		{name: "processId unicode", mut: func(m map[string]any) { m["processId"] = "é" }, field: "processId"},
		{name: "argv empty", mut: func(m map[string]any) { m["argv"] = []any{} }, field: "argv"},
		{name: "argv not array", mut: func(m map[string]any) { m["argv"] = "ls" }, field: "argv"},
		{name: "argv null element", mut: func(m map[string]any) { m["argv"] = []any{"ls", nil} }, field: "argv"},
		{name: "argv number element", mut: func(m map[string]any) { m["argv"] = []any{"ls", 1} }, field: "argv"},
		{name: "argv0 empty", mut: func(m map[string]any) { m["argv"] = []any{"", "x"} }, field: "argv"},
		{name: "argv0 relative path", mut: func(m map[string]any) { m["argv"] = []any{"./x"} }, field: "argv"},
		{name: "argv NUL", mut: func(m map[string]any) { m["argv"] = []any{"ls", "a\x00b"} }, field: "argv"},
		{name: "argv 129 strings", mut: func(m map[string]any) { m["argv"] = strs(129, "x") }, field: "argv"},
		{name: "argv string too long", mut: func(m map[string]any) {
			m["argv"] = []any{"x", strings.Repeat("a", ProcessArgvMaxBytes)}
		}, field: "argv"},
		{name: "argv one arg 131073", mut: func(m map[string]any) { m["argv"] = []any{"/" + strings.Repeat("a", ProcessArgvMaxBytes)} }, field: "argv"},
		{name: "cwd empty", mut: func(m map[string]any) { m["cwd"] = "" }, field: "cwd"},
		{name: "cwd dotdot", mut: func(m map[string]any) { m["cwd"] = "a/../b" }, field: "cwd"},
		{name: "cwd dotdot alone", mut: func(m map[string]any) { m["cwd"] = ".." }, field: "cwd"},
		{name: "cwd NUL", mut: func(m map[string]any) { m["cwd"] = "a\x00" }, field: "cwd"},
		{name: "cwd 4097", mut: func(m map[string]any) { m["cwd"] = strings.Repeat("a", 4097) }, field: "cwd"},
		{name: "stdin not base64", mut: func(m map[string]any) { m["stdinBase64"] = "!!!!" }, field: "stdinBase64"},
		{name: "stdin unpadded", mut: func(m map[string]any) { m["stdinBase64"] = "SGVsbG8" }, field: "stdinBase64"},
		{name: "stdin url alphabet", mut: func(m map[string]any) { m["stdinBase64"] = "-_-_" }, field: "stdinBase64"},
		{name: "stdin newline", mut: func(m map[string]any) { m["stdinBase64"] = "SGVs\nbG8K" }, field: "stdinBase64"},
		{name: "stdin too big", mut: func(m map[string]any) {
			m["stdinBase64"] = base64.StdEncoding.EncodeToString(make([]byte, ProcessStdinMaxBytes+1))
		}, field: "stdinBase64"},
		{name: "timeout 999", mut: func(m map[string]any) { m["timeoutMs"] = 999 }, field: "timeoutMs"},
		{name: "timeout 1800001", mut: func(m map[string]any) { m["timeoutMs"] = 1800001 }, field: "timeoutMs"},
		{name: "timeout fraction", mut: func(m map[string]any) { m["timeoutMs"] = 1000.5 }, field: "timeoutMs"},
		{name: "timeout string", mut: func(m map[string]any) { m["timeoutMs"] = "1000" }, field: "timeoutMs"},
		{name: "maxOutput 0", mut: func(m map[string]any) { m["maxOutputBytes"] = 0 }, field: "maxOutputBytes"},
		{name: "maxOutput 1048577", mut: func(m map[string]any) { m["maxOutputBytes"] = 1048577 }, field: "maxOutputBytes"},
		{name: "maxOutput negative", mut: func(m map[string]any) { m["maxOutputBytes"] = -1 }, field: "maxOutputBytes"},
		{name: "duplicate key", raw: `{"nodeId":"n1","processId":"a","processId":"b","cwd":".","argv":["ls"],"stdinBase64":"","timeoutMs":1000,"maxOutputBytes":1}`, field: "processId"},
		{name: "exponent", raw: `{"nodeId":"n1","processId":"a","cwd":".","argv":["ls"],"stdinBase64":"","timeoutMs":1e3,"maxOutputBytes":1}`, field: "timeoutMs"},
		{name: "not object", raw: `[]`, field: ""},
		{name: "trailing data", raw: `{"nodeId":"n1","processId":"a","cwd":".","argv":["ls"],"stdinBase64":"","timeoutMs":1000,"maxOutputBytes":1} {}`, field: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := json.RawMessage(c.raw)
			if c.raw == "" {
				raw = runParams(c.mut)
			}
			_, err := ParseProcessRun(raw)
			if err == nil {
				t.Fatal("accepted")
			}
			if err.Code != CodeInvalidParams || err.Details == nil || err.Details.Field != c.field {
				t.Fatalf("got %+v details %+v, want INVALID_PARAMS field %q", err, err.Details, c.field)
			}
			if strings.Contains(err.Message, "SGVsbG8") || strings.Contains(err.Message, "printf") {
				t.Fatalf("error echoes a value: %q", err.Message)
			}
		})
	}
}

func strs(n int, s string) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestParseProcessRunBoundaries(t *testing.T) {
	ok := []struct {
		name string
		mut  func(m map[string]any)
	}{
		{"processId 128", func(m map[string]any) {
			m["processId"] = strings.Repeat("A", 64) + strings.Repeat("z9_:-", 12) + "abcd"
		}},
		{"processId 1", func(m map[string]any) { m["processId"] = "-" }},
		{"argv 128 strings", func(m map[string]any) { m["argv"] = strs(128, "x") }},
		{"argv one string 131072", func(m map[string]any) { m["argv"] = []any{"/" + strings.Repeat("a", ProcessArgvMaxBytes-1)} }},
		{"argv total 131072", func(m map[string]any) {
			m["argv"] = []any{"x", strings.Repeat("a", ProcessArgvMaxBytes/2), strings.Repeat("b", ProcessArgvMaxBytes/2-1)}
		}},
		{"argv later empty, unicode, quotes", func(m map[string]any) { m["argv"] = []any{"echo", "", "é ü", `"'$HOME`} }},
		{"cwd 4096", func(m map[string]any) { m["cwd"] = strings.Repeat("a", 4096) }},
		{"cwd dots", func(m map[string]any) { m["cwd"] = "./...a/..b/.." + "x" }},
		{"stdin empty", func(m map[string]any) { m["stdinBase64"] = "" }},
		{"stdin 1048576", func(m map[string]any) {
			m["stdinBase64"] = base64.StdEncoding.EncodeToString(make([]byte, ProcessStdinMaxBytes))
		}},
		{"timeout 1000", func(m map[string]any) { m["timeoutMs"] = 1000 }},
		{"timeout 1800000", func(m map[string]any) { m["timeoutMs"] = 1800000 }},
		{"maxOutput 1", func(m map[string]any) { m["maxOutputBytes"] = 1 }},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ParseProcessRun(runParams(c.mut)); err != nil {
				t.Fatalf("rejected: %v", err)
			}
		})
	}
}

func TestParseProcessRunNoStdin(t *testing.T) {
	raw := runParams(func(m map[string]any) { delete(m, "stdinBase64") })
	if _, err := ParseProcessRunNoStdin(raw); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseProcessRunNoStdin(runParams(nil)); err == nil || err.Details.Field != "stdinBase64" {
		t.Fatalf("stdinBase64 present after host removal: %v", err)
	}
}

func TestParseProcessID(t *testing.T) {
	p, err := ParseProcessID(json.RawMessage(`{"nodeId":"n1","processId":"p:1"}`))
	if err != nil || p.ProcessID != "p:1" || p.NodeID != "n1" {
		t.Fatalf("%+v %v", p, err)
	}
	for _, raw := range []string{`{"nodeId":"n1"}`, `{"nodeId":"n1","processId":"p","x":1}`, `{"nodeId":"n1","processId":"p p"}`, `{"processId":"p"}`, `{"nodeId":"n1","processId":5}`} {
		if _, err := ParseProcessID(json.RawMessage(raw)); err == nil || err.Code != CodeInvalidParams {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

func TestProcessMethodsRegistered(t *testing.T) {
	run, ok := LookupMethod(MethodProcessRun)
	if !ok || run.Version != 1 || !run.NoGenericInvoke || run.CallerSlack != time.Second {
		t.Fatalf("run spec %+v", run)
	}
	if d := run.BrokerDeadline(runParams(func(m map[string]any) { m["timeoutMs"] = 1000 })); d != 6*time.Second {
		t.Fatalf("run deadline %v", d)
	}
	if d := run.BrokerDeadline(runParams(func(m map[string]any) { m["timeoutMs"] = 1800000 })); d != 1805*time.Second {
		t.Fatalf("run deadline %v", d)
	}
	for _, n := range []string{MethodProcessGet, MethodProcessCancel} {
		s, ok := LookupMethod(n)
		if !ok || s.Version != 1 || !s.NoGenericInvoke || s.BrokerDeadline(nil) != 30*time.Second {
			t.Fatalf("%s spec %+v", n, s)
		}
		if s.Validate(json.RawMessage(`{"nodeId":"n1","processId":"a"}`)) != nil {
			t.Fatalf("%s rejects valid params", n)
		}
	}
	if run.Validate(runParams(nil)) != nil {
		t.Fatal("run rejects valid params")
	}
}

func TestProcessReceiptValidate(t *testing.T) {
	zero, s := 0, ""
	good := []ProcessReceipt{
		{ProcessID: "a", NodeID: "n", State: ProcessStateCompleted, ExitCode: &zero, StdoutBase64: &s, StderrBase64: &s},
		{ProcessID: "a", NodeID: "n", State: ProcessStateCompleted, ExitCode: &zero, OutputTruncated: true},
		{ProcessID: "a", NodeID: "n", State: ProcessStateCancelled, OutputTruncated: true},
		{ProcessID: "a", NodeID: "n", State: ProcessStateRunning, OutputTruncated: true},
		{ProcessID: "a", NodeID: "n", State: ProcessStateNotFound, OutputTruncated: true},
	}
	for i, r := range good {
		if err := r.Validate(); err != nil {
			t.Errorf("good %d: %v", i, err)
		}
	}
	bad := []ProcessReceipt{
		{ProcessID: "a", NodeID: "n", State: ProcessStateCompleted, StdoutBase64: &s, StderrBase64: &s},
		{ProcessID: "a", NodeID: "n", State: ProcessStateRunning, ExitCode: &zero, OutputTruncated: true},
		{ProcessID: "a", NodeID: "n", State: ProcessStateRunning},
		{ProcessID: "a", NodeID: "n", State: ProcessStateCancelled},
		{ProcessID: "a", NodeID: "n", State: "done", OutputTruncated: true},
	}
	for i, r := range bad {
		if err := r.Validate(); err == nil {
			t.Errorf("bad %d accepted", i)
		}
	}
	b, _ := json.Marshal(ProcessReceipt{ProcessID: "a", NodeID: "n", State: ProcessStateRunning, OutputTruncated: true})
	want := `{"processId":"a","nodeId":"n","state":"running","exitCode":null,"stdoutBase64":null,"stderrBase64":null,"outputTruncated":true}`
	if string(b) != want {
		t.Fatalf("marshal %s", b)
	}
}

// maxEncoded2 is the longest base64 of n bytes split over two strings:
// the worst split puts a residue of 1 (mod 3) in both when it can.
func maxEncoded2(n int) int {
	worst := 0
	for a := range min(n, 5) + 1 {
		worst = max(worst, 4*((a+2)/3)+4*((n-a+2)/3))
	}
	return worst
}

func TestProcessOutputBudget(t *testing.T) {
	for _, mp := range []int{0, 8 << 10, 64 << 10, 65536 - 131, 1 << 20, 4 << 20} {
		n := ProcessOutputBudget(mp)
		if mp == 0 {
			mp = DefaultMaxPayload
		}
		if enc := maxEncoded2(n); enc+ProcessReceiptReserve > mp {
			t.Errorf("maxResult %d: budget %d encodes to %d", mp, n, enc)
		}
		// One byte more can exceed the room: the budget is the largest.
		if enc := maxEncoded2(n + 1); enc+ProcessReceiptReserve <= mp {
			t.Errorf("maxResult %d: budget %d is not the largest (%d encodes to %d)", mp, n, n+1, enc)
		}
	}
	if got := ProcessOutputBudget(1 << 20); got != 783358 {
		t.Errorf("budget for 1 MiB = %d", got)
	}
	if got := ProcessOutputBudget(100); got != 1 {
		t.Errorf("budget below the reserve = %d, want 1", got)
	}
}
