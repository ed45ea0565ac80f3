// Package spawn is the host side of the node.process.* family (spec
// "Native processes", "Receipt meaning and reconciliation", "Cancellation
// races", "Credential privacy"). It owns every effect of the family:
//
//   - starting a literal argv (no shell, a fixed minimal environment, never
//     one from the request) in a new process group, with the admitted cwd
//     pinned by descriptor, stdin bytes then EOF, separate stdout/stderr
//     pipes and a combined output cap;
//   - stopping it: timeout, output overflow, cancel, or the end of the
//     awaiting request signal the run's processes once with SIGKILL, and
//     Cmd.WaitDelay bounds the wait for pipes a descendant still holds;
//   - the receipts: admission, the 16-active and 1,000-retained limits,
//     tombstones, restart recovery and the intent binding live in one
//     durable store namespace. Every decision about a processId is taken
//     while that id's gate is held, and its write is one transaction that
//     checks and writes together and has reached the disk (fsync) before
//     the process starts or the caller is answered; so a racing run, get or
//     cancel of the same processId sees either nothing or the committed
//     record. Decisions about different ids proceed concurrently and share
//     commits (store.Namespace.Batch, group commit);
//   - a volatile output cache of at most 16 terminal receipts for 24 hours.
//
// The durable records hold only bounded metadata (state, exit code, stop
// reason, session generation, times) and an HMAC-SHA256 intent binding
// under a node-local key; never argv, cwd, stdin or output. Nothing in this
// package logs.
//
// Every descendant of a run is contained and dies with it: a cgroup v2 per
// run where the host allows it, else the worker is a child subreaper
// (contain.go; docs/PROCESS.md, "Containment"). A worker killed mid-run
// leaves its runs' processes running until it restarts; New stops them
// (by the cgroup path, or the leader's pid and start time, in the running
// record) before their receipts become outcome_unknown.
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
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
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
	// MaxRetained bounds retained processIds, tombstones included (default
	// and maximum 1,000).
	MaxRetained int
	// OutputCacheEntries and OutputCacheTTL bound the volatile output
	// cache (defaults and maxima 16 and 24 h).
	OutputCacheEntries int
	OutputCacheTTL     time.Duration
	// WaitDelay bounds the wait for stdout/stderr after the process exited
	// or was signalled, when a descendant still holds a pipe (default 2 s).
	WaitDelay time.Duration
	// MaxPayload is the result frame size the node advertised, in bytes
	// (default 1 MiB); captured output is capped at
	// min(maxOutputBytes, protocol.ProcessOutputBudget(MaxPayload)).
	MaxPayload int
	// IntentKey is the node-local HMAC key of intent bindings (32 bytes or
	// more). Nil loads, or creates once, a random key in the store.
	IntentKey []byte
	// Now is the clock of the output cache (default time.Now).
	Now func() time.Time

	// containment forces a mechanism ("cgroup", "subreaper", "group") in
	// this package's tests; "" picks the best the host allows.
	containment string
}

// Spawner runs native processes and keeps their receipts. It is safe for
// concurrent use.
type Spawner struct {
	cfg      Config
	ns       *store.Namespace
	key      []byte
	pathDirs []string
	budget   int

	// mu guards the fields below. It is held only for memory updates,
	// never across a store read, a commit, a fork or a wait.
	mu      sync.Mutex
	closed  bool
	active  map[string]*run // by processId
	owners  map[string]*run // finished runs awaiting their own request, by ownerKey
	unsaved map[string]*run // terminal runs whose durable update failed, by processId
	runs    map[string]*run // primitive runs (spawn.start), active, and ended until released (at most primMaxEnded), by run id
	claimed map[string]bool // run ids a spawn.start in flight was asked to use
	ended   []*run          // ended primitive runs, oldest first, at most primMaxEnded kept in runs
	cache   *outputCache
	// gates holds the processIds with a decision in progress (run, get,
	// cancel, completion); the channel closes when it ends. One decision
	// per id at a time, any number of ids at once.
	gates map[string]chan struct{}
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

// Namespace is the store namespace of the process receipts.
const Namespace = "spawn"

const (
	keyIntent = "k/intent"
	// keyCgroup holds the parent cgroup of the worker that used this store
	// last, so the next one removes it (docs/PROCESS.md, "Containment").
	keyCgroup    = "k/cgroup"
	recordPrefix = "r/"
)

// New opens the receipts, turns every receipt left running by a previous
// worker into outcome_unknown (never relaunching anything), and returns a
// Spawner. It fails if the store is unavailable or /proc/self/fd is
// missing (the pinned cwd needs it).
func New(cfg Config) (*Spawner, error) {
	if cfg.Store == nil || cfg.Dirs == nil {
		return nil, errors.New("spawn: Config.Store and Config.Dirs are required")
	}
	var err error
	if cfg.MaxActive, err = limit(cfg.MaxActive, protocol.ProcessMaxActive, "MaxActive"); err != nil {
		return nil, err
	}
	if cfg.MaxRetained, err = limit(cfg.MaxRetained, protocol.ProcessMaxRetained, "MaxRetained"); err != nil {
		return nil, err
	}
	if cfg.OutputCacheEntries, err = limit(cfg.OutputCacheEntries, protocol.ProcessOutputCacheMax, "OutputCacheEntries"); err != nil {
		return nil, err
	}
	if cfg.OutputCacheTTL <= 0 || cfg.OutputCacheTTL > protocol.ProcessOutputCacheTTL {
		cfg.OutputCacheTTL = protocol.ProcessOutputCacheTTL
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
	if cfg.IntentKey != nil && len(cfg.IntentKey) < 32 {
		return nil, errors.New("spawn: IntentKey must be at least 32 bytes")
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
		owners:   map[string]*run{},
		unsaved:  map[string]*run{},
		runs:     map[string]*run{},
		claimed:  map[string]bool{},
		cache:    newOutputCache(cfg.OutputCacheEntries, cfg.OutputCacheTTL, cfg.Now),
		gates:    map[string]chan struct{}{},
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

// open stops the survivors of runs a previous worker left running, then
// loads or creates the intent key and turns those receipts into
// outcome_unknown, in one transaction.
func (s *Spawner) open() error {
	var interrupted []record
	var oldParent string
	err := s.ns.View(func(tx *store.Tx) error {
		if v, ok := tx.Get(keyCgroup); ok {
			oldParent = string(v)
		}
		return tx.ForEach(recordPrefix, "", func(k string, v []byte) error {
			if rec, err := decodeRecord(v); err == nil && rec.State == protocol.ProcessStateRunning {
				interrupted = append(interrupted, rec)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(cleanupWait)
	for _, rec := range interrupted {
		s.contain.recover(rec, deadline)
	}
	if err := s.recoverPrims(deadline); err != nil {
		return err
	}
	s.contain.removeStale(oldParent, deadline)
	return s.ns.Update(func(tx *store.Tx) error {
		if s.contain.cg != nil {
			if err := tx.Put(keyCgroup, []byte(s.contain.cg.parent)); err != nil {
				return err
			}
		} else if err := tx.Delete(keyCgroup); err != nil {
			return err
		}
		if s.cfg.IntentKey != nil {
			s.key = append([]byte(nil), s.cfg.IntentKey...)
		} else if k, ok := tx.Get(keyIntent); ok && len(k) == 32 {
			s.key = k
		} else {
			k := make([]byte, 32)
			if _, err := rand.Read(k); err != nil {
				return err
			}
			if err := tx.Put(keyIntent, k); err != nil {
				return err
			}
			s.key = k
		}
		type fix struct {
			key string
			rec record
		}
		var fixes []fix
		err := tx.ForEach(recordPrefix, "", func(k string, v []byte) error {
			rec, err := decodeRecord(v)
			if err != nil {
				return err
			}
			if rec.State == protocol.ProcessStateRunning {
				rec.State = protocol.ProcessStateOutcomeUnknown
				rec.Reason = reasonRestart
				rec.ExitCode = nil
				rec.Cgroup, rec.Pid, rec.PidStart, rec.Boot = "", 0, 0, ""
				fixes = append(fixes, fix{k, rec})
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, f := range fixes {
			if err := tx.Put(f.key, f.rec.encode()); err != nil {
				return err
			}
		}
		return nil
	})
}

// Close stops every run in progress (each is signalled once, reaped and
// recorded as cancelled), waits for their receipts, and refuses new work.
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

// lockID waits until no other decision about id is in progress and claims
// id. It is called, and returns, without s.mu held.
func (s *Spawner) lockID(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		g, ok := s.gates[id]
		if !ok {
			break
		}
		s.mu.Unlock()
		<-g
		s.mu.Lock()
	}
	s.gates[id] = make(chan struct{})
}

// unlockID ends the decision about id that lockID claimed.
func (s *Spawner) unlockID(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.gates[id])
	delete(s.gates, id)
}

// bind computes the private intent binding of a run request: HMAC-SHA256
// under the node-local key over length-prefixed cwd, argv, stdin,
// timeoutMs and maxOutputBytes. It is stored, compared in constant time,
// and never returned.
func (s *Spawner) bind(req Request) []byte {
	m := hmac.New(sha256.New, s.key)
	var n [8]byte
	put := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		m.Write(n[:])
		m.Write(b)
	}
	m.Write([]byte("lemon.process.intent.v1"))
	put([]byte(req.Cwd))
	binary.BigEndian.PutUint64(n[:], uint64(len(req.Argv)))
	m.Write(n[:])
	for _, a := range req.Argv {
		put([]byte(a))
	}
	put(req.Stdin)
	binary.BigEndian.PutUint64(n[:], uint64(req.TimeoutMs))
	m.Write(n[:])
	binary.BigEndian.PutUint64(n[:], uint64(req.MaxOutputBytes))
	m.Write(n[:])
	return m.Sum(nil)
}

// context-free errors of the family. Messages are fixed strings: no argv,
// path, byte or OS text.
func errReceiptLimit(active bool) *protocol.Error {
	msg := "the node retains 1000 process ids; no new id can be admitted"
	if active {
		msg = "the node already runs the most processes it allows; nothing was started"
	}
	return protocol.DomainError(protocol.CodeUnavailable, protocol.DomainProcessReceiptLimit, msg).WithRetry(true, false)
}

func errStore() *protocol.Error {
	return protocol.DomainError(protocol.CodeUnavailable, protocol.DomainProcessStoreUnavailable,
		"the process receipt store is unavailable").WithRetry(false, false)
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
