//go:build !lemon_no_vault

package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"lemon/hostcalls/vault"
	"lemon/policies"
)

func init() {
	register("vault", "manage a node's secret vault offline: gen-key, rotate-key, check", runVault)
	setUsage("vault", vaultUsage)
}

const vaultUsage = `usage:
  lemon vault gen-key    --key-file FILE
  lemon vault rotate-key (--state DIR | --policy FILE) [--key-file FILE | --key-env NAME]
                         (--new-key-file FILE | --new-key-env NAME)
  lemon vault check      (--state DIR | --policy FILE) [--key-file FILE | --key-env NAME]

The vault lives in <state>/vault. Stop the node first: the vault file is
locked while the node runs. Output never names a secret.
`

func runVault(args []string) int {
	return vaultMain(args, os.Stdout, os.Stderr)
}

func vaultMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, vaultUsage)
		return 2
	}
	switch args[0] {
	case "gen-key":
		return vaultGenKey(args[1:], stdout, stderr)
	case "rotate-key":
		return vaultRotate(args[1:], stdout, stderr)
	case "check":
		return vaultCheck(args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, vaultUsage)
	return 2
}

func vaultGenKey(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lemon vault gen-key", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keyFile := fs.String("key-file", "", "new key file to create (mode 0600; never overwritten)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 || *keyFile == "" {
		fmt.Fprint(stderr, vaultUsage)
		return 2
	}
	if err := vault.GenerateKeyFile(*keyFile); err != nil {
		fmt.Fprintf(stderr, "lemon vault gen-key: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, "wrote a new 32-byte master key (mode 0600)")
	return 0
}

// vaultTarget is where a vault is and how to open it.
type vaultTarget struct {
	state, keyFile, keyEnv, policy string
}

func (t *vaultTarget) flags(fs *flag.FlagSet) {
	fs.StringVar(&t.state, "state", "", "the node's state directory (the vault is <state>/vault)")
	fs.StringVar(&t.policy, "policy", "", "worker policy TOML: supplies state_dir and [vault] unless given as flags")
	fs.StringVar(&t.keyFile, "key-file", "", "current master-key file (mode 0600)")
	fs.StringVar(&t.keyEnv, "key-env", "", "environment variable holding the current master key")
}

func (t *vaultTarget) config() (vault.Config, error) {
	if t.policy != "" {
		pol, err := policies.LoadWorker(t.policy)
		if err != nil {
			return vault.Config{}, err
		}
		if t.state == "" {
			t.state = pol.StateDir
		}
		if t.keyFile == "" && t.keyEnv == "" {
			t.keyFile, t.keyEnv = pol.Vault.KeyFile, pol.Vault.KeyEnv
		}
	}
	if t.state == "" {
		return vault.Config{}, fmt.Errorf("give --state or a policy with state_dir")
	}
	if (t.keyFile == "") == (t.keyEnv == "") {
		return vault.Config{}, fmt.Errorf("give exactly one of --key-file and --key-env (or a policy with [vault])")
	}
	dir := filepath.Join(t.state, "vault")
	if _, err := os.Stat(filepath.Join(dir, "vault.db")); err != nil {
		return vault.Config{}, fmt.Errorf("no vault in the state directory")
	}
	return vault.Config{Dir: dir, KeyFile: t.keyFile, KeyEnv: t.keyEnv}, nil
}

func vaultRotate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lemon vault rotate-key", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var t vaultTarget
	t.flags(fs)
	newFile := fs.String("new-key-file", "", "new master-key file (mode 0600; make one with gen-key)")
	newEnv := fs.String("new-key-env", "", "environment variable holding the new master key")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 || (*newFile == "") == (*newEnv == "") {
		fmt.Fprint(stderr, vaultUsage)
		return 2
	}
	var newKey []byte
	var err error
	if *newFile != "" {
		newKey, err = vault.LoadKeyFile(*newFile)
	} else if text, ok := os.LookupEnv(*newEnv); ok {
		newKey, err = vault.ParseKey([]byte(text))
	} else {
		err = fmt.Errorf("the new-key environment variable is not set")
	}
	if err != nil {
		fmt.Fprintf(stderr, "lemon vault rotate-key: new key: %v\n", err)
		return 1
	}
	defer clear(newKey)
	cfg, err := t.config()
	if err != nil {
		fmt.Fprintf(stderr, "lemon vault rotate-key: %v\n", err)
		return 1
	}
	v, err := vault.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "lemon vault rotate-key: %v\n", err)
		return 1
	}
	defer v.Close()
	if err := v.RotateKey(newKey); err != nil {
		fmt.Fprintf(stderr, "lemon vault rotate-key: %v\n", err)
		return 1
	}
	s, perr := v.Stats()
	if perr != nil {
		fmt.Fprintf(stderr, "lemon vault rotate-key: rotated, but the vault could not be re-read: %v\n", perr)
		return 1
	}
	fmt.Fprintf(stdout, "re-encrypted %d secrets (%d expired) under the new key; %d receipts kept, none of them matches any more.\n",
		s.Secrets, s.Expired, s.Receipts)
	fmt.Fprintln(stdout, "the old key no longer opens this vault: configure the node with the new key before starting it.")
	return 0
}

func vaultCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lemon vault check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var t vaultTarget
	t.flags(fs)
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		fmt.Fprint(stderr, vaultUsage)
		return 2
	}
	cfg, err := t.config()
	if err != nil {
		fmt.Fprintf(stderr, "lemon vault check: %v\n", err)
		return 1
	}
	v, err := vault.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "lemon vault check: %v\n", err)
		return 1
	}
	defer v.Close()
	s, perr := v.Stats()
	if perr != nil {
		fmt.Fprintf(stderr, "lemon vault check: %v\n", perr)
		return 1
	}
	fmt.Fprintf(stdout, "vault opens with this key: %d secrets, %d expired, %d deleted names kept for receipts, %d receipts\n",
		s.Secrets, s.Expired, s.ReceiptOnly, s.Receipts)
	return 0
}
