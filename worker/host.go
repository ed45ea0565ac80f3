package worker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"lemon/audit"
	"lemon/host"
	"lemon/host/moduleset"
	"lemon/hostcalls/families"
	"lemon/policies"
	"lemon/version"
)

// HostOptions is everything a node needs to build its host.
type HostOptions struct {
	// Policy is the effective worker policy (TOML restricted by flags).
	Policy *policies.Worker
	// DefaultCwd is the absolute default cwd (--cwd).
	DefaultCwd string
	// Roots are the allowed roots: nil = home only; the CLI passes home
	// plus every --allowed-root.
	Roots []string
	// StateDir holds the store, vault, and compilation cache.
	StateDir string
	// Manifest and Modules are the verified pinned module set.
	Manifest moduleset.Manifest
	Modules  map[string][]byte
	// MaxPayload is the connection's negotiated frame cap in bytes; reads
	// are shortened so a base64 chunk fits it.
	MaxPayload int
	Logger     *slog.Logger
	// Registry receives the host's metrics and the node's gauges (pool
	// instances, active processes); nil keeps them private. Audit receives
	// one record per host call (nil: none). docs/OPERATIONS.md.
	Registry prometheus.Registerer
	Audit    *audit.Sink
}

// frameOverhead is what a read response needs besides its base64 data.
const frameOverhead = 8 << 10

// ReadChunkFor returns the largest decoded read chunk whose base64 fits
// maxPayload with room for the frame around it (at most 1 MiB).
func ReadChunkFor(maxPayload int) int {
	n := (maxPayload - frameOverhead) / 4 * 3
	if n > 1<<20 {
		n = 1 << 20
	}
	if n < 1 {
		n = 1
	}
	return n
}

// NodeHost is the node's side of the host: the host-call families are
// built once (they hold pinned root descriptors, the store, the vault and
// running processes), and each module set gets a fresh host.Host over
// them. Its LoadModules is a Config.LoadModules.
type NodeHost struct {
	o    HostOptions
	fams *families.Set
	cur  atomic.Pointer[host.Host] // the newest host, for the gauges
}

// NewNodeHost builds the families; Close releases them.
func NewNodeHost(o HostOptions) (*NodeHost, error) {
	if o.Policy == nil {
		o.Policy = &policies.Worker{}
	}
	if err := os.MkdirAll(o.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	if o.MaxPayload == 0 {
		o.MaxPayload = 1 << 20
	}
	fams, err := families.Build(families.Config{
		DefaultCwd: o.DefaultCwd, Roots: o.Roots, StateDir: o.StateDir,
		LemonVersion: version.Version, Policy: o.Policy, MaxReadChunk: ReadChunkFor(o.MaxPayload),
		MaxPayload: o.MaxPayload, Logger: o.Logger,
	})
	if err != nil {
		return nil, err
	}
	n := &NodeHost{o: o, fams: fams}
	if o.Registry != nil {
		if err := o.Registry.Register(newNodeCollector(n)); err != nil {
			fams.Close()
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return n, nil
}

// Families names the host-call families built into this node.
func (n *NodeHost) Families() []string { return n.fams.Families }

// Close releases the families (after every host built over them is closed).
func (n *NodeHost) Close() error { return n.fams.Close() }

// LoadModules builds a host.Host for a verified module set. It serves
// only families that are both pinned and built into this binary; the
// returned *host.Host is closed by the worker when a newer set replaces it.
func (n *NodeHost) LoadModules(ctx context.Context, set *ModuleSet) (Dispatcher, error) {
	return n.newHost(ctx, set.Manifest, set.Modules)
}

func (n *NodeHost) newHost(ctx context.Context, m moduleset.Manifest, modules map[string][]byte) (*host.Host, error) {
	o := n.o
	var rules []host.RateRule
	for _, r := range o.Policy.RateLimits {
		rules = append(rules, host.RateRule{Module: r.Module, HostCall: r.HostCall, PerSecond: r.PerSecond, Burst: r.Burst})
	}
	h, err := host.New(ctx, host.Config{
		CacheDir:          filepath.Join(o.StateDir, "wazero-cache"),
		MemoryLimitPages:  o.Policy.Pool.MemoryLimitPages,
		PoolSize:          o.Policy.Pool.Size,
		RecycleAfterCalls: o.Policy.Pool.RecycleAfterCalls,
		Ceiling:           o.Policy.Ceiling(),
		RateRules:         rules,
		Tables:            n.fams.Tables,
		Logger:            o.Logger,
		Registry:          o.Registry,
		Audit:             o.Audit,
	})
	if err != nil {
		return nil, err
	}
	n.cur.Store(h)
	// Modules load one by one: one that fails verification is refused
	// alone (its status says why) and the rest of the set serves.
	h.LoadSet(ctx, m, modules)
	if len(o.Policy.RateLimits) > 0 && o.Logger != nil {
		// `lemon policy check` refuses such a rule; a node keeps serving
		// (its module set can change) but says the rule is idle.
		loaded := map[string][]string{}
		for _, mod := range m.Modules {
			if lm, ok := h.Module(mod.Family); ok {
				loaded[mod.Family] = lm.Manifest().HostCalls
			}
		}
		if err := o.Policy.CheckRateTargets(loaded); err != nil {
			o.Logger.Warn("a rate limit matches no host call of the loaded module set", "reason", err.Error())
		}
	}
	return h, nil
}

// NewHost assembles the node's host-call families and loads the module
// set into a new host. close releases both.
func NewHost(ctx context.Context, o HostOptions) (h *host.Host, closeFn func() error, err error) {
	n, err := NewNodeHost(o)
	if err != nil {
		return nil, nil, err
	}
	h, err = n.newHost(ctx, o.Manifest, o.Modules)
	if err != nil {
		n.Close()
		return nil, nil, err
	}
	return h, func() error {
		err := h.Close(context.Background())
		if ferr := n.Close(); err == nil {
			err = ferr
		}
		return err
	}, nil
}
