// Package spawn is the host side of native processes: the spawn
// primitives (spawn.start, spawn.wait, spawn.signal, spawn.release;
// docs/PROCESS.md, "Spawn primitives"). It owns every effect:
//
//   - starting a literal argv (no shell, a fixed minimal environment, never
//     one from the request) in a new process group, with the admitted cwd
//     pinned by descriptor, stdin bytes then EOF, separate stdout/stderr
//     pipes and a combined output cap, under the command policy, the
//     execution context's limits and the 16-active budget;
//   - stopping it: timeout, output overflow, a signal, or the end of the
//     awaiting request signal the run's processes once with SIGKILL, and
//     Cmd.WaitDelay bounds the wait for pipes a descendant still holds;
//   - its containment record: where a run's processes live, written
//     (fsync) before the exec and deleted at its end, so a restarted
//     worker stops the survivors of a killed one.
//
// It keeps no receipt: at-most-once, tombstones, retention and the output
// cache are decided by the module that calls the primitives (the process
// module: docs/PROCESS.md, "The receipt machine in the module"). Nothing
// in this package logs.
//
// Every descendant of a run is contained and dies with it: a cgroup v2 per
// run where the host allows it, else the worker is a child subreaper
// (contain.go; docs/PROCESS.md, "Containment").
//
// Limits, stated plainly: cwd admission is not an OS sandbox (processes
// run with the worker account's rights); where neither cgroup v2 nor a
// subreaper is available only the process group is stopped, so a setsid'd
// orphan survives the run (its pipes are closed after WaitDelay). Linux
// only: it relies on /proc/self/fd for the pinned cwd and /proc for
// process start times.
package spawn

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"time"

	"lemon/hostcalls/store"
	"lemon/protocol"
)

// DirResolver admits a cwd under the node's allowed roots (hostcalls/fs
// implements it with its pinned root descriptors and component walker).
// OpenDir resolves path (relative to the node's default cwd, or absolute)
// and returns an O_DIRECTORY|O_CLOEXEC descriptor of the admitted directory,
// which the caller closes, and its canonical path. Errors should be
// *protocol.Error (path_not_allowed, not_found, not_directory); any other
// error is reported as path_not_allowed.
type DirResolver interface {
	OpenDir(path string) (fd int, canonical string, err error)
}

// Config configures a Spawner. Zero values take the defaults named.
type Config struct {
	// Store is the durable store; the Spawner uses its host namespace
	// "spawn". Required. The Spawner does not close it.
	Store *store.Store
	// Dirs admits cwd. Required.
	Dirs DirResolver
	// Workspace returns the resolver of an execution context's workspace
	// (a view of Dirs whose only root is ws) and its release; nil refuses
	// every run under a workspace (docs/PROCESS.md, "Workspaces").
	Workspace func(ws string) (DirResolver, func(), error)
	// AllowedCommands is the worker policy's allowed_commands: nil (field
	// omitted) or a list holding "all" allows every command; an empty list
	// allows none; otherwise argv[0] must match an entry by name or by
	// resolved path.
	AllowedCommands *[]string
	// BlockedCommands is the worker policy's blocked_commands: argv[0] is
	// refused when its name, its resolved path or that path's symlink
	// target matches an entry.
	BlockedCommands []string
	// Env is the complete environment of every process (default: PATH,
	// HOME and LANG=C.UTF-8; see DefaultEnv). Requests cannot change it.
	// Its PATH resolves bare argv[0] names.
	Env []string
	// MaxActive bounds runs in progress (default and maximum 16).
	MaxActive int
	// WaitDelay bounds the wait for stdout/stderr after the process exited
	// or was signalled, when a descendant still holds a pipe (default 2 s).
	WaitDelay time.Duration
	// MaxPayload is the result frame size the node advertised, in bytes
	// (default 1 MiB); captured output is capped at
	// min(maxOutputBytes, protocol.ProcessOutputBudget(MaxPayload)).
	MaxPayload int
	// Now is the clock of run times (default time.Now).
	Now func() time.Time

	// containment forces a mechanism ("cgroup", "subreaper", "group") in
	// this package's tests; "" picks the best the host allows.
	containment string
}

// Spawner runs native processes. It is safe for concurrent use.
type Spawner struct {
	cfg      Config
	ns       *store.Namespace
	pathDirs []string
	budget   int

	// mu guards the fields below. It is held only for memory updates,
	// never across a store read, a commit, a fork or a wait.
	mu      sync.Mutex
	closed  bool
	active  map[string]*run // by activeKey
	runs    map[string]*run // primitive runs (spawn.start), active, and ended until released or forgotten (recordEnded), by run id
	claimed map[string]bool // run ids a spawn.start in flight was asked to use
	ended   []*run          // ended primitive runs kept in runs, oldest first, within the bounds of primMaxEnded
	// endedBy is what each principal's ended runs hold, endedBytes the
	// output of all of them.
	endedBy    map[string]endedLoad
	endedBytes int64
	// admitting counts admissions that passed the active-run check and
	// have not yet joined active or given up; changed is signalled (on mu)
	// whenever admitting or active shrinks or closed is set.
	admitting int
	changed   *sync.Cond
	killFn    func(r *run) error // test hook: signal the run's processes
	contain   *containment
}

// DefaultEnv is the fixed environment of processes when Config.Env is nil.
func DefaultEnv() []string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = "/"
	}
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + home, "LANG=C.UTF-8"}
}

// Namespace is the store namespace of the spawner's containment records.
const Namespace = "spawn"

const (
	// keyCgroup holds the parent cgroup of the worker that used this store
	// last, so the next one removes it (docs/PROCESS.md, "Containment").
	keyCgroup = "k/cgroup"
)

// New stops the survivors of runs a previous worker left (by their
// containment records) and returns a Spawner. It fails if the store is unavailable or /proc/self/fd is
// missing (the pinned cwd needs it).
func New(cfg Config) (*Spawner, error) {
	if cfg.Store == nil || cfg.Dirs == nil {
		return nil, errors.New("spawn: Config.Store and Config.Dirs are required")
	}
	var err error
	if cfg.MaxActive, err = limit(cfg.MaxActive, protocol.ProcessMaxActive, "MaxActive"); err != nil {
		return nil, err
	}
	if cfg.WaitDelay <= 0 {
		cfg.WaitDelay = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Env == nil {
		cfg.Env = DefaultEnv()
	}
	if st, err := os.Stat("/proc/self/fd"); err != nil || !st.IsDir() {
		return nil, errors.New("spawn: /proc/self/fd is unavailable; the pinned cwd needs procfs")
	}
	ns, err := cfg.Store.Namespace(Namespace)
	if err != nil {
		return nil, err
	}
	s := &Spawner{
		cfg: cfg, ns: ns,
		pathDirs: pathDirs(cfg.Env),
		budget:   protocol.ProcessOutputBudget(cfg.MaxPayload),
		active:   map[string]*run{},
		runs:     map[string]*run{},
		claimed:  map[string]bool{},
		endedBy:  map[string]endedLoad{},
		killFn:   (*run).killMembers,
	}
	s.changed = sync.NewCond(&s.mu)
	if s.contain, err = newContainment(cfg.containment); err != nil {
		return nil, err
	}
	if err := s.open(); err != nil {
		s.contain.close()
		return nil, err
	}
	return s, nil
}

func limit(v, max int, name string) (int, error) {
	if v == 0 {
		return max, nil
	}
	if v < 0 || v > max {
		return 0, errors.New("spawn: Config." + name + " is out of range")
	}
	return v, nil
}

// pathDirs returns the absolute directories of env's PATH; relative
// entries ("", ".") are ignored so a bare name never resolves in cwd.
func pathDirs(env []string) []string {
	var out []string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, d := range strings.Split(v, ":") {
				if strings.HasPrefix(d, "/") {
					out = append(out, d)
				}
			}
		}
	}
	return out
}

// open stops the survivors of runs a previous worker left (their
// containment records) and notes this worker's parent cgroup, so the next
// worker removes it.
func (s *Spawner) open() error {
	var oldParent string
	err := s.ns.View(func(tx *store.Tx) error {
		if v, ok := tx.Get(keyCgroup); ok {
			oldParent = string(v)
		}
		return nil
	})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(cleanupWait)
	if err := s.recoverPrims(deadline); err != nil {
		return err
	}
	s.contain.removeStale(oldParent, deadline)
	return s.ns.Update(func(tx *store.Tx) error {
		if s.contain.cg != nil {
			return tx.Put(keyCgroup, []byte(s.contain.cg.parent))
		}
		return tx.Delete(keyCgroup)
	})
}

// Close stops every run in progress (each is signalled once, stop reason
// worker_shutdown, and reaped), waits for them to end, and refuses new
// work.
// It does not close the store.
func (s *Spawner) Close() error {
	s.mu.Lock()
	s.closed = true
	s.changed.Broadcast()
	// An admission already past its checks either joins active (and is
	// stopped below) or gives up; none starts after this.
	for s.admitting > 0 {
		s.changed.Wait()
	}
	runs := make([]*run, 0, len(s.active))
	for _, r := range s.active {
		runs = append(runs, r)
	}
	s.mu.Unlock()
	for _, r := range runs {
		r.stop(reasonShutdown)
	}
	for _, r := range runs {
		<-r.done
	}
	s.contain.close()
	return nil
}

func errReceiptLimit(bool) *protocol.Error {
	return protocol.DomainError(protocol.CodeUnavailable, protocol.DomainProcessReceiptLimit,
		"the node already runs the most processes it allows; nothing was started").WithRetry(true, false)
}

func errStore() *protocol.Error {
	return protocol.DomainError(protocol.CodeUnavailable, protocol.DomainProcessStoreUnavailable,
		"the spawner's containment store is unavailable").WithRetry(false, false)
}

func errClosed() *protocol.Error {
	return protocol.DomainError(protocol.CodeUnavailable, protocol.DomainProcessStoreUnavailable,
		"the process service is shutting down").WithRetry(true, false)
}

// ctxDone reports whether ctx is done without blocking.
func ctxDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}
