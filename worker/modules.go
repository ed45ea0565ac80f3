package worker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"lemon/client"
	"lemon/host"
	"lemon/host/moduleset"
	"lemon/protocol"
)

// ModuleSet is a verified, version-pinned module set (docs/PROTOCOL.md, "Module set") as the
// controller serves it: the manifest as received, its digest, and each
// module's bytes (keyed by family) already checked against the manifest's
// sha256 and size.
type ModuleSet struct {
	// Digest is moduleset.Manifest.Digest of Manifest, the value the
	// controller sends in hello-ok moduleSet.digest.
	Digest       string
	ManifestJSON []byte
	Manifest     moduleset.Manifest
	Modules      map[string][]byte
}

// Bounds on a module set a controller pins (moduleset.CheckBounds). A
// node refuses a manifest beyond them before it fetches or caches
// anything, so a controller cannot make it allocate or store more.
const (
	// MaxSetModules is the most modules one manifest may list.
	MaxSetModules = moduleset.MaxSetModules
	// MaxSetBytes bounds the sum of the declared module sizes, in bytes
	// (256 MiB). Each module is also bounded by moduleset.MaxModuleBytes
	// (64 MiB).
	MaxSetBytes = moduleset.MaxSetBytes
)

// checkSetBounds is moduleset.CheckBounds as a bounded module-set error.
func checkSetBounds(m moduleset.Manifest) error {
	if err := m.CheckBounds(); err != nil {
		return errModuleSet(err.Error())
	}
	return nil
}

// Cache layout: manifest.json (the last installed set's manifest) and one
// <sha256>.wasm per module; directory 0700, files 0600.
const cachedManifest = "manifest.json"

// NewModuleSet wraps a manifest and its verified module bytes (keyed by
// family), e.g. moduleset.Load's result, as a ModuleSet. It verifies every
// module again.
func NewModuleSet(m moduleset.Manifest, modules map[string][]byte) (*ModuleSet, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	for _, mod := range m.Modules {
		if err := mod.Verify(modules[mod.Family]); err != nil {
			return nil, err
		}
	}
	mj, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &ModuleSet{Digest: m.Digest(), ManifestJSON: mj, Manifest: m, Modules: modules}, nil
}

// readCachedSet loads the cached set; it returns nil, nil when there is
// none, and an error when any module is missing or corrupt.
func readCachedSet(dir string) (*ModuleSet, error) {
	data, err := os.ReadFile(filepath.Join(dir, cachedManifest))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m, err := moduleset.ParseManifest(data)
	if err != nil {
		return nil, err
	}
	// Only fetchModuleSet writes the cache, after the same check; a cache
	// beyond the bounds was not written by this program.
	if err := checkSetBounds(m); err != nil {
		return nil, err
	}
	set := &ModuleSet{Digest: m.Digest(), ManifestJSON: data, Manifest: m, Modules: map[string][]byte{}}
	for _, mod := range m.Modules {
		b, err := readCachedModule(dir, mod)
		if err != nil {
			return nil, err
		}
		if b == nil {
			return nil, fmt.Errorf("module cache: %s missing", mod.Family)
		}
		set.Modules[mod.Family] = b
	}
	return set, nil
}

// readCachedModule returns verified cached bytes, or nil when the cache
// lacks the module or holds bytes that do not match (which are removed).
func readCachedModule(dir string, mod moduleset.Module) ([]byte, error) {
	p := filepath.Join(dir, mod.SHA256+".wasm")
	fi, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if fi.Size() != mod.Size {
		os.Remove(p)
		return nil, nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if mod.Verify(b) != nil {
		os.Remove(p)
		return nil, nil
	}
	return b, nil
}

// errModuleSet is a bounded classification for module-set sync failures.
type errModuleSet string

func (e errModuleSet) Error() string { return "module set: " + string(e) }

// syncModules fetches the controller's pinned set over conn, using and
// filling the cache, verifies every byte, and installs it.
func (w *Worker) syncModules(ctx context.Context, conn *client.Conn, want string) error {
	set, err := fetchModuleSet(ctx, conn, w.cfg.ModuleCacheDir, want)
	if err != nil {
		return err
	}
	return w.install(ctx, set)
}

func fetchModuleSet(ctx context.Context, conn *client.Conn, cacheDir, want string) (*ModuleSet, error) {
	raw, perr := conn.Call(ctx, protocol.MethodModulesManifest, protocol.ModulesManifestParams{})
	if perr != nil {
		return nil, fmt.Errorf("%w", perr)
	}
	var res protocol.ModulesManifestResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, errModuleSet("malformed manifest response")
	}
	m, err := moduleset.ParseManifest(res.Manifest)
	if err != nil {
		return nil, errModuleSet("manifest is invalid")
	}
	if err := checkSetBounds(m); err != nil {
		return nil, err
	}
	if res.Digest != want || m.Digest() != want {
		return nil, errModuleSet("manifest does not match the pinned digest")
	}
	if cacheDir != "" {
		if err := os.MkdirAll(cacheDir, 0o700); err != nil {
			return nil, errModuleSet("cache directory unavailable")
		}
	}
	set := &ModuleSet{Digest: want, ManifestJSON: res.Manifest, Manifest: m, Modules: map[string][]byte{}}
	for _, mod := range m.Modules {
		var b []byte
		if cacheDir != "" {
			b, _ = readCachedModule(cacheDir, mod)
		}
		if b == nil {
			if b, err = fetchModule(ctx, conn, mod); errors.Is(err, errModuleBytes) {
				// This module alone is refused (digest_mismatch); the
				// rest of the set serves. It is not cached, so the next
				// start fetches it again.
				continue
			} else if err != nil {
				return nil, err
			}
			if cacheDir != "" {
				if err := writeFileAtomic(filepath.Join(cacheDir, mod.SHA256+".wasm"), b, 0o600); err != nil {
					return nil, errModuleSet("cannot write module cache")
				}
			}
		}
		set.Modules[mod.Family] = b
	}
	if cacheDir != "" {
		if err := writeFileAtomic(filepath.Join(cacheDir, cachedManifest), res.Manifest, 0o600); err != nil {
			return nil, errModuleSet("cannot write module cache")
		}
	}
	return set, nil
}

// fetchModule reads one module in chunks (node.modules.fetch) and
// verifies its size and sha256 before returning it. Its buffer grows with
// the bytes received (see appendBounded), never to more than mod.Size,
// so a manifest's declared size costs nothing until bytes arrive.
func fetchModule(ctx context.Context, conn *client.Conn, mod moduleset.Module) ([]byte, error) {
	var buf []byte
	for {
		raw, perr := conn.Call(ctx, protocol.MethodModulesFetch,
			protocol.ModulesFetchParams{SHA256: mod.SHA256, Offset: int64(len(buf))})
		if perr != nil {
			return nil, fmt.Errorf("%w", perr)
		}
		var c protocol.ModulesFetchResult
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, errModuleSet("malformed fetch response")
		}
		if c.SHA256 != mod.SHA256 || c.Offset != int64(len(buf)) || c.Size != mod.Size {
			return nil, errModuleSet("fetch response does not match the request")
		}
		data, err := base64.StdEncoding.Strict().DecodeString(c.DataBase64)
		if err != nil || int64(len(data)) != c.Length {
			return nil, errModuleSet("fetch chunk is malformed")
		}
		if int64(len(buf))+c.Length > mod.Size {
			return nil, fmt.Errorf("%w: module is larger than pinned", errModuleBytes)
		}
		buf = appendBounded(buf, data, mod.Size)
		if c.EOF {
			break
		}
		if c.Length == 0 {
			return nil, errModuleSet("fetch made no progress")
		}
	}
	if err := mod.Verify(buf); err != nil {
		return nil, fmt.Errorf("%w: module bytes do not match the pinned sha256", errModuleBytes)
	}
	return buf, nil
}

// errModuleBytes: the bytes served for one module do not match its pin;
// that module is refused alone.
var errModuleBytes = errors.New("module set: module bytes")

// appendBounded appends data to buf, growing it to at most limit bytes
// of capacity. The caller ensures len(buf)+len(data) <= limit. A new
// backing array is at most twice the bytes it then holds (amortized
// doubling) and never larger than limit.
func appendBounded(buf, data []byte, limit int64) []byte {
	need := len(buf) + len(data)
	if need <= cap(buf) {
		return append(buf, data...)
	}
	newCap := max(need, int(min(int64(2*cap(buf)), limit)))
	nb := make([]byte, len(buf), newCap)
	copy(nb, buf)
	return append(nb, data...)
}

// safeReason reduces an error to a bounded classification for logs: the
// code of a protocol error, the reason of a dial error, or the message of
// this package's own errors. Never raw OS text.
func safeReason(err error) string {
	var (
		pe *protocol.Error
		de *client.DialError
		me errModuleSet
	)
	switch {
	case err == nil:
		return "closed"
	case errors.As(err, &pe):
		if d := pe.DomainCode(); d != "" {
			return pe.Code + " (" + d + ")"
		}
		return pe.Code
	case errors.As(err, &de):
		return de.Reason
	case errors.As(err, &me):
		return me.Error()
	case errors.Is(err, host.ErrModuleRejected):
		// Module and host-call names only; no request content.
		return err.Error()
	case errors.Is(err, moduleset.ErrDigestMismatch):
		return "module bytes do not match the pinned sha256"
	case errors.Is(err, client.ErrClosed):
		return "closed"
	}
	return "error"
}
