package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"lemon/client"
	"lemon/protocol"
	"lemon/worker"
)

// A usage error of lemon nodes is one line naming the mistake and the
// help hint, exit 2 (it used to print the whole usage).
func TestNodesUsageLine(t *testing.T) {
	noEnv := func(string) string { return "" }
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, "lemon nodes: unknown subcommand \"bogus\": approve CODE, reject CODE, rename NODE NAME; run 'lemon nodes --help'\n"},
		{[]string{"approve"}, "lemon nodes: CODE is missing: approve CODE; run 'lemon nodes --help'\n"},
		{[]string{"rename", "n1"}, "lemon nodes: NAME is missing: rename NODE NAME; run 'lemon nodes --help'\n"},
		{[]string{"reject", "a", "b"}, "lemon nodes: reject takes CODE, got 2 words; run 'lemon nodes --help'\n"},
	} {
		var out, errb bytes.Buffer
		if code := runNodes(context.Background(), c.args, noEnv, &out, &errb); code != 2 || errb.String() != c.want || out.Len() != 0 {
			t.Errorf("%q: exit %d, stderr %q, want %q", c.args, code, errb.String(), c.want)
		}
	}
}

// lemon fs names the missing or extra word: ls, stat and rm take NODE and
// one or more paths, mv, get and put exactly two.
func TestFSWordsError(t *testing.T) {
	for _, c := range []struct {
		words []string
		want  string
	}{
		{nil, "COMMAND is missing: ls, stat, mv, rm, get, put"},
		{[]string{"ls"}, "NODE PATH is missing: ls NODE PATH"},
		{[]string{"ls", "n2b"}, "PATH is missing: ls NODE PATH"},
		{[]string{"ls", "n2b", "/a"}, ""},
		{[]string{"rm", "n2b", "/a", "/b", "/c"}, ""},
		{[]string{"cp", "n", "a", "b"}, "unknown subcommand \"cp\": ls, stat, mv, rm, get, put"},
		{[]string{"mv", "n", "a"}, "DST is missing: mv NODE SRC DST"},
		{[]string{"mv", "n", "a", "b"}, ""},
		{[]string{"put", "n", "a", "b", "c"}, "put takes NODE LOCAL REMOTE, got 4 words"},
	} {
		if got := fsWordsError(c.words); got != c.want {
			t.Errorf("%q: %q, want %q", c.words, got, c.want)
		}
	}
	var errb bytes.Buffer
	if code := usageLine(&errb, "fs", fsWordsError([]string{"ls", "n2b"})); code != 2 ||
		errb.String() != "lemon fs: PATH is missing: ls NODE PATH; run 'lemon fs --help'\n" {
		t.Fatalf("exit %d, %q", code, errb.String())
	}
}

// fs put into a missing remote directory names --mkdirs; with --mkdirs,
// or for any other error, the error is unchanged.
func TestPutMkdirsHint(t *testing.T) {
	nf := protocol.DomainError(protocol.CodeNotFound, protocol.DomainNotFound, "no such file or directory")
	if got := putMkdirsHint(nf, false); got == nil || got.Error() !=
		"NOT_FOUND (not_found): no such file or directory; the remote directory does not exist: pass --mkdirs to create it" {
		t.Fatalf("got %v", got)
	}
	if got := putMkdirsHint(nf, true); got != error(nf) {
		t.Fatalf("with --mkdirs: %v", got)
	}
	other := errors.New("local path is not a regular file")
	if got := putMkdirsHint(other, false); got != other || putMkdirsHint(nil, false) != nil {
		t.Fatalf("other: %v", got)
	}
}

// The approval notice of lemon fs starts with "lemon fs:" like its other
// lines.
func TestFSApprovalNoticePrefix(t *testing.T) {
	var b bytes.Buffer
	approvalNotice(&b, "lemon fs")(protocol.Event{Event: protocol.EventApprovalRequested, Payload: []byte(`{"approvalId":"appr-1"}`)})
	if b.String() != "lemon fs: waiting for approval appr-1 (an approver runs: lemon approvals approve appr-1)\n" {
		t.Fatalf("%q", b.String())
	}
}

// lemon node join with an unusable CA file for a wss:// controller stops
// at once, before the modules load, naming the file's problem and not
// "controller refused this node"; a ws:// URL never reads the file.
func TestNodeJoinCAFileCheckedFirst(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.pem")
	getenv := func(k string) string {
		if k == "LEMON_CA_FILE" {
			return missing
		}
		return ""
	}
	var stderr bytes.Buffer
	code := runNodeJoin(context.Background(), []string{"--controller", "wss://127.0.0.1:1/ws", "--name", "n1", "--cwd", t.TempDir()}, getenv, &stderr)
	if want := "lemon node join: cannot use the CA file (--ca-file or LEMON_CA_FILE): it does not exist\n"; code != 1 || stderr.String() != want {
		t.Fatalf("exit %d, stderr %q, want %q", code, stderr.String(), want)
	}
	if err := checkCAFile("ws://127.0.0.1:1/ws", missing); err != nil {
		t.Fatalf("ws:// read the CA file: %v", err)
	}
	// A CA error from worker.Run loses the ErrFatal prefix.
	inner := fmt.Errorf("controller wss://h/ws: %w", client.ErrCAFile)
	if got := caFileCause(fmt.Errorf("%w: %w", worker.ErrFatal, inner)); got != inner {
		t.Fatalf("caFileCause = %v", got)
	}
}
