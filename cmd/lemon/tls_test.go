package main

import (
	"os/exec"
	"testing"

	"github.com/BurntSushi/toml"
)

// The paths `lemon tls dev` prints are valid TOML strings and shell words
// whatever they hold.
func TestTLSDevQuoting(t *testing.T) {
	for _, p := range []string{"/etc/lemon/tls/server.pem", "/tmp/a b/server.pem", "/tmp/it's/x.pem", `/tmp/q"\x/y.pem`, "/tmp/tab\there"} {
		var v struct{ P string }
		if _, err := toml.Decode("p = "+tomlString(p), &v); err != nil || v.P != p {
			t.Errorf("toml %q: got %q, %v", p, v.P, err)
		}
		out, err := exec.Command("sh", "-c", "printf %s "+shellQuote(p)).Output()
		if err != nil || string(out) != p {
			t.Errorf("shell %q: got %q, %v", p, out, err)
		}
	}
}
