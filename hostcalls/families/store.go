package families

import (
	"path/filepath"

	"lemon/hostcalls"
	"lemon/hostcalls/store"
)

func init() {
	register(builder{name: "store", order: 20, doc: func() hostcalls.Table { return (*store.Store)(nil).Table() }, build: func(cfg Config, s *Set) error {
		st, err := store.New(store.Config{Path: filepath.Join(cfg.StateDir, "store.db")})
		if err != nil {
			return err
		}
		s.Tables = append(s.Tables, st.Table())
		s.closers = append(s.closers, st.Close)
		s.shared["store"] = st
		return nil
	}})
}
