//go:build !lemon_no_vault

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lemon/hostcalls/vault"
)

func runVaultCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := vaultMain(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestVaultCLIRotate(t *testing.T) {
	root := t.TempDir()
	state := filepath.Join(root, "state")
	oldKey, newKey := filepath.Join(root, "old.key"), filepath.Join(root, "new.key")
	if code, _, e := runVaultCLI("gen-key", "--key-file", oldKey); code != 0 {
		t.Fatalf("gen-key: %d %s", code, e)
	}
	if code, _, _ := runVaultCLI("gen-key", "--key-file", oldKey); code != 1 {
		t.Fatal("gen-key overwrote a key file")
	}
	runVaultCLI("gen-key", "--key-file", newKey)

	v, err := vault.New(vault.Config{Dir: filepath.Join(state, "vault"), KeyFile: oldKey})
	if err != nil {
		t.Fatal(err)
	}
	// The secrets module's receipt of operation op-1 of node n1: a record
	// written with the put (docs/SECRETS.md, "Receipts").
	receiptKey := vault.LegacyReceiptKey("n1", "op-1")
	if _, perr := v.Put(vault.PutRequest{Family: "secrets", Name: "CANARY-CLI-NAME", Value: []byte("CANARY-CLI-VALUE"),
		Record: &vault.Record{Key: receiptKey, Value: "applied"}}); perr != nil {
		t.Fatal(perr)
	}
	// While the node holds the vault, the CLI refuses.
	code, _, e := runVaultCLI("rotate-key", "--state", state, "--key-file", oldKey, "--new-key-file", newKey)
	if code != 1 || !strings.Contains(e, "locked") {
		t.Fatalf("rotate while open: %d %s", code, e)
	}
	v.Close()

	code, out, e := runVaultCLI("check", "--state", state, "--key-file", oldKey)
	if code != 0 || !strings.Contains(out, "1 secrets") || !strings.Contains(out, "1 receipts") {
		t.Fatalf("check: %d %s %s", code, out, e)
	}
	code, out, e = runVaultCLI("rotate-key", "--state", state, "--key-file", oldKey, "--new-key-file", newKey)
	if code != 0 || !strings.Contains(out, "re-encrypted 1 secrets") {
		t.Fatalf("rotate: %d %s %s", code, out, e)
	}
	for _, s := range []string{out, e} {
		if strings.Contains(s, "CANARY") || strings.Contains(s, root) {
			t.Fatalf("CLI output names a secret or path: %s", s)
		}
	}
	code, _, e = runVaultCLI("check", "--state", state, "--key-file", oldKey)
	if code != 1 || !strings.Contains(e, "does not open") {
		t.Fatalf("old key after rotation: %d %s", code, e)
	}
	v, err = vault.New(vault.Config{Dir: filepath.Join(state, "vault"), KeyFile: newKey})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if b, perr := v.Resolve("CANARY-CLI-NAME"); perr != nil || string(b) != "CANARY-CLI-VALUE" {
		t.Fatalf("value after CLI rotation: %v", perr)
	}
	if r, _ := v.Record("secrets", receiptKey); !r.Found || r.Live && r.Revision == r.CurrentRevision {
		t.Fatalf("receipt after CLI rotation: %+v", r)
	}
}

func TestVaultCLIUsage(t *testing.T) {
	root := t.TempDir()
	key := filepath.Join(root, "k")
	runVaultCLI("gen-key", "--key-file", key)
	cases := [][]string{
		{},
		{"bogus"},
		{"gen-key"},
		{"rotate-key", "--state", root, "--key-file", key},
	}
	for _, c := range cases {
		if code, _, _ := runVaultCLI(c...); code != 2 {
			t.Errorf("%v: exit %d, want 2", c, code)
		}
	}
	if code, _, e := runVaultCLI("check", "--state", root, "--key-file", key); code != 1 || !strings.Contains(e, "no vault") {
		t.Errorf("check without a vault: %d %s", code, e)
	}
	if code, _, e := runVaultCLI("check", "--state", root); code != 1 || !strings.Contains(e, "exactly one") {
		t.Errorf("check without a key: %d %s", code, e)
	}
	pol := filepath.Join(root, "worker.toml")
	os.WriteFile(pol, []byte("state_dir = \""+root+"\"\n[vault]\nkey_file = \""+key+"\"\n"), 0o600)
	v, err := vault.New(vault.Config{Dir: filepath.Join(root, "vault"), KeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	if code, _, e := runVaultCLI("check", "--policy", pol); code != 1 || !strings.Contains(e, "locked") {
		t.Errorf("check --policy with the vault open: %d %s", code, e)
	}
	v.Close()
	if code, out, e := runVaultCLI("check", "--policy", pol); code != 0 || !strings.Contains(out, "0 secrets") {
		t.Errorf("check --policy: %d %s %s", code, out, e)
	}
}
