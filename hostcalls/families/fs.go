//go:build linux && !lemon_no_fs

package families

import (
	"lemon/hostcalls"
	"lemon/hostcalls/fs"
)

func init() {
	register(builder{name: "fs", order: 10, doc: func() hostcalls.Table { return (*fs.FS)(nil).Table() }, build: func(cfg Config, s *Set) error {
		f, err := fs.New(fs.Config{DefaultCwd: cfg.DefaultCwd, Roots: cfg.Roots, Home: cfg.Home, MaxReadChunk: cfg.MaxReadChunk})
		if err != nil {
			return err
		}
		s.Tables = append(s.Tables, f.Table())
		s.closers = append(s.closers, f.Close)
		s.shared["fs"] = f
		return nil
	}})
}
