package families

import (
	"lemon/hostcalls"
	"lemon/hostcalls/guest"
)

// The guest family (log.write, blob.*, config.get) is always built: it
// offers no node effect, only the invocation's own blobs, a bounded log
// record and the module's own settings (docs/PLUGINS.md).
func init() {
	register(builder{name: "guest", order: 50, build: func(cfg Config, s *Set) error {
		g := guest.New(guest.Config{Logger: cfg.Logger, Settings: cfg.Policy.Modules})
		s.Tables = append(s.Tables, g.Table())
		s.shared["guest"] = g
		return nil
	}, doc: func() hostcalls.Table { return (*guest.Guest)(nil).Table() }})
}
