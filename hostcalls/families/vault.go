//go:build !lemon_no_vault

package families

import (
	"path/filepath"

	"lemon/hostcalls"
	"lemon/hostcalls/vault"
)

func init() {
	register(builder{name: "vault", order: 40, doc: func() hostcalls.Table { return (*vault.Vault)(nil).Table() }, build: func(cfg Config, s *Set) error {
		key := cfg.Policy.Vault
		if key.KeyFile == "" && key.KeyEnv == "" {
			// No master key configured: the node serves no secrets.
			return nil
		}
		v, err := vault.New(vault.Config{Dir: filepath.Join(cfg.StateDir, "vault"), KeyFile: key.KeyFile, KeyEnv: key.KeyEnv})
		if err != nil {
			return err
		}
		s.Tables = append(s.Tables, v.Table())
		s.closers = append(s.closers, v.Close)
		return nil
	}})
}
