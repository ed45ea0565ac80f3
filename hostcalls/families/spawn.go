//go:build linux && !lemon_no_spawn && !lemon_no_fs

package families

import (
	"fmt"

	"lemon/hostcalls"
	"lemon/hostcalls/fs"
	"lemon/hostcalls/spawn"
	"lemon/hostcalls/store"
)

func init() {
	register(builder{name: "spawn", order: 30, doc: func() hostcalls.Table { return (*spawn.Spawner)(nil).Table() }, build: func(cfg Config, s *Set) error {
		dirs, ok := s.shared["fs"].(*fs.FS)
		st, ok2 := s.shared["store"].(*store.Store)
		if !ok || !ok2 {
			return fmt.Errorf("spawn needs the fs and store families")
		}
		pol := cfg.Policy
		var allowed *[]string
		if !pol.AllowedCommands.Unrestricted() {
			items := append([]string{}, pol.AllowedCommands.Items...)
			allowed = &items
		}
		sp, err := spawn.New(spawn.Config{
			Store: st, Dirs: dirs,
			Workspace: func(ws string) (spawn.DirResolver, func(), error) {
				view, release, err := dirs.Workspace(ws)
				if err != nil {
					return nil, nil, err
				}
				return view, release, nil
			},
			AllowedCommands: allowed, BlockedCommands: pol.BlockedCommands,
			// max_retained_receipts and output_cache_entries go to the
			// process module as settings (guest.go, moduleSettings).
			MaxActive:  pol.Limits.MaxActiveProcesses,
			MaxPayload: cfg.MaxPayload,
		})
		if err != nil {
			return err
		}
		s.Tables = append(s.Tables, sp.Table())
		s.closers = append(s.closers, sp.Close)
		s.shared["spawn"] = sp
		return nil
	}})
}
