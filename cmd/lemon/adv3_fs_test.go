package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAdv3FSNamesTerminalSafe: a file name on the node holding a terminal
// escape (ESC, BEL, CR, a bidi override) is printed escaped by lemon fs
// ls and in lemon fs rm's prompt, never raw: a name could otherwise
// rewrite the operator's screen (hide what rm is about to delete).
func TestAdv3FSNamesTerminalSafe(t *testing.T) {
	c, root := fsFixture(t, 1<<20)
	evil := "x\x1b]0;owned\x07\rharmless\u202etxt"
	if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "d", evil), []byte("a"), 0o644); err != nil {
		t.Skip("this file system refuses the name:", err)
	}
	var out bytes.Buffer
	if err := c.ls(context.Background(), &out, []string{"d"}, false); err != nil {
		t.Fatal(err)
	}
	var prompt bytes.Buffer
	if err := c.rm(context.Background(), strings.NewReader("n\n"), &prompt, []string{"d/" + evil}, false, false); err != nil {
		t.Fatal(err)
	}
	for what, s := range map[string]string{"ls": out.String(), "rm prompt": prompt.String()} {
		if strings.ContainsAny(s, "\x1b\x07\r\u202e") {
			t.Errorf("%s prints a raw control or bidi character: %q", what, s)
		}
		if !strings.Contains(s, `\x1b`) {
			t.Errorf("%s does not show the name escaped: %q", what, s)
		}
	}
}

// TestAdv3RunReceiptNodeIDEscaped: a receipt whose nodeId (the node
// writes it) holds a control character never reaches the terminal raw:
// protocol.RequireNodeID refuses it (a malformed receipt, exit 1), and
// the status line prints through termSafe besides.
func TestAdv3RunReceiptNodeIDEscaped(t *testing.T) {
	raw := []byte(`{"processId":"run-1","nodeId":"n\u001b[2Jx","state":"running","exitCode":null,` +
		`"stdoutBase64":null,"stderrBase64":null,"outputTruncated":true}`)
	var stdout, stderr bytes.Buffer
	if code := printReceipt(raw, false, true, "n1", 0, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d", code)
	}
	if strings.Contains(stderr.String(), "\x1b") || !strings.Contains(stderr.String(), "malformed receipt") {
		t.Fatalf("status line: %q", stderr.String())
	}
}
