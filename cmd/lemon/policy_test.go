package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func writePolicy(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "p.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Without --worker or --controller the kind comes from the file's keys,
// and only that kind's error is printed (it used to print the worker
// error "unknown key(s): operators, ..." first).
func TestPolicyCheckKindFromContent(t *testing.T) {
	noEnv := func(string) string { return "" }
	for _, c := range []struct{ text, want string }{
		{"[[operators]]\nname = \"ci\"\ntoken_env = \"T\"\nscopes = [\"operator.read\"]\nbogus = 1\n",
			"controller policy: %s: unknown key(s): operators.bogus\n"},
		{"listen = \"127.0.0.1:1\"\nlisten_port = 3\n", "controller policy: %s: unknown key(s): listen_port\n"},
		{"default_cwd = \"/\"\nbogus_key = 1\n", "worker policy: %s: unknown key(s): bogus_key\n"},
		// Neither kind's keys: tried as both; the same error is said once.
		{"bogus = 1\n", "policy: %s: unknown key(s): bogus\n"},
		// Keys of both kinds: both errors.
		{"listen = \"127.0.0.1:1\"\ndefault_cwd = \"/\"\n", "not a valid worker policy: %[1]s: unknown key(s): listen\nnot a valid controller policy: %[1]s: unknown key(s): default_cwd\n"},
	} {
		p := writePolicy(t, c.text)
		var out, errb bytes.Buffer
		code := policyCheck([]string{"check", p}, noEnv, &out, &errb)
		if want := fmt.Sprintf(c.want, p); code != 1 || errb.String() != want || out.Len() != 0 {
			t.Errorf("%q: exit %d, stderr %q, want %q", c.text, code, errb.String(), want)
		}
	}
}

// A valid worker policy whose default_cwd or allowed_roots do not exist
// here passes with a warning naming each (lemon node join refuses it).
func TestPolicyCheckWarnsMissingDirs(t *testing.T) {
	dir := t.TempDir()
	gone := filepath.Join(dir, "gone")
	p := writePolicy(t, "default_cwd = \""+gone+"\"\nallowed_roots = [\""+gone+"\", \""+dir+"\", \""+gone+"2\"]\n")
	var out, errb bytes.Buffer
	code := policyCheck([]string{"check", p}, func(string) string { return "" }, &out, &errb)
	want := "warning: default_cwd: " + gone + " is not an existing directory on this host ('lemon node join --policy' refuses it here)\n" +
		"warning: allowed_roots: " + gone + "2 is not an existing directory on this host ('lemon node join --policy' refuses it here)\n"
	if code != 0 || errb.String() != want || out.Len() == 0 {
		t.Fatalf("exit %d, stderr %q, want %q", code, errb.String(), want)
	}
	os.Mkdir(gone, 0o700)
	os.Mkdir(gone+"2", 0o700)
	errb.Reset()
	if code := policyCheck([]string{"check", "--worker", p}, func(string) string { return "" }, &out, &errb); code != 0 || errb.Len() != 0 {
		t.Fatalf("all present: exit %d, stderr %q", code, errb.String())
	}
}
