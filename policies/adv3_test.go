package policies

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAdv3PolicyFileBounded: a policy path naming a FIFO or a device
// (/dev/zero would fill memory) is refused at once, and a file one byte
// past MaxPolicyFileBytes before it is parsed.
func TestAdv3PolicyFileBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	big := filepath.Join(dir, "big.toml")
	os.WriteFile(big, []byte("#"+strings.Repeat("x", MaxPolicyFileBytes)), 0o600)
	for name, path := range map[string]string{"fifo": fifo, "zero": "/dev/zero", "big": big} {
		for _, load := range []func(string) error{
			func(p string) error { _, err := LoadWorker(p); return err },
			func(p string) error { _, err := LoadController(p); return err },
		} {
			done := make(chan error, 1)
			go func() { done <- load(path) }()
			select {
			case err := <-done:
				if err == nil {
					t.Fatalf("%s: loaded", name)
				}
			case <-time.After(10 * time.Second):
				if f, e := os.OpenFile(fifo, os.O_WRONLY, 0); e == nil {
					f.Close()
				}
				t.Fatalf("%s: still reading after 10 s", name)
			}
		}
	}
}

// TestAdv3CommandEntries: a worker policy's command entries follow the
// tool policy's rules (authority.CheckCommand): an entry with a stray
// space, a control character, an empty or relative one is refused (a
// blocked "rm " would block nothing); 256 entries pass, 257 fail.
func TestAdv3CommandEntries(t *testing.T) {
	for _, bad := range []string{`"rm "`, `" rm"`, `""`, `"make\n"`, `"./make"`, `"bin/make"`,
		`"/usr/bin/../bin/rm"`, `"/usr/bin/"`, `"ma\u0007ke"`, `"all"`} {
		for _, key := range []string{"allowed_commands", "blocked_commands"} {
			if key == "allowed_commands" && bad == `"all"` {
				continue // ["all"] alone is every command
			}
			if _, err := ParseWorker([]byte(key + " = [" + bad + "]\n")); err == nil {
				t.Errorf("%s = [%s] accepted", key, bad)
			}
		}
	}
	for _, good := range []string{`"make"`, `"/usr/bin/make"`, `"/opt/My Tools/bin/x"`} {
		if _, err := ParseWorker([]byte("allowed_commands = [" + good + "]\nblocked_commands = [" + good + "]\n")); err != nil {
			t.Errorf("%s refused: %v", good, err)
		}
	}
	list := func(n int) string {
		xs := make([]string, n)
		for i := range xs {
			xs[i] = fmt.Sprintf(`"c%d"`, i)
		}
		return "[" + strings.Join(xs, ",") + "]"
	}
	for _, key := range []string{"allowed_commands", "blocked_commands"} {
		if _, err := ParseWorker([]byte(key + " = " + list(256) + "\n")); err != nil {
			t.Errorf("%s with 256 entries: %v", key, err)
		}
		if _, err := ParseWorker([]byte(key + " = " + list(257) + "\n")); err == nil {
			t.Errorf("%s with 257 entries accepted", key)
		}
	}
}

// TestAdv3RateNaN: per_second = nan passed "<= 0" and made a bucket that
// never refuses; requests_per_second = nan passed "< 0" and disabled the
// limit. Both, and inf, are refused; the smallest positive rate passes.
func TestAdv3RateNaN(t *testing.T) {
	for _, v := range []string{"nan", "inf", "-inf", "0.0", "-1.0"} {
		if _, err := ParseWorker([]byte("[[rate_limits]]\nper_second = " + v + "\nburst = 1\n")); err == nil {
			t.Errorf("per_second = %s accepted", v)
		}
	}
	if _, err := ParseWorker([]byte("[[rate_limits]]\nper_second = 5e-324\nburst = 1\n")); err != nil {
		t.Errorf("the smallest positive rate: %v", err)
	}
	op := "[[operators]]\nname = \"a\"\ntoken_sha256 = \"" + strings.Repeat("ab", 32) + "\"\nscopes = [\"operator.admin\"]\n"
	for _, v := range []string{"nan", "inf", "-inf", "-1.0"} {
		if _, err := ParseController([]byte(op + "[limits]\nrequests_per_second = " + v + "\n")); err == nil {
			t.Errorf("requests_per_second = %s accepted", v)
		}
	}
	for _, v := range []string{"0.0", "0.5"} {
		if _, err := ParseController([]byte(op + "[limits]\nrequests_per_second = " + v + "\n")); err != nil {
			t.Errorf("requests_per_second = %s: %v", v, err)
		}
	}
}

// TestAdv3OperatorNameControl: an operator name with a control character
// was accepted, then every node request of the entry failed INTERNAL
// (authority.New refuses such a principal). It is refused at load; 64
// bytes pass, 65 fail.
func TestAdv3OperatorNameControl(t *testing.T) {
	op := func(name string) []byte {
		return []byte("[[operators]]\nname = \"" + name + "\"\ntoken_sha256 = \"" + strings.Repeat("ab", 32) +
			"\"\nscopes = [\"operator.admin\"]\n")
	}
	for _, bad := range []string{`c\ti`, `c\u001bi`, `c\u0085i`, `c\u007fi`, strings.Repeat("n", 65)} {
		if _, err := ParseController(op(bad)); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
	for _, good := range []string{"ci", "CI team", "Köln", strings.Repeat("n", 64)} {
		if _, err := ParseController(op(good)); err != nil {
			t.Errorf("name %q: %v", good, err)
		}
	}
}
