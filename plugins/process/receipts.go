//go:build wasip1

package main

// The receipt state machine of node.process.* (docs/PROCESS.md, "The
// receipt machine in the module"), on the spawn primitives and the
// module's own store. Keys:
//
//	durable  r/<processId>  the record (record below): at-most-once, tombstones, ownership
//	durable  n              how many r/ records exist (the retained count, by compare-and-swap)
//	durable  k              the node-local key of the intent binding (32 random bytes, hex)
//	volatile boot           this worker's id: a started record of another boot is a dead worker's
//	volatile o              the output cache: the ended runs whose output the host keeps, oldest first
//
// The record never holds argv, cwd, stdin or output; output bytes stay in
// the host (spawn.release decides how long) and never enter this module.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"lemon/host/abi/wire"
	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
	"lemon/plugins/sdk/blob"
	"lemon/plugins/sdk/config"
	"lemon/plugins/sdk/spawn"
	"lemon/plugins/sdk/store"
	"lemon/protocol"
)

// stateStarted is a record whose run was admitted (the record is durable
// before spawn.start) and has no terminal receipt yet.
const stateStarted = "started"

// startingGrace is how long after its admission a started record of this
// worker whose run the host does not know yet (the admitting instance is
// between the record and spawn.start) reads running; past it, an
// instance that died in between leaves outcome_unknown.
const startingGrace = 5 * time.Second

// record is the durable form of a receipt.
type record struct {
	V         int    `json:"v"`
	State     string `json:"state"`
	ExitCode  *int   `json:"exitCode,omitempty"`
	Tombstone bool   `json:"tombstone,omitempty"`
	// Intent is the hex HMAC-SHA256 binding of the run's request (intent).
	Intent     string `json:"intent,omitempty"`
	Generation uint64 `json:"generation"`
	Principal  string `json:"principal,omitempty"`
	Boot       string `json:"boot,omitempty"`
	// Run is the run id, chosen here and recorded before spawn.start.
	Run        string `json:"run,omitempty"`
	AdmittedMs int64  `json:"admittedMs"`
	EndedMs    int64  `json:"endedMs,omitempty"`
	// Stopped is the host's stop reason for a cancelled run (operators'
	// metadata, never returned).
	Stopped string `json:"stopped,omitempty"`
}

// view is a receipt before shaping: outputs are blobs or unknown.
type view struct {
	state          string
	exit           *int
	stdout, stderr *uint32
	truncated      bool
}

func unknownView(state string, exit *int) view {
	return view{state: state, exit: exit, truncated: true}
}

func nowMs() int64 { return time.Now().UnixMilli() }

func errStore() *protocol.Error {
	return protocol.DomainError(protocol.CodeUnavailable, protocol.DomainProcessStoreUnavailable,
		"the process receipt store is unavailable").WithRetry(false, false)
}

func errReceiptLimit() *protocol.Error {
	return protocol.DomainError(protocol.CodeUnavailable, protocol.DomainProcessReceiptLimit,
		"the node retains its maximum of process ids; no new id can be admitted").WithRetry(true, false)
}

func errIDConflict() *protocol.Error {
	return protocol.DomainError(protocol.CodeConflict, protocol.DomainProcessIDConflict,
		"processId is already bound to a different request; it is never run again").WithRetry(false, false)
}

func errNotOwner() *protocol.Error {
	return protocol.DomainError(protocol.CodeForbidden, protocol.DomainProcessNotOwner,
		"the process belongs to another principal").WithRetry(false, false)
}

func errOtherGeneration() *protocol.Error {
	return protocol.DomainError(protocol.CodeForbidden, protocol.DomainProcessNotOwner,
		"only the node session that started the process may cancel it").WithRetry(true, false)
}

// limits are the worker policy's bounds the module decides by: the worker
// hands them over as settings of the process module (docs/POLICY.md,
// "Module settings"); without them the protocol defaults hold.
var limits struct {
	loaded       bool
	maxRetained  int
	cacheEntries int
}

func loadLimits() {
	if limits.loaded {
		return
	}
	limits.loaded = true
	limits.maxRetained, limits.cacheEntries = protocol.ProcessMaxRetained, protocol.ProcessOutputCacheMax
	s, err := config.Get()
	if err != nil {
		return
	}
	pick := func(key string, max int, into *int) {
		if f, ok := s[key].(float64); ok && f >= 1 && f <= float64(max) && f == float64(int(f)) {
			*into = int(f)
		}
	}
	pick("max_retained_receipts", protocol.ProcessMaxRetained, &limits.maxRetained)
	pick("output_cache_entries", protocol.ProcessOutputCacheMax, &limits.cacheEntries)
}

// principalOf is the execution context's principal ("" without one). The
// host parsed and checked the context strictly before the invocation; the
// module reads only this field.
func principalOf(req *sdk.Request) (string, error) {
	raw := req.Invocation.ExecutionContext
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var ec struct {
		Principal string `json:"principal"`
	}
	if err := wire.Unmarshal(raw, &ec); err != nil {
		return "", protocol.Errorf(protocol.CodeInternal, "the execution context could not be read")
	}
	return ec.Principal, nil
}

var bootID string

// boot is this worker's id, kept in the volatile namespace (lost with the
// worker, like its runs).
func boot() (string, error) {
	if bootID != "" {
		return bootID, nil
	}
	for i := 0; i < 3; i++ {
		g, err := store.Volatile.Get("boot")
		if err != nil {
			return "", errStore()
		}
		if g.Found {
			var s string
			if wire.Unmarshal(g.Value, &s) != nil || s == "" {
				return "", errStore()
			}
			bootID = s
			return s, nil
		}
		id, err := randomHex(16)
		if err != nil {
			return "", err
		}
		if _, err := store.Volatile.CAS("boot", 0, jsonString(id)); err != nil {
			return "", errStore()
		}
	}
	return "", errStore()
}

var intentKey []byte

// emptySHA256 is the SHA-256 of no bytes: an empty stdin is not hashed on
// the host.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// key is the node-local key of the intent binding, created once in the
// durable namespace.
func key() ([]byte, error) {
	if intentKey != nil {
		return intentKey, nil
	}
	for i := 0; i < 3; i++ {
		g, err := store.Get("k")
		if err != nil {
			return nil, errStore()
		}
		if g.Found {
			var s string
			if wire.Unmarshal(g.Value, &s) != nil {
				return nil, errStore()
			}
			k, err := hex.DecodeString(s)
			if err != nil || len(k) != 32 {
				return nil, errStore()
			}
			intentKey = k
			return k, nil
		}
		s, err := randomHex(32)
		if err != nil {
			return nil, err
		}
		if _, err := store.CAS("k", 0, jsonString(s)); err != nil {
			return nil, errStore()
		}
	}
	return nil, errStore()
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", protocol.Errorf(protocol.CodeInternal, "no random bytes")
	}
	return hex.EncodeToString(b), nil
}

func jsonString(s string) json.RawMessage { return json.RawMessage(`"` + s + `"`) } // s is hex

// intent is the private binding of a run request: HMAC-SHA256 under the
// node-local key over the length-prefixed cwd, argv, the SHA-256 of the
// stdin bytes (hashed on the host), timeoutMs and maxOutputBytes. It is
// stored and compared in constant time, never returned.
func intent(p protocol.ProcessRunParams, stdin uint32, size int64) (string, error) {
	k, err := key()
	if err != nil {
		return "", err
	}
	d := contract.Digest{SHA256: emptySHA256}
	if size > 0 {
		if d, err = blob.SHA256(stdin); err != nil {
			return "", err
		}
	}
	m := hmac.New(sha256.New, k)
	var n [8]byte
	num := func(v uint64) { binary.BigEndian.PutUint64(n[:], v); m.Write(n[:]) }
	field := func(s string) { num(uint64(len(s))); m.Write([]byte(s)) }
	field(p.Cwd)
	num(uint64(len(p.Argv)))
	for _, a := range p.Argv {
		field(a)
	}
	field(d.SHA256)
	num(uint64(d.Size))
	num(uint64(p.TimeoutMs))
	num(uint64(p.MaxOutputBytes))
	return hex.EncodeToString(m.Sum(nil)), nil
}

func recordKey(id string) string { return "r/" + id }

// load reads the record of id: found is false only after a successful
// read finding none; a store failure is process_store_unavailable.
func load(id string) (rec record, rev uint64, found bool, err error) {
	g, err := store.Get(recordKey(id))
	if err != nil {
		return rec, 0, false, errStore()
	}
	if !g.Found {
		return rec, 0, false, nil
	}
	if wire.Unmarshal(g.Value, &rec) != nil || rec.V != 1 {
		return rec, 0, false, errStore()
	}
	return rec, g.Revision, true, nil
}

func encode(v any) json.RawMessage {
	b, _ := wire.Marshal(v)
	return b
}

// takeSlot counts one more retained id (n, by compare-and-swap), refusing
// at the limit: the count stays exact under concurrent admissions.
func takeSlot() error {
	loadLimits()
	// This instance's last view of the count is usually current: one
	// compare-and-swap without a read.
	if slot.rev != 0 && slot.n < limits.maxRetained {
		r, err := store.CAS("n", slot.rev, encode(slot.n+1))
		if err != nil {
			return errStore()
		}
		if r.Swapped {
			slot.n, slot.rev = slot.n+1, r.Revision
			return nil
		}
	}
	for {
		g, err := store.Get("n")
		if err != nil {
			return errStore()
		}
		var n int
		if g.Found && wire.Unmarshal(g.Value, &n) != nil {
			return errStore()
		}
		if n >= limits.maxRetained {
			return errReceiptLimit()
		}
		r, err := store.CAS("n", g.Revision, encode(n+1))
		if err != nil {
			return errStore()
		}
		if r.Swapped {
			slot.n, slot.rev = n+1, r.Revision
			return nil
		}
	}
}

// slot is this instance's last view of the retained count.
var slot struct {
	n   int
	rev uint64
}

// giveSlot returns a slot taken for an id that was not admitted after
// all. Best effort: a failure leaves the count one high (a slot lost,
// never an id run twice).
func giveSlot() {
	for i := 0; i < 100; i++ {
		g, err := store.Get("n")
		if err != nil || !g.Found {
			return
		}
		var n int
		if wire.Unmarshal(g.Value, &n) != nil || n <= 0 {
			return
		}
		r, err := store.CAS("n", g.Revision, encode(n-1))
		if err != nil {
			return
		}
		if r.Swapped {
			slot.n, slot.rev = n-1, r.Revision
			return
		}
	}
}

// facts maps how a run ended to a receipt state and exit code
// (docs/PROCESS.md, "The receipt"): a failed signal or no wait status is
// outcome_unknown; a stop the host made is cancelled; otherwise completed.
// exitCode is the exit status or minus the signal number.
func facts(x *contract.SpawnExit) (state string, exit *int) {
	if x == nil || x.SignalFailed {
		return protocol.ProcessStateOutcomeUnknown, nil
	}
	switch {
	case x.ExitCode != nil:
		c := *x.ExitCode
		exit = &c
	case x.Signal > 0:
		c := -x.Signal
		exit = &c
	default:
		return protocol.ProcessStateOutcomeUnknown, nil
	}
	if x.Stopped != "" {
		return protocol.ProcessStateCancelled, exit
	}
	return protocol.ProcessStateCompleted, exit
}

// outputs is a view of a terminal state with x's output blobs, when it
// has them.
func outputs(state string, exit *int, x *contract.SpawnExit) view {
	v := unknownView(state, exit)
	if state == protocol.ProcessStateOutcomeUnknown || x == nil || x.StdoutBlob == nil || x.StderrBlob == nil {
		return v
	}
	v.stdout, v.stderr, v.truncated = x.StdoutBlob, x.StderrBlob, x.OutputTruncated
	return v
}

// settle writes the terminal record of a started record (revision rev)
// from how its run ended (x nil: unknown) and returns the terminal state.
// Whoever swaps first settles; a later settler reads the stored state. The
// winner moves run's output into the cache. A store failure still answers
// (the record stays started, so a later request settles it again; the run
// is not released meanwhile).
func settle(id string, rec record, rev uint64, run string, x *contract.SpawnExit) (string, *int) {
	t := rec
	t.State, t.ExitCode = facts(x)
	t.EndedMs = nowMs()
	if x != nil && t.State == protocol.ProcessStateCancelled {
		t.Stopped = x.Stopped
	}
	r, err := store.CAS(recordKey(id), rev, encode(t))
	if err != nil {
		return t.State, t.ExitCode
	}
	if !r.Swapped {
		if cur, _, found, err := load(id); err == nil && found && cur.State != stateStarted {
			return cur.State, cur.ExitCode
		}
		return t.State, t.ExitCode
	}
	if run != "" {
		if x != nil && t.State != protocol.ProcessStateOutcomeUnknown {
			cacheOutput(id, run)
		} else {
			spawn.Release(run)
		}
	}
	return t.State, t.ExitCode
}

// The output cache is one volatile key, "o": its entries oldest first,
// updated by compare-and-swap. An entry names the ended run whose output
// the host keeps for a terminal receipt. The value is one JSON string,
// "processId run atMs" per entry joined by ";" (no field needs escaping:
// processIds are [A-Za-z0-9_:-], run ids hex), so reading and writing it
// costs a string scan, not a JSON decode of 16 objects.
type cacheIndex struct {
	Entries []cacheEntry
}

type cacheEntry struct {
	ID   string
	Run  string
	AtMs int64
}

func (c cacheIndex) encode() json.RawMessage {
	b := make([]byte, 0, 2+len(c.Entries)*64)
	b = append(b, '"')
	for i, e := range c.Entries {
		if i > 0 {
			b = append(b, ';')
		}
		b = append(b, e.ID...)
		b = append(b, ' ')
		b = append(b, e.Run...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, e.AtMs, 10)
	}
	return append(b, '"')
}

func decodeCache(v json.RawMessage) cacheIndex {
	var c cacheIndex
	// The value is one JSON string without escapes (cacheIndex.encode);
	// anything else reads as an empty cache.
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return c
	}
	rest := string(v[1 : len(v)-1])
	if strings.IndexByte(rest, '\\') >= 0 {
		return c
	}
	for rest != "" {
		part := rest
		if i := strings.IndexByte(rest, ';'); i >= 0 {
			part, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		i := strings.IndexByte(part, ' ')
		j := strings.LastIndexByte(part, ' ')
		if i <= 0 || j <= i+1 {
			continue
		}
		var at int64
		ok := j+1 < len(part)
		for _, ch := range part[j+1:] {
			if ch < '0' || ch > '9' {
				ok = false
				break
			}
			at = at*10 + int64(ch-'0')
		}
		if ok {
			c.Entries = append(c.Entries, cacheEntry{ID: part[:i], Run: part[i+1 : j], AtMs: at})
		}
	}
	return c
}

func readCache() (cacheIndex, uint64, error) {
	g, err := store.Volatile.Get("o")
	if err != nil {
		return cacheIndex{}, 0, err
	}
	if !g.Found {
		return cacheIndex{}, 0, nil
	}
	return decodeCache(g.Value), g.Revision, nil
}

// lastCache is this instance's last view of the cache index and its
// revision: usually current, so an update is one compare-and-swap
// without a read.
var lastCache struct {
	c   cacheIndex
	rev uint64
}

// cacheOutput adds id's run to the output cache, then releases the runs
// of the oldest entries past output_cache_entries and of those older than
// 24 hours (docs/PROCESS.md, "Output cache"). On a store failure the run
// is released: its output is simply not cached.
func cacheOutput(id, run string) {
	loadLimits()
	ttl := protocol.ProcessOutputCacheTTL.Milliseconds()
	for i := 0; i < 100; i++ {
		c, rev := lastCache.c, lastCache.rev
		if i > 0 || rev == 0 {
			var err error
			if c, rev, err = readCache(); err != nil {
				break
			}
		}
		now := nowMs()
		kept := make([]cacheEntry, 0, len(c.Entries)+1)
		var drop []string
		for _, e := range c.Entries {
			if now-e.AtMs >= ttl || e.ID == id {
				drop = append(drop, e.Run)
			} else {
				kept = append(kept, e)
			}
		}
		kept = append(kept, cacheEntry{ID: id, Run: run, AtMs: now})
		for len(kept) > limits.cacheEntries {
			drop = append(drop, kept[0].Run)
			kept = kept[1:]
		}
		r, err := store.Volatile.CAS("o", rev, cacheIndex{Entries: kept}.encode())
		if err != nil {
			break
		}
		if r.Swapped {
			lastCache.c, lastCache.rev = cacheIndex{Entries: kept}, r.Revision
			for _, d := range drop {
				if d != run {
					spawn.Release(d)
				}
			}
			return
		}
	}
	spawn.Release(run)
}

// cachedOutput returns the output the cache holds for id's terminal
// receipt (nil: none, or older than 24 hours).
func cachedOutput(id string) *contract.SpawnExit {
	c, _, err := readCache()
	if err != nil {
		return nil
	}
	for _, e := range c.Entries {
		if e.ID != id {
			continue
		}
		if nowMs()-e.AtMs >= protocol.ProcessOutputCacheTTL.Milliseconds() {
			return nil
		}
		w, err := spawn.Wait(e.Run)
		if err != nil || w.State != contract.SpawnExited {
			return nil
		}
		return w.Exit
	}
	return nil
}

// progress is where a started record's run stands.
type progress struct {
	run    string
	handle uint32 // with running: suspend on it
	state  string // contract.SpawnRunning, SpawnExited, SpawnStarting or SpawnUnknown
	exit   *contract.SpawnExit
}

// track finds a started record's run: a record of another boot (the
// worker restarted) or whose run this worker does not know is unknown,
// except just after its admission (spawn.start not yet called).
func track(rec record) (progress, error) {
	b, err := boot()
	if err != nil {
		return progress{}, err
	}
	if rec.Boot != b || rec.Run == "" {
		return progress{state: contract.SpawnUnknown}, nil
	}
	w, err := spawn.Wait(rec.Run)
	if err != nil {
		return progress{}, err
	}
	p := progress{run: rec.Run, handle: w.Handle, state: w.State, exit: w.Exit}
	if p.state == contract.SpawnUnknown && nowMs()-rec.AdmittedMs < startingGrace.Milliseconds() {
		p.state = contract.SpawnStarting
	}
	return p, nil
}

// observe answers the current receipt of a record (revision rev), settling
// a started one whose run has ended or is unknown.
func observe(id string, rec record, rev uint64) (view, error) {
	switch {
	case rec.Tombstone:
		return unknownView(protocol.ProcessStateCancelled, nil), nil
	case rec.State != stateStarted:
		if rec.State == protocol.ProcessStateOutcomeUnknown {
			return unknownView(rec.State, nil), nil
		}
		return outputs(rec.State, rec.ExitCode, cachedOutput(id)), nil
	}
	p, err := track(rec)
	if err != nil {
		return view{}, err
	}
	switch p.state {
	case contract.SpawnRunning, contract.SpawnStarting:
		return unknownView(protocol.ProcessStateRunning, nil), nil
	case contract.SpawnExited:
		state, exit := settle(id, rec, rev, p.run, p.exit)
		return outputs(state, exit, p.exit), nil
	}
	state, exit := settle(id, rec, rev, p.run, nil)
	return unknownView(state, exit), nil
}

// admit is node.process.run for an id without a record, or the receipt
// of the record it has: a started record is durable before spawn.start,
// so nothing ever runs twice under one id.
func admit(req *sdk.Request, p protocol.ProcessRunParams, stdin uint32, stdinSize int64, nodeID string) (*sdk.Result, error) {
	principal, err := principalOf(req)
	if err != nil {
		return nil, err
	}
	in, err := intent(p, stdin, stdinSize)
	if err != nil {
		return nil, err
	}
	b, err := boot()
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		rec, rev, found, err := load(p.ProcessID)
		if err != nil {
			return nil, err
		}
		if found {
			return existing(p.ProcessID, nodeID, rec, rev, in, principal)
		}
		if attempt == 3 {
			return nil, errStore()
		}
		if err := takeSlot(); err != nil {
			if pe, ok := err.(*protocol.Error); ok && pe.DomainCode() == protocol.DomainProcessReceiptLimit {
				// A racing request may have created this id meanwhile.
				if rec, rev, found, lerr := load(p.ProcessID); lerr == nil && found {
					return existing(p.ProcessID, nodeID, rec, rev, in, principal)
				}
			}
			return nil, err
		}
		run, err := randomHex(8)
		if err != nil {
			giveSlot()
			return nil, err
		}
		rec = record{V: 1, State: stateStarted, Intent: in, Generation: req.Invocation.SessionGeneration,
			Principal: principal, Boot: b, Run: "r" + run, AdmittedMs: nowMs()}
		r, err := store.CAS(recordKey(p.ProcessID), 0, encode(rec))
		if err != nil {
			giveSlot()
			return nil, errStore()
		}
		if !r.Swapped {
			giveSlot()
			continue
		}
		st, err := spawn.Start(contract.SpawnStartArgs{Argv: p.Argv, Cwd: p.Cwd, StdinBlob: stdin,
			TimeoutMs: p.TimeoutMs, MaxOutputBytes: p.MaxOutputBytes, Run: rec.Run})
		if err != nil {
			// Nothing ran (spawn.start refuses before the exec): the
			// id is not spent.
			if d, derr := store.CASDelete(recordKey(p.ProcessID), r.Revision); derr == nil && d.Swapped {
				giveSlot()
			}
			return nil, err
		}
		return &sdk.Result{Suspend: &sdk.Suspend{Handle: st.Handle,
			State: waitState{ProcessID: p.ProcessID, NodeID: nodeID, Run: st.Run, Rec: &rec, Rev: r.Revision}}}, nil
	}
}

// existing answers a run whose id has a record: another principal's is
// process_id_conflict; a tombstone answers its cancelled receipt; the
// same intent the receipt as it stands (running without waiting); another
// intent process_id_conflict. Nothing is ever executed again.
func existing(id, nodeID string, rec record, rev uint64, in, principal string) (*sdk.Result, error) {
	if rec.Principal != principal {
		return nil, errIDConflict()
	}
	if rec.Tombstone {
		return receipt(id, nodeID, unknownView(protocol.ProcessStateCancelled, nil))
	}
	if !hmac.Equal([]byte(rec.Intent), []byte(in)) {
		return nil, errIDConflict()
	}
	v, err := observe(id, rec, rev)
	if err != nil {
		return nil, err
	}
	return receipt(id, nodeID, v)
}

// finish is the resumed run (and cancel): the run ended; its own request
// gets its full output whatever the cache holds.
func finish(w waitState) (*sdk.Result, error) {
	x, err := spawn.Wait(w.Run)
	if err != nil {
		return nil, err
	}
	if x.State == contract.SpawnRunning {
		return &sdk.Result{Suspend: &sdk.Suspend{Handle: x.Handle, State: w}}, nil
	}
	exit := x.Exit
	if x.State != contract.SpawnExited {
		exit = nil
	}
	state, code := facts(exit)
	if w.Rec != nil && w.Rev != 0 && w.Rec.State == stateStarted && w.Rec.Run == w.Run {
		state, code = settle(w.ProcessID, *w.Rec, w.Rev, w.Run, exit)
	} else if rec, rev, found, err := load(w.ProcessID); err == nil && found {
		if rec.State == stateStarted {
			state, code = settle(w.ProcessID, rec, rev, w.Run, exit)
		} else if !rec.Tombstone {
			state, code = rec.State, rec.ExitCode
		}
	}
	return receipt(w.ProcessID, w.NodeID, outputs(state, code, exit))
}

// getReceipt is node.process.get: another principal's record reads as
// not_found.
func getReceipt(req *sdk.Request, id, nodeID string) (*sdk.Result, error) {
	principal, err := principalOf(req)
	if err != nil {
		return nil, err
	}
	rec, rev, found, err := load(id)
	if err != nil {
		return nil, err
	}
	if !found || rec.Principal != principal {
		return receipt(id, nodeID, unknownView(protocol.ProcessStateNotFound, nil))
	}
	v, err := observe(id, rec, rev)
	if err != nil {
		return nil, err
	}
	return receipt(id, nodeID, v)
}

// cancelRun is node.process.cancel: a run in progress of this principal
// and session generation gets its group's one signal and the request
// suspends until it is reaped; another principal's is process_not_owner;
// a terminal receipt answers as it is; an absent id gets a durable
// cancelled tombstone (at the retained limit: process_receipt_limit).
func cancelRun(req *sdk.Request, id, nodeID string) (*sdk.Result, error) {
	principal, err := principalOf(req)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(2 * startingGrace)
	for {
		rec, rev, found, err := load(id)
		if err != nil {
			return nil, err
		}
		if !found {
			if err := takeSlot(); err != nil {
				if rec, _, found, lerr := load(id); lerr == nil && found && rec.Principal == principal {
					continue
				}
				return nil, err
			}
			now := nowMs()
			tomb := record{V: 1, State: protocol.ProcessStateCancelled, Tombstone: true,
				Generation: req.Invocation.SessionGeneration, Principal: principal, AdmittedMs: now, EndedMs: now}
			r, err := store.CAS(recordKey(id), 0, encode(tomb))
			if err != nil {
				giveSlot()
				return nil, errStore()
			}
			if !r.Swapped {
				giveSlot()
				continue
			}
			return receipt(id, nodeID, unknownView(protocol.ProcessStateCancelled, nil))
		}
		if rec.Principal != principal {
			return nil, errNotOwner()
		}
		if rec.State != stateStarted {
			v, err := observe(id, rec, rev)
			if err != nil {
				return nil, err
			}
			return receipt(id, nodeID, v)
		}
		p, err := track(rec)
		if err != nil {
			return nil, err
		}
		switch p.state {
		case contract.SpawnStarting:
			// spawn.start is in flight in another instance.
			if time.Now().After(deadline) {
				return nil, protocol.DomainError(protocol.CodeUnavailable, protocol.DomainProcessReceiptLimit,
					"the run is still waiting to start; nothing was signalled").WithRetry(true, false)
			}
			time.Sleep(2 * time.Millisecond)
			continue
		case contract.SpawnExited:
			state, exit := settle(id, rec, rev, p.run, p.exit)
			return receipt(id, nodeID, outputs(state, exit, p.exit))
		case contract.SpawnUnknown:
			state, exit := settle(id, rec, rev, p.run, nil)
			return receipt(id, nodeID, unknownView(state, exit))
		}
		if rec.Generation != req.Invocation.SessionGeneration {
			return nil, errOtherGeneration()
		}
		if _, err := spawn.Signal(p.run); err != nil {
			return nil, err
		}
		return finish(waitState{ProcessID: id, NodeID: nodeID, Run: p.run})
	}
}
