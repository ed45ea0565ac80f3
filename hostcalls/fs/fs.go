// Package fs is the host side of the node.fs.* family (spec "Destination
// policy and configuration" and "File operations"; docs/ABI.md): allowed
// roots pinned as directory descriptors, a walker that resolves paths one
// component at a time from those descriptors, and every file effect the fs
// module may ask for, exported as one table of host calls.
//
// The module (plugins/fs) validates requests, makes the decisions of the
// spec (revisions, delete preview tokens and their limits, move rules) and
// shapes responses; this package owns every effect and its confinement,
// the atomic compares its primitives are asked for (prim_mut*.go), the
// serialization of writers and the capture of entries before destructive
// checks. File bytes stay host-side as invocation blobs.
//
// Linux only: it relies on O_PATH, openat2, renameat2 and faccessat2.
// docs/FS.md states what the confinement does and does not protect against.
package fs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"lemon/hostcalls"
	"lemon/protocol"
)

// Config configures the service. Zero values take the spec's defaults.
type Config struct {
	// DefaultCwd is the directory relative paths resolve from (an absolute
	// destination path; default: the home directory). It grants nothing by
	// itself: a cwd outside every root makes relative paths not allowed.
	DefaultCwd string
	// Roots are the allowed roots. nil means the home directory only; a
	// non-nil list replaces home and must be nonempty, at most 64 existing
	// directories. The CLI passes home plus each --allowed-root.
	Roots []string
	// Home overrides the home directory used for the defaults (tests).
	Home string
	// MaxReadChunk caps the bytes one fs.read returns (default and maximum
	// 1,048,576). The worker lowers it so a base64 chunk fits the
	// connection's maxPayload; the spec allows short chunks.
	MaxReadChunk int
	// Deadline is the request deadline (default and production: 25 s,
	// protocol.FSRequestDeadlineMs). Tests shorten it.
	Deadline time.Duration
	// TestHook, tests only, runs inside every request before its work,
	// with the operation's name ("write", "walk", ...), so a test can
	// hold a request past its deadline.
	TestHook func(op string)
}

// limits are the spec's bounds; tests shrink some to reach a boundary
// cheaply, production always uses defaultLimits.
type limits struct {
	deadline    time.Duration
	descriptors int64
	symlinks    int
}

var defaultLimits = limits{
	deadline:    protocol.FSRequestDeadlineMs * time.Millisecond,
	descriptors: protocol.FSMaxDescriptors,
	symlinks:    maxSymlinks,
}

// maxSymlinks is the symlink budget of one resolution (Linux's MAXSYMLINKS).
const maxSymlinks = 40

// root is one allowed root: a pinned O_PATH directory descriptor and the
// canonical path it had when opened. Its identity (dev, ino) never changes.
type root struct {
	fd      int
	canon   string
	comps   []string
	aliases [][]string // configured spellings that differ from canon
	dev     uint64
	ino     uint64
}

// FS is the file service of one node. It is safe for concurrent use. A
// workspace view (Workspace) is an FS whose only root is the workspace
// directory; it shares the node's locks, descriptor budget and
// lifetime (core).
type FS struct {
	*core
	roots   []*root
	cwd     []string
	lim     limits
	maxRead int
}

// core is the state an FS shares with its workspace views.
type core struct {
	fdsInUse atomic.Int64

	// mu orders mutations: writes and mkdir hold it shared (writes also
	// hold their target's key lock); move and delete hold it exclusively.
	mu    sync.RWMutex
	locks keyLocks

	closed atomic.Bool
	// life is held shared by every running request and exclusively by
	// Close, so root descriptors are never closed under a walker.
	life sync.RWMutex

	// testHook, when set, runs inside every request before its work
	// (tests use it to hold a request past its deadline).
	testHook func(op string)

	// inlined counts requests run inline (tests read it).
	inlined atomic.Int64
	// local says whether path-resolving reads may run inline (local.go).
	local localState
}

// New opens and pins the roots. It fails if a root is not an existing
// directory, the list is explicitly empty or longer than 64, or a
// descriptor cannot be opened. The returned FS must be closed.
func New(cfg Config) (*FS, error) {
	home := cfg.Home
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return nil, errors.New("fs: no home directory for the default root")
		}
		home = h
	}
	roots := cfg.Roots
	if roots == nil {
		roots = []string{home}
	}
	if len(roots) == 0 {
		return nil, errors.New("fs: an explicit allowed-roots list must be nonempty")
	}
	if len(roots) > protocol.FSMaxRoots {
		return nil, errors.New("fs: at most 64 allowed roots")
	}
	f := &FS{core: &core{}, lim: defaultLimits, maxRead: protocol.FSMaxReadLength}
	if cfg.MaxReadChunk > 0 && cfg.MaxReadChunk < f.maxRead {
		f.maxRead = cfg.MaxReadChunk
	}
	if cfg.Deadline > 0 {
		f.lim.deadline = cfg.Deadline
	}
	f.testHook = cfg.TestHook
	byIdentity := map[[2]uint64]*root{}
	for _, rp := range roots {
		if !filepath.IsAbs(rp) {
			f.Close()
			return nil, errors.New("fs: allowed roots must be absolute paths")
		}
		canon, err := filepath.EvalSymlinks(rp)
		if err != nil {
			f.Close()
			return nil, errors.New("fs: an allowed root does not exist")
		}
		fd, err := unix.Open(canon, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			f.Close()
			return nil, errors.New("fs: an allowed root is not an openable directory")
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			f.Close()
			return nil, errors.New("fs: cannot stat an allowed root")
		}
		lex := splitAbs(filepath.Clean(rp))
		if r, dup := byIdentity[[2]uint64{st.Dev, st.Ino}]; dup {
			unix.Close(fd)
			r.addAlias(lex)
			continue
		}
		r := &root{fd: fd, canon: canon, comps: splitAbs(canon), dev: st.Dev, ino: st.Ino}
		r.addAlias(lex)
		byIdentity[[2]uint64{st.Dev, st.Ino}] = r
		f.roots = append(f.roots, r)
	}
	if len(f.roots) > protocol.FSMaxDescriptors {
		f.Close()
		return nil, errors.New("fs: too many root descriptors")
	}
	cwd := cfg.DefaultCwd
	if cwd == "" {
		cwd = home
	}
	if !filepath.IsAbs(cwd) {
		f.Close()
		return nil, errors.New("fs: the default cwd must be an absolute path")
	}
	if c, err := filepath.EvalSymlinks(cwd); err == nil {
		cwd = c
	} else {
		cwd = filepath.Clean(cwd)
	}
	f.cwd = splitAbs(cwd)
	f.initLocal()
	return f, nil
}

func (r *root) addAlias(lex []string) {
	if equalComps(lex, r.comps) {
		return
	}
	for _, a := range r.aliases {
		if equalComps(a, lex) {
			return
		}
	}
	r.aliases = append(r.aliases, lex)
}

// Close releases the pinned root descriptors.
// Requests after Close fail with filesystem_busy.
func (f *FS) Close() error {
	if f.closed.Swap(true) {
		return nil
	}
	f.life.Lock()
	defer f.life.Unlock()
	for _, r := range f.roots {
		unix.Close(r.fd)
	}
	f.local.close()
	return nil
}

// Roots returns the canonical allowed roots, in configuration order.
func (f *FS) Roots() []string {
	out := make([]string, len(f.roots))
	for i, r := range f.roots {
		out[i] = r.canon
	}
	return out
}

// DefaultCwd returns the canonical default cwd.
func (f *FS) DefaultCwd() string { return joinAbs(f.cwd) }

// do runs one request under the 25 s deadline (or ctx, if sooner). A
// request that does not finish in time returns filesystem_outcome_unknown
// (mutationMayHaveApplied = mutation); its work may still complete in the
// background, holding its locks until then. Exception: an fs.open while
// every root and every mount under one is a local filesystem runs on the
// caller's goroutine without that deadline (local.go).
func (f *FS) do(ctx context.Context, op string, mutation bool, fn func() (any, error)) (any, error) {
	if f.closed.Load() {
		return nil, protocol.FSError(protocol.DomainFilesystemBusy)
	}
	if ctx.Err() != nil {
		return nil, protocol.FSOutcomeUnknown(false)
	}
	hook := f.testHook // read by the caller, so a test may swap it between requests
	// A test hook stands for a slow filesystem: such requests always take
	// the goroutine below.
	if hook == nil && !mutation && inlineOps[op] && f.local.inline() {
		f.inlined.Add(1)
		f.life.RLock()
		defer f.life.RUnlock()
		if f.closed.Load() {
			return nil, protocol.FSError(protocol.DomainFilesystemBusy)
		}
		return fn()
	}
	// The request's own deadline, when it comes first, is the one that
	// counts: no timer of our own then (what WithTimeout would have done
	// is fire no sooner than ctx).
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > f.lim.deadline {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.lim.deadline)
		defer cancel()
	}
	type result struct {
		v   any
		err error
	}
	ch := make(chan result, 1)
	go func() {
		f.life.RLock()
		defer f.life.RUnlock()
		if f.closed.Load() {
			ch <- result{nil, protocol.FSError(protocol.DomainFilesystemBusy)}
			return
		}
		if hook != nil {
			hook(op)
		}
		v, err := fn()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return nil, protocol.FSOutcomeUnknown(mutation)
	}
}

// splitAbs splits a clean absolute path into its components.
func splitAbs(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

func joinAbs(comps []string) string {
	return "/" + strings.Join(comps, "/")
}

func equalComps(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func hasPrefixComps(p, prefix []string) bool {
	if len(prefix) > len(p) {
		return false
	}
	for i := range prefix {
		if p[i] != prefix[i] {
			return false
		}
	}
	return true
}

// keyLocks serializes writes per canonical target path, so a symlink alias
// and the real name share one lock.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

func (k *keyLocks) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyLock{}
	}
	l := k.m[key]
	if l == nil {
		l = &keyLock{}
		k.m[key] = l
	}
	l.refs++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

// Workspace returns a view of f whose only allowed root, and default cwd,
// is the directory ws (docs/FS.md, "Workspaces"): a path outside ws is
// path_not_allowed even when it lies inside the node's roots. ws must be
// canonical (absolute, clean, without a symlink in any component) and lie
// inside one of f's roots; it is resolved from f's pinned root
// descriptors, one component at a time, like any path, and pinned as an
// O_PATH descriptor for the view's life, so replacing a component of ws
// by a symlink afterwards cannot move the view. ws "" returns f itself.
// release closes the view's descriptor; the view shares f's locks,
// descriptor budget and Close.
func (f *FS) Workspace(ws string) (view *FS, release func(), err error) {
	if ws == "" {
		return f, func() {}, nil
	}
	if f.closed.Load() {
		return nil, nil, errBusy()
	}
	if !filepath.IsAbs(ws) || filepath.Clean(ws) != ws || len(ws) > protocol.FSMaxPathBytes {
		return nil, nil, errNotAllowed()
	}
	f.life.RLock()
	defer f.life.RUnlock()
	comps := splitAbs(ws)
	t, err := f.walk(comps, walkOpts{})
	if err != nil {
		return nil, nil, errNotAllowed()
	}
	defer f.closeTarget(t)
	if !t.exists || !isDir(&t.st) || !equalComps(t.canon, comps) {
		return nil, nil, errNotAllowed()
	}
	fd, err := f.openAt(t.dir, t.name, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, nil, errNotAllowed()
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Dev != t.st.Dev || st.Ino != t.st.Ino {
		f.closeFD(fd)
		return nil, nil, errNotAllowed()
	}
	r := &root{fd: fd, canon: ws, comps: comps, dev: st.Dev, ino: st.Ino}
	view = &FS{core: f.core, roots: []*root{r}, cwd: comps, lim: f.lim, maxRead: f.maxRead}
	var once sync.Once
	return view, func() { once.Do(func() { f.closeFD(fd) }) }, nil
}

// For returns the view a host call works through: the workspace view of
// the call's execution context (hostcalls.Authority.Workspace), or f
// itself without one. release must be called when the call is done.
func (f *FS) For(call hostcalls.Call) (*FS, func(), error) {
	if call == nil {
		return f, func() {}, nil
	}
	return f.Workspace(call.Invocation().Authority.Workspace)
}
