package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

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

// NewHost assembles the node's host-call families and loads the module
// set into a new host. close releases both.
func NewHost(ctx context.Context, o HostOptions) (h *host.Host, closeFn func() error, err error) {
	if o.Policy == nil {
		o.Policy = &policies.Worker{}
	}
	if err := os.MkdirAll(o.StateDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("state dir: %w", err)
	}
	if o.MaxPayload == 0 {
		o.MaxPayload = 1 << 20
	}
	fams, err := families.Build(families.Config{
		DefaultCwd: o.DefaultCwd, Roots: o.Roots, StateDir: o.StateDir,
		LemonVersion: version.Version, Policy: o.Policy, MaxReadChunk: ReadChunkFor(o.MaxPayload),
	})
	if err != nil {
		return nil, nil, err
	}
	var rules []host.RateRule
	for _, r := range o.Policy.RateLimits {
		rules = append(rules, host.RateRule{Module: r.Module, HostCall: r.HostCall, PerSecond: r.PerSecond, Burst: r.Burst})
	}
	h, err = host.New(ctx, host.Config{
		CacheDir:          filepath.Join(o.StateDir, "wazero-cache"),
		MemoryLimitPages:  o.Policy.Pool.MemoryLimitPages,
		PoolSize:          o.Policy.Pool.Size,
		RecycleAfterCalls: o.Policy.Pool.RecycleAfterCalls,
		Ceiling:           o.Policy.Ceiling(),
		RateRules:         rules,
		Tables:            fams.Tables,
		Logger:            o.Logger,
	})
	if err != nil {
		fams.Close()
		return nil, nil, err
	}
	// Serve only families that are both pinned and built into this binary.
	for _, mod := range o.Manifest.Modules {
		if _, err := h.Load(ctx, mod, o.Modules[mod.Family]); err != nil {
			if errors.Is(err, host.ErrHostCallUnavailable) {
				if o.Logger != nil {
					o.Logger.Warn("module not served: this node lacks a host-call family it needs",
						"family", mod.Family, "version", mod.Version)
				}
				continue
			}
			h.Close(ctx)
			fams.Close()
			return nil, nil, err
		}
	}
	return h, func() error {
		err := h.Close(context.Background())
		if ferr := fams.Close(); err == nil {
			err = ferr
		}
		return err
	}, nil
}
