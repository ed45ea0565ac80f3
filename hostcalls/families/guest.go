package families

import (
	"maps"

	"lemon/hostcalls"
	"lemon/hostcalls/guest"
	"lemon/policies"
)

// The guest family (log.write, blob.*, config.get) is always built: it
// offers no node effect, only the invocation's own blobs, a bounded log
// record and the module's own settings (docs/PLUGINS.md).
func init() {
	register(builder{name: "guest", order: 50, build: func(cfg Config, s *Set) error {
		g := guest.New(guest.Config{Logger: cfg.Logger, Settings: moduleSettings(cfg.Policy.Modules, cfg.Policy.Limits)})
		s.Tables = append(s.Tables, g.Table())
		s.shared["guest"] = g
		return nil
	}, doc: func() hostcalls.Table { return (*guest.Guest)(nil).Table() }})
}

// moduleSettings are the modules' settings (the worker policy's
// [modules.<family>] tables) with the worker's receipt limits handed to the
// process module, which decides by them (docs/POLICY.md, "Module
// settings"): max_retained_receipts and output_cache_entries from [limits]
// (0 = the spec's maximum), replacing any value of [modules.process].
func moduleSettings(mods map[string]map[string]any, lim policies.WorkerLimit) map[string]map[string]any {
	out := make(map[string]map[string]any, len(mods)+1)
	maps.Copy(out, mods)
	p := maps.Clone(mods["process"])
	if p == nil {
		p = map[string]any{}
	}
	p["max_retained_receipts"] = orDefault(lim.MaxRetainedReceipts, policies.SpecMaxRetainedReceipts)
	p["output_cache_entries"] = orDefault(lim.OutputCacheEntries, policies.SpecMaxOutputCache)
	out["process"] = p
	return out
}

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}
