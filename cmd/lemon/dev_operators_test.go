package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"lemon/controller"
)

func TestDevOperators(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := map[string]string{"VIEWER_TOKEN": "viewer-token-0123456789", envControlPlaneToken: "dev-token-0123456789"}
	getenv := func(k string) string { return env[k] }

	ok := write("ok.toml", `[[operators]]
name = "viewer"
token_env = "VIEWER_TOKEN"
scopes = ["operator.read"]
`)
	ops, err := devOperators(ok, getenv)
	if err != nil {
		t.Fatal(err)
	}
	// Only the file's entry: dev's own token is not added a second time.
	if len(ops) != 1 || ops[0].Name != "viewer" || !reflect.DeepEqual(ops[0].Scopes, []string{"operator.read"}) ||
		ops[0].TokenHash != controller.HashToken("viewer-token-0123456789") {
		t.Fatalf("operators: %+v", ops)
	}

	for name, body := range map[string]string{
		"unknown key": "[[operators]]\nname = \"x\"\ntoken_env = \"VIEWER_TOKEN\"\nscopes = [\"operator.read\"]\ncolour = \"red\"\n",
		"unset env":   "[[operators]]\nname = \"x\"\ntoken_env = \"UNSET_TOKEN\"\nscopes = [\"operator.read\"]\n",
	} {
		_, err := devOperators(write("bad.toml", body), getenv)
		if err == nil || !strings.HasPrefix(err.Error(), "--operators: ") {
			t.Errorf("%s: %v", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "viewer-token") {
			t.Errorf("%s: the error holds a token: %v", name, err)
		}
	}
	if _, err := devOperators(filepath.Join(dir, "missing.toml"), getenv); err == nil {
		t.Error("a missing file is accepted")
	}
}
