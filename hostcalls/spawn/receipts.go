package spawn

import (
	"crypto/hmac"
	"encoding/json"
	"errors"
	"time"

	"lemon/hostcalls/store"
	"lemon/protocol"
)

// Stop reasons kept in a record (bounded metadata, for operators reading
// the store; never returned in a receipt).
const (
	reasonTimeout  = "timeout"
	reasonOverflow = "output_overflow"
	reasonCancel   = "cancel"
	reasonAborted  = "request_ended"
	reasonShutdown = "worker_shutdown"
	reasonRestart  = "worker_restart"
	reasonSignal   = "signal_failed"
)

// record is the durable form of a receipt: bounded admission and terminal
// metadata plus the intent binding. It never holds argv, cwd, stdin or
// output.
type record struct {
	V          int    `json:"v"`
	State      string `json:"state"`
	ExitCode   *int   `json:"exitCode,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Tombstone  bool   `json:"tombstone,omitempty"`
	Intent     []byte `json:"intent,omitempty"`
	Generation uint64 `json:"generation"`
	AdmittedMs int64  `json:"admittedMs"`
	EndedMs    int64  `json:"endedMs,omitempty"`
	// Principal is the execution context's principal the run (or
	// tombstone) belongs to; "" for a request without one. Another
	// principal's get answers not_found, its cancel process_not_owner, its
	// run under the same id process_id_conflict (docs/PROCESS.md,
	// "Ownership").
	Principal string `json:"principal,omitempty"`

	// Where the processes of a running record live, so that a restarted
	// worker can stop them (docs/PROCESS.md, "Containment"): the run's
	// cgroup, or its leader's pid with its start time (clock ticks after
	// boot, /proc/PID/stat field 22), and the boot id both belong to.
	// Terminal records drop them.
	Cgroup   string `json:"cgroup,omitempty"`
	Pid      int    `json:"pid,omitempty"`
	PidStart uint64 `json:"pidStart,omitempty"`
	Boot     string `json:"boot,omitempty"`
}

func (r record) encode() []byte {
	b, _ := json.Marshal(r)
	return b
}

var errBadRecord = errors.New("spawn: malformed receipt record")

func decodeRecord(b []byte) (record, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil || r.V != 1 {
		return r, errBadRecord
	}
	switch r.State {
	case protocol.ProcessStateRunning, protocol.ProcessStateCompleted, protocol.ProcessStateCancelled, protocol.ProcessStateOutcomeUnknown:
	default:
		return r, errBadRecord
	}
	return r, nil
}

// Receipt is the host view of a process receipt (spec "Receipt meaning
// and reconciliation"). Stdout and Stderr are nil when the bytes are not
// known (OutputTruncated is then true) and empty non-nil slices for known
// zero bytes. ExitCode is set only when an exit was observed: the exit
// status, or minus the signal number when a signal ended the process.
type Receipt struct {
	ProcessID       string
	State           string
	ExitCode        *int
	Stdout, Stderr  []byte
	OutputTruncated bool
}

func unknownOutputs(id, state string, exit *int) Receipt {
	return Receipt{ProcessID: id, State: state, ExitCode: exit, OutputTruncated: true}
}

// receiptOf turns a record into a receipt, with cached output when the
// cache still holds it.
func (s *Spawner) receiptOf(id string, rec record) Receipt {
	switch {
	case rec.Tombstone:
		return unknownOutputs(id, protocol.ProcessStateCancelled, nil)
	case rec.State == protocol.ProcessStateCompleted || rec.State == protocol.ProcessStateCancelled:
		r := unknownOutputs(id, rec.State, rec.ExitCode)
		if e, ok := s.cache.get(id); ok {
			r.Stdout, r.Stderr, r.OutputTruncated = e.stdout, e.stderr, e.truncated
		}
		return r
	default:
		return unknownOutputs(id, rec.State, nil)
	}
}

// load reads one record. found is false only after a successful read that
// found no record.
func (s *Spawner) load(id string) (rec record, found bool, err error) {
	err = s.ns.View(func(tx *store.Tx) error {
		v, ok := tx.Get(recordPrefix + id)
		if !ok {
			return nil
		}
		found = true
		rec, err = decodeRecord(v)
		return err
	})
	return rec, found, err
}

// Get returns the receipt of processId, or state not_found after a
// successful store read finding none. It never starts or changes anything.
// A store failure is an error, never not_found. It is GetFor with no
// principal.
func (s *Spawner) Get(id string) (Receipt, error) { return s.GetFor(id, "") }

// GetFor is Get on behalf of principal: a run (or tombstone) of another
// principal answers not_found, as if it did not exist.
func (s *Spawner) GetFor(id, principal string) (Receipt, error) {
	if err := protocol.ValidateProcessID(id); err != nil {
		return Receipt{}, err
	}
	s.lockID(id)
	defer s.unlockID(id)
	return s.get(id, principal)
}

// get answers GetFor; the caller holds id's gate, not s.mu. The record is
// read once, for its principal and its receipt alike.
func (s *Spawner) get(id, principal string) (Receipt, error) {
	notFound := unknownOutputs(id, protocol.ProcessStateNotFound, nil)
	s.mu.Lock()
	if r, ok := s.active[id]; ok {
		s.mu.Unlock()
		if r.principal != principal {
			return notFound, nil
		}
		return unknownOutputs(id, protocol.ProcessStateRunning, nil), nil
	}
	if r, ok := s.unsaved[id]; ok {
		defer s.mu.Unlock()
		if r.terminal.Principal != principal {
			return notFound, nil
		}
		return s.receiptOf(id, r.terminal), nil
	}
	s.mu.Unlock()
	rec, found, err := s.load(id)
	if err != nil {
		return Receipt{}, errStore()
	}
	if !found || rec.Principal != principal {
		return notFound, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.receiptOf(id, rec), nil
}

// errNotOwner refuses a cancel of another principal's run.
func errNotOwner() *protocol.Error {
	return protocol.DomainError(protocol.CodeForbidden, protocol.DomainProcessNotOwner,
		"the process belongs to another principal").WithRetry(false, false)
}

// Cancel implements node.process.cancel for processId, on behalf of the
// node session generation gen:
//
//   - an active run started by the same generation is signalled (its group,
//     once) and wait is returned: it closes when the run's receipt is final,
//     which Get then returns;
//   - an active run of another generation: FORBIDDEN process_not_owner,
//     nothing is signalled;
//   - an existing terminal receipt is returned as it is (a terminal race
//     never invents a kill);
//   - an absent id gets a durable cancelled tombstone, committed (fsync)
//     before Cancel returns, so no later run can start under it; at the
//     retained limit that is process_receipt_limit instead.
func (s *Spawner) Cancel(id string, gen uint64) (rc Receipt, wait <-chan struct{}, err error) {
	return s.CancelFor(id, gen, "")
}

// CancelFor is Cancel on behalf of principal: a run, receipt or tombstone
// of another principal is FORBIDDEN process_not_owner and nothing is
// signalled or written; a new tombstone belongs to principal.
func (s *Spawner) CancelFor(id string, gen uint64, principal string) (rc Receipt, wait <-chan struct{}, err error) {
	if perr := protocol.ValidateProcessID(id); perr != nil {
		return Receipt{}, nil, perr
	}
	s.lockID(id)
	s.mu.Lock()
	r, active := s.active[id]
	closed := s.closed
	_, unsaved := s.unsaved[id]
	s.mu.Unlock()
	if active {
		s.unlockID(id)
		if r.principal != principal {
			return Receipt{}, nil, errNotOwner()
		}
		if r.gen != gen {
			return Receipt{}, nil, protocol.DomainError(protocol.CodeForbidden, protocol.DomainProcessNotOwner,
				"only the node session that started the process may cancel it").WithRetry(true, false)
		}
		r.stop(reasonCancel)
		return Receipt{}, r.done, nil
	}
	defer s.unlockID(id)
	if closed {
		return Receipt{}, nil, errClosed()
	}
	if unsaved {
		s.mu.Lock()
		owner := s.unsaved[id].terminal.Principal
		s.mu.Unlock()
		if owner != principal {
			return Receipt{}, nil, errNotOwner()
		}
		rc, err := s.get(id, principal)
		return rc, nil, err
	}
	now := s.cfg.Now().UnixMilli()
	tomb := record{V: 1, State: protocol.ProcessStateCancelled, Tombstone: true, Generation: gen,
		AdmittedMs: now, EndedMs: now, Principal: principal}
	var existing *record
	full := false
	// A decision, not an error, leaves the function: an error would roll
	// back the whole group commit.
	err = s.ns.Batch(func(tx *store.Tx) error {
		existing, full = nil, false
		if v, ok := tx.Get(recordPrefix + id); ok {
			rec, err := decodeRecord(v)
			if err != nil {
				return err
			}
			existing = &rec
			return nil
		}
		if tx.Count(recordPrefix) >= s.cfg.MaxRetained {
			full = true
			return nil
		}
		return tx.Put(recordPrefix+id, tomb.encode())
	})
	switch {
	case err != nil:
		return Receipt{}, nil, errStore()
	case full:
		return Receipt{}, nil, errReceiptLimit(false)
	case existing != nil && existing.Principal != principal:
		return Receipt{}, nil, errNotOwner()
	case existing != nil:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.receiptOf(id, *existing), nil, nil
	}
	return unknownOutputs(id, protocol.ProcessStateCancelled, nil), nil, nil
}

// existingReceipt answers a run whose processId already has a record: a
// tombstone answers with its cancelled receipt (the run was cancelled
// before it could execute); the same intent answers with the current
// receipt; a different intent is CONFLICT process_id_conflict. Nothing is
// ever executed again. The caller holds s.mu.
func (s *Spawner) existingReceipt(id string, rec record, intent []byte, principal string) (Receipt, error) {
	if rec.Principal != principal {
		// Another principal's run or tombstone: never answered, never
		// run (docs/PROCESS.md, "Ownership").
		return Receipt{}, errIDConflict()
	}
	if rec.Tombstone {
		return s.receiptOf(id, rec), nil
	}
	if !hmac.Equal(rec.Intent, intent) {
		return Receipt{}, errIDConflict()
	}
	if _, ok := s.active[id]; ok {
		return unknownOutputs(id, protocol.ProcessStateRunning, nil), nil
	}
	if r, ok := s.unsaved[id]; ok {
		return s.receiptOf(id, r.terminal), nil
	}
	return s.receiptOf(id, rec), nil
}

// outputCache keeps the output of at most max terminal receipts for ttl,
// in memory only: losing it never changes a receipt's state or exit.
type outputCache struct {
	max   int
	ttl   time.Duration
	now   func() time.Time
	order []string // oldest first
	m     map[string]cacheEntry
}

type cacheEntry struct {
	stdout, stderr []byte
	truncated      bool
	at             time.Time
}

func newOutputCache(max int, ttl time.Duration, now func() time.Time) *outputCache {
	return &outputCache{max: max, ttl: ttl, now: now, m: map[string]cacheEntry{}}
}

func (c *outputCache) expire() {
	now := c.now()
	for len(c.order) > 0 {
		e := c.m[c.order[0]]
		if len(c.order) <= c.max && now.Sub(e.at) < c.ttl {
			return
		}
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
}

func (c *outputCache) put(id string, stdout, stderr []byte, truncated bool) {
	if _, ok := c.m[id]; ok {
		return
	}
	c.m[id] = cacheEntry{stdout: stdout, stderr: stderr, truncated: truncated, at: c.now()}
	c.order = append(c.order, id)
	c.expire()
}

func (c *outputCache) get(id string) (cacheEntry, bool) {
	c.expire()
	e, ok := c.m[id]
	return e, ok
}

func (c *outputCache) len() int {
	c.expire()
	return len(c.m)
}

func errIDConflict() *protocol.Error {
	return protocol.DomainError(protocol.CodeConflict, protocol.DomainProcessIDConflict,
		"processId is already bound to a different request; it is never run again").WithRetry(false, false)
}
