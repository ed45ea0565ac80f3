package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"lemon/client"
	"lemon/client/fakecontrol"
	"lemon/host/moduleset"
	"lemon/protocol"
)

const boundsNodeToken = "node-secret-token-bounds"

// declared builds a manifest of modules with the given declared sizes
// (no bytes behind them).
func declared(sizes ...int64) moduleset.Manifest {
	var m moduleset.Manifest
	for i, n := range sizes {
		sum := sha256.Sum256([]byte(fmt.Sprint("module ", i)))
		fam := fmt.Sprintf("fam%d", i)
		m.Modules = append(m.Modules, moduleset.Module{Family: fam, Version: "1.0.0",
			SHA256: hex.EncodeToString(sum[:]), Size: n, File: fam + ".wasm"})
	}
	return m
}

func repeatSize(n int, size int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = size
	}
	return out
}

// checkSetBounds is moduleset.CheckBounds (whose boundary table lives in
// host/moduleset) as a bounded module-set error.
func TestCheckSetBoundsWrapsModulesetBounds(t *testing.T) {
	if MaxSetModules != 64 || MaxSetBytes != 256<<20 || moduleset.MaxModuleBytes != 64<<20 {
		t.Fatalf("bounds changed: update docs/PROTOCOL.md and these cases")
	}
	if err := checkSetBounds(declared(repeatSize(MaxSetModules, 1)...)); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	err := checkSetBounds(declared(repeatSize(MaxSetModules+1, 1)...))
	var me errModuleSet
	if !errors.As(err, &me) {
		t.Fatalf("past the limit: err = %v, want a bounded module-set error", err)
	}
}

// setServer is a fake controller serving a manifest and, for the modules
// it has bytes for, node.modules.fetch in chunks; it counts fetches.
type setServer struct {
	manifest []byte
	digest   string
	modules  map[string][]byte // by sha256
	chunk    int64
	failAt   int64 // > 0: a fetch at this offset or beyond fails
	size     int64 // > 0: the module size reported instead of len(bytes)
	fetches  atomic.Int64
}

func (f *setServer) handle(_ *fakecontrol.Conn, req protocol.Request) (any, *protocol.Error) {
	switch req.Method {
	case protocol.MethodModulesManifest:
		return protocol.ModulesManifestResult{Digest: f.digest, Manifest: f.manifest}, nil
	case protocol.MethodModulesFetch:
		f.fetches.Add(1)
		var p protocol.ModulesFetchParams
		if perr := protocol.DecodeParams(req.Params, &p); perr != nil {
			return nil, perr
		}
		b, ok := f.modules[p.SHA256]
		if !ok {
			return nil, protocol.DomainError(protocol.CodeNotFound, protocol.DomainModuleNotInSet, "no")
		}
		if f.failAt > 0 && p.Offset >= f.failAt {
			return nil, protocol.Errorf(protocol.CodeUnavailable, "gone")
		}
		end := min(p.Offset+f.chunk, int64(len(b)))
		data := b[p.Offset:end]
		size := int64(len(b))
		if f.size > 0 {
			size = f.size
		}
		return protocol.ModulesFetchResult{SHA256: p.SHA256, Offset: p.Offset, Length: int64(len(data)),
			Size: size, EOF: end == size, DataBase64: base64.StdEncoding.EncodeToString(data)}, nil
	}
	return nil, protocol.Errorf(protocol.CodeMethodNotFound, "no")
}

// dialSet starts a fake controller for f and connects to it as a node.
func dialSet(t *testing.T, f *setServer) *client.Conn {
	t.Helper()
	srv := fakecontrol.New(fakecontrol.Options{NodeToken: boundsNodeToken, Handle: f.handle})
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := client.Dial(ctx, srv.URL, client.Options{Role: protocol.RoleNode, Token: boundsNodeToken,
		Node: &protocol.NodeAdvertise{Methods: map[string]int{}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func ctxBounds(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// realSet is a set of n small modules with their bytes.
func realSet(n int) *setServer {
	f := &setServer{modules: map[string][]byte{}, chunk: 4000}
	var m moduleset.Manifest
	for i := range n {
		b := bytes.Repeat([]byte(fmt.Sprint("module-", i, ";")), 50)
		sum := sha256.Sum256(b)
		h := hex.EncodeToString(sum[:])
		fam := fmt.Sprintf("fam%d", i)
		m.Modules = append(m.Modules, moduleset.Module{Family: fam, Version: "1.0.0", SHA256: h,
			Size: int64(len(b)), File: fam + ".wasm"})
		f.modules[h] = b
	}
	f.manifest, _ = json.Marshal(m)
	f.digest = m.Digest()
	return f
}

// A manifest at the module-count limit is fetched, verified and cached.
func TestFetchModuleSetAtModuleLimit(t *testing.T) {
	f := realSet(MaxSetModules)
	conn := dialSet(t, f)
	cache := filepath.Join(t.TempDir(), "modules")
	set, err := fetchModuleSet(ctxBounds(t), conn, cache, f.digest)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Modules) != MaxSetModules || f.fetches.Load() != MaxSetModules {
		t.Fatalf("modules %d, fetches %d", len(set.Modules), f.fetches.Load())
	}
	for _, mod := range set.Manifest.Modules {
		if err := mod.Verify(set.Modules[mod.Family]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := readCachedSet(cache); err != nil {
		t.Fatalf("cached set: %v", err)
	}
}

// A manifest one past a limit is refused before anything is fetched or
// cached (the cache directory is not even created).
func TestFetchModuleSetRefusesManifestPastLimits(t *testing.T) {
	const mib = 1 << 20
	over := map[string]*setServer{"65 modules": realSet(MaxSetModules + 1)}
	big := &setServer{modules: map[string][]byte{}, chunk: 4000}
	m := declared(64*mib, 64*mib, 64*mib, 64*mib, 1)
	big.manifest, _ = json.Marshal(m)
	big.digest = m.Digest()
	for _, mod := range m.Modules { // bytes the node must never ask for
		big.modules[mod.SHA256] = []byte("x")
	}
	over["256 MiB + 1"] = big
	for name, f := range over {
		conn := dialSet(t, f)
		cache := filepath.Join(t.TempDir(), "modules")
		_, err := fetchModuleSet(ctxBounds(t), conn, cache, f.digest)
		var me errModuleSet
		if !errors.As(err, &me) {
			t.Fatalf("%s: err = %v", name, err)
		}
		if n := f.fetches.Load(); n != 0 {
			t.Fatalf("%s: %d fetches before the refusal", name, n)
		}
		if _, err := os.Stat(cache); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: cache directory touched: %v", name, err)
		}
	}
}

// A cached manifest beyond the bounds (not written by this program) is
// refused rather than loaded.
func TestReadCachedSetRefusesManifestPastLimits(t *testing.T) {
	dir := t.TempDir()
	data, _ := json.Marshal(declared(repeatSize(MaxSetModules+1, 1)...))
	if err := os.WriteFile(filepath.Join(dir, cachedManifest), data, 0o600); err != nil {
		t.Fatal(err)
	}
	var me errModuleSet
	if _, err := readCachedSet(dir); !errors.As(err, &me) {
		t.Fatalf("err = %v", err)
	}
}

// A module declared at 64 MiB costs only the bytes that arrive: the
// controller serves three 4000-byte chunks and then fails, and the fetch
// allocates nowhere near the declared size.
func TestFetchModuleAllocatesOnlyWhatArrives(t *testing.T) {
	const chunk = 4000
	mod := declared(moduleset.MaxModuleBytes).Modules[0]
	// The controller has only the first three chunks' bytes.
	f := &setServer{modules: map[string][]byte{mod.SHA256: bytes.Repeat([]byte("m"), 3*chunk)},
		chunk: chunk, failAt: 3 * chunk, size: mod.Size}
	conn := dialSet(t, f)
	ctx := ctxBounds(t)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := fetchModule(ctx, conn, mod)
	runtime.ReadMemStats(&after)
	if err == nil || f.fetches.Load() != 4 {
		t.Fatalf("err = %v after %d fetches", err, f.fetches.Load())
	}
	// The old code reserved the declared 64 MiB up front.
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Fatalf("fetching 12000 bytes of a 64 MiB module allocated %d bytes", got)
	}
}

// appendBounded keeps the bytes, never exceeds the limit, and keeps the
// capacity under twice the bytes held.
func TestAppendBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, limit := range []int64{1, 7, 4000, 1 << 20} {
		want := make([]byte, limit)
		for i := range want {
			want[i] = byte(rng.IntN(256))
		}
		var buf []byte
		for off := int64(0); off < limit; {
			n := min(int64(1+rng.IntN(5000)), limit-off)
			buf = appendBounded(buf, want[off:off+n], limit)
			off += n
			if int64(cap(buf)) > limit || cap(buf) > 2*len(buf) || int64(len(buf)) != off {
				t.Fatalf("limit %d: len %d cap %d", limit, len(buf), cap(buf))
			}
		}
		if !bytes.Equal(buf, want) {
			t.Fatalf("limit %d: bytes differ", limit)
		}
	}
}
