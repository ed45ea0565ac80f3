// Package families assembles a node's host-call families from one Config:
// sysinfo always, and fs, store, spawn and vault unless the binary was
// built without them (build tags lemon_no_fs, lemon_no_spawn,
// lemon_no_vault; a dependency test proves the code is gone).
package families

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"

	"lemon/hostcalls"
	"lemon/hostcalls/sysinfo"
	"lemon/policies"
)

// Config is what the node knows about itself when it builds its families.
type Config struct {
	// DefaultCwd is the absolute default cwd (relative paths resolve from it).
	DefaultCwd string
	// Roots are the allowed roots; nil means home only (spec "Destination
	// policy"). The CLI passes home plus every --allowed-root.
	Roots []string
	// Home overrides the home directory (tests).
	Home string
	// StateDir holds the durable store, the vault and the module cache.
	StateDir string
	// LemonVersion is reported by node.host.info.
	LemonVersion string
	// Policy is the effective worker policy (commands, limits, vault key).
	Policy *policies.Worker
	// MaxReadChunk bounds one fs.read so its base64 fits the payload cap.
	MaxReadChunk int
	// MaxPayload is the node's advertised frame cap in bytes (default
	// 1 MiB); process output is budgeted so a receipt fits it.
	MaxPayload int
	// Logger is the node's logger; guest log records (log.write) go to it.
	// nil drops them.
	Logger *slog.Logger
}

// Set is the assembled families.
type Set struct {
	Tables  []hostcalls.Table
	closers []func() error
	// Families names what was built, e.g. ["sysinfo","fs","store","spawn"].
	Families []string
	// shared lets later builders use earlier ones (spawn admits cwd
	// through fs).
	shared map[string]any
}

// Close releases every family.
func (s *Set) Close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i]())
	}
	return errors.Join(errs...)
}

type builder struct {
	name  string
	order int
	build func(cfg Config, s *Set) error
	// doc returns the family's table from a nil receiver: its entries'
	// declarations, for docs and tests; its Funcs must not be called.
	doc func() hostcalls.Table
}

var builders []builder

func register(b builder) { builders = append(builders, b) }

// DocTables returns the table of every compiled-in family (sysinfo first,
// then in build order) without building any: names, capabilities, audit
// classes, contract types and errors, for docs/HOSTCALLS.md and tests.
// The entries' Funcs must not be called.
func DocTables() []hostcalls.Table {
	out := []hostcalls.Table{(*sysinfo.Sysinfo)(nil).Table()}
	for _, b := range sortedBuilders() {
		out = append(out, b.doc())
	}
	return out
}

func sortedBuilders() []builder {
	sorted := append([]builder(nil), builders...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].order < sorted[j].order })
	return sorted
}

// Build constructs every compiled-in family in dependency order.
func Build(cfg Config) (*Set, error) {
	if cfg.Policy == nil {
		cfg.Policy = &policies.Worker{}
	}
	if !filepath.IsAbs(cfg.DefaultCwd) {
		return nil, fmt.Errorf("families: default cwd must be absolute")
	}
	s := &Set{shared: map[string]any{}}
	si := sysinfo.New(sysinfo.Config{DefaultCwd: cfg.DefaultCwd, LemonVersion: cfg.LemonVersion})
	s.Tables = append(s.Tables, si.Table())
	s.Families = append(s.Families, "sysinfo")
	for _, b := range sortedBuilders() {
		before := len(s.Tables)
		if err := b.build(cfg, s); err != nil {
			s.Close()
			return nil, fmt.Errorf("families: %s: %w", b.name, err)
		}
		if len(s.Tables) > before {
			s.Families = append(s.Families, b.name)
		}
	}
	return s, nil
}
