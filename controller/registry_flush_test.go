package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"lemon/protocol"
)

// flushFixture is a registry on a durable store in a temporary directory,
// without a Server's janitor (so no flush runs unless the test calls it),
// holding paired nodes that are connected through placeholder conns.
type flushFixture struct {
	t      *testing.T
	dir    string
	clock  *testClock
	s      *Server
	r      *registry
	ids    []string
	tokens []string
	conns  map[string]*conn
}

// open opens the store in f.dir and loads a registry from it.
func (f *flushFixture) open() {
	f.t.Helper()
	auth, err := newAuthenticator(nil, nil, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	cfg := Config{MaxPayload: protocol.DefaultMaxPayload, SessionTTL: protocol.SessionTTL, StateDir: f.dir}
	f.s = &Server{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: f.clock.Now, auth: auth}
	st, err := openStore(f.dir)
	if err != nil {
		f.t.Fatal(err)
	}
	f.r, err = newRegistry(f.s, st)
	if err != nil {
		st.close()
		f.t.Fatal(err)
	}
	f.s.reg, f.s.store = f.r, st
	f.conns = map[string]*conn{}
}

func (f *flushFixture) close() {
	f.t.Helper()
	if err := f.r.st.close(); err != nil {
		f.t.Fatal(err)
	}
}

func newFlushFixture(t *testing.T, n int) *flushFixture {
	t.Helper()
	f := &flushFixture{t: t, dir: t.TempDir(), clock: &testClock{t: time.UnixMilli(1_800_000_000_000)}}
	f.ids, f.tokens = seedPaired(t, f.dir, f.clock.Now(), n)
	f.open()
	t.Cleanup(func() { f.r.st.close() })
	return f
}

// connect authenticates node i with its session token and attaches a
// placeholder conn advertising methods (marks its record dirty).
func (f *flushFixture) connect(i int, methods map[string]int) *conn {
	f.t.Helper()
	c, err := f.tryConnect(i, methods)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func (f *flushFixture) tryConnect(i int, methods map[string]int) (*conn, error) {
	adv := &protocol.NodeAdvertise{NodeID: f.ids[i], Methods: methods}
	a, perr := f.r.authenticateNode(f.tokens[i], adv)
	if perr != nil {
		return nil, fmt.Errorf("authenticate %s: %s %s", f.ids[i], perr.Code, perr.DomainCode())
	}
	c := &conn{peerMax: protocol.DefaultMaxPayload}
	if _, perr := f.r.attach(a, c, adv, protocol.ConnectClient{ID: "flush-test"}, func() {}); perr != nil {
		return nil, fmt.Errorf("attach %s: %s", f.ids[i], perr.Code)
	}
	f.conns[f.ids[i]] = c
	return c, nil
}

// stored reads node records straight from the store.
func (f *flushFixture) stored() map[string]nodeRecord {
	f.t.Helper()
	out := map[string]nodeRecord{}
	err := f.r.st.load(bucketNodes, func(k string, v []byte) error {
		var rec nodeRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return err
		}
		out[k] = rec
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// blockSnapshotWrites makes every snapshot write wait at its start until
// release is called (a slow disk); entered receives once per write.
func (f *flushFixture) blockSnapshotWrites() (entered <-chan struct{}, release func()) {
	in := make(chan struct{}, 8)
	gate := make(chan struct{})
	var once sync.Once
	f.r.st.testHookSnapshotWrite = func() error {
		in <- struct{}{}
		<-gate
		return nil
	}
	return in, func() { once.Do(func() { close(gate) }) }
}

func waitOrFail(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(testWait): // hang guard only
		t.Fatalf("%s blocked while a flush was writing", what)
	}
}

// TestFlushDoesNotBlockRegistry: while a flush is stuck in its store write
// (a slow disk), the registry still authenticates, attaches, detaches,
// pins, lists and describes nodes; a change made meanwhile is marked dirty
// again and written by the next flush. Every record ends up on disk with
// the values of the last change.
func TestFlushDoesNotBlockRegistry(t *testing.T) {
	f := newFlushFixture(t, 3)
	methods := map[string]int{mEcho: 1}
	for i := range f.ids {
		f.connect(i, methods)
	}
	connectedMs := f.clock.Now().UnixMilli()
	if len(f.r.dirty) != 3 {
		t.Fatalf("%d dirty records after 3 connects", len(f.r.dirty))
	}
	entered, release := f.blockSnapshotWrites()
	defer release()
	flushed := make(chan struct{})
	go func() { defer close(flushed); f.r.flush() }()
	<-entered

	// The flush holds its snapshot; the registry lock is free.
	f.clock.Add(5 * time.Second)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if l := f.r.list(); len(l.Nodes) != 3 || !l.Nodes[0].Online || l.Nodes[0].Name != "alpha-0" {
			t.Errorf("list during flush: %+v", l.Nodes)
		}
		d, perr := f.r.describe(f.ids[1])
		if perr != nil || d.Methods[mEcho] != 1 || d.LastSeenAtMs != connectedMs || d.Client == nil || d.Client.ID != "flush-test" {
			t.Errorf("describe during flush: %+v %v", d, perr)
		}
		c, gen, perr := f.r.pin(f.ids[2], protocol.MethodSpec{Name: mEcho, Version: 1})
		if perr != nil || c != f.conns[f.ids[2]] || gen != 1 {
			t.Errorf("pin during flush: gen %d, %v", gen, perr)
		}
		// Node 0 disconnects; node 1 reconnects with another advertise.
		f.r.detach(f.r.nodes[f.ids[0]], f.conns[f.ids[0]])
		if _, err := f.tryConnect(1, map[string]int{mEcho: 1, mSlow: 1}); err != nil {
			t.Error(err)
		}
	}()
	waitOrFail(t, done, "the registry")
	if t.Failed() {
		t.FailNow()
	}
	f.r.mu.Lock()
	dirty := len(f.r.dirty)
	f.r.mu.Unlock()
	if dirty != 2 {
		t.Fatalf("%d records dirty after changes during the flush, want 2", dirty)
	}
	release()
	<-flushed

	// The first flush wrote its snapshot: every node as connected.
	got := f.stored()
	for _, id := range f.ids {
		if rec := got[id]; rec.LastSeenAtMs != connectedMs || rec.Methods[mEcho] != 1 || rec.Methods[mSlow] != 0 {
			t.Fatalf("after the first flush %s: lastSeen %d methods %v", id, rec.LastSeenAtMs, rec.Methods)
		}
	}
	// The next flush writes the changes made meanwhile.
	f.r.st.testHookSnapshotWrite = nil
	f.r.flush()
	later := f.clock.Now().UnixMilli()
	got = f.stored()
	if rec := got[f.ids[0]]; rec.LastSeenAtMs != later {
		t.Fatalf("disconnected node: lastSeen %d, want %d", rec.LastSeenAtMs, later)
	}
	if rec := got[f.ids[1]]; rec.LastSeenAtMs != later || rec.Methods[mSlow] != 1 {
		t.Fatalf("reconnected node: lastSeen %d methods %v", rec.LastSeenAtMs, rec.Methods)
	}
	if rec := got[f.ids[2]]; rec.LastSeenAtMs != connectedMs {
		t.Fatalf("unchanged node: lastSeen %d, want %d", rec.LastSeenAtMs, connectedMs)
	}
	if len(f.r.dirty) != 0 {
		t.Fatalf("%d records still dirty", len(f.r.dirty))
	}
}

// TestFlushNeverOverwritesNewerRecord: a rename (an immediate write) that
// commits after a flush took its snapshot is kept: the older snapshot does
// not bring the old name back, on disk or after a restart. After the
// restart, flushes still write (stamps continue above the stored ones).
func TestFlushNeverOverwritesNewerRecord(t *testing.T) {
	f := newFlushFixture(t, 2)
	methods := map[string]int{mEcho: 1}
	f.connect(0, methods)
	f.connect(1, methods)
	connectedMs := f.clock.Now().UnixMilli()
	entered, release := f.blockSnapshotWrites()
	defer release()
	flushed := make(chan struct{})
	go func() { defer close(flushed); f.r.flush() }()
	<-entered // the snapshot holds the name alpha-0

	renamed := make(chan struct{})
	go func() {
		defer close(renamed)
		res, perr := f.r.rename(protocol.NodeRenameParams{NodeID: f.ids[0], Name: "beta"})
		if perr != nil || res.Name != "beta" {
			t.Errorf("rename during flush: %+v %v", res, perr)
		}
	}()
	waitOrFail(t, renamed, "node.rename")
	if got := f.stored()[f.ids[0]]; got.Name != "beta" {
		t.Fatalf("the rename was not written immediately: stored name %q", got.Name)
	}
	release()
	<-flushed
	got := f.stored()
	if got[f.ids[0]].Name != "beta" || got[f.ids[0]].LastSeenAtMs != connectedMs {
		t.Fatalf("renamed node on disk: %q lastSeen %d", got[f.ids[0]].Name, got[f.ids[0]].LastSeenAtMs)
	}
	if got[f.ids[1]].Name != "alpha-1" || got[f.ids[1]].LastSeenAtMs != connectedMs || got[f.ids[1]].Methods[mEcho] != 1 {
		t.Fatalf("other node on disk: %+v", got[f.ids[1]])
	}

	// Restart: the name survives, and a flush after the restart writes.
	f.close()
	f.open()
	if d, perr := f.r.describe(f.ids[0]); perr != nil || d.Name != "beta" {
		t.Fatalf("after restart: %+v %v", d, perr)
	}
	f.clock.Add(time.Minute)
	f.connect(0, map[string]int{mEcho: 1, mSlow: 1})
	f.r.flush()
	if rec := f.stored()[f.ids[0]]; rec.Name != "beta" || rec.LastSeenAtMs != f.clock.Now().UnixMilli() || rec.Methods[mSlow] != 1 {
		t.Fatalf("flush after restart: %q lastSeen %d methods %v", rec.Name, rec.LastSeenAtMs, rec.Methods)
	}
}

// TestFlushFailureKeepsDirty: a failed snapshot write leaves its records
// dirty, so the next flush writes them; a record the store does not hold
// is never created by a flush.
func TestFlushFailureKeepsDirty(t *testing.T) {
	f := newFlushFixture(t, 1)
	f.connect(0, map[string]int{mEcho: 1})
	f.r.st.testHookSnapshotWrite = func() error { return errors.New("disk full") }
	f.r.flush()
	if !f.r.dirty[f.ids[0]] {
		t.Fatal("a failed flush dropped the dirty mark")
	}
	if rec := f.stored()[f.ids[0]]; rec.LastSeenAtMs != 0 {
		t.Fatalf("a failed flush wrote lastSeen %d", rec.LastSeenAtMs)
	}
	f.r.st.testHookSnapshotWrite = nil
	// A node only in memory (no stored copy) is not written by a flush.
	ghost := "node-" + fmt.Sprintf("%032x", 999)
	f.r.mu.Lock()
	f.r.nodes[ghost] = &nodeEntry{rec: nodeRecord{ID: ghost, Name: "ghost", Identity: protocol.NodeIdentityPaired}}
	f.r.dirty[ghost] = true
	f.r.mu.Unlock()
	f.r.flush()
	got := f.stored()
	if rec := got[f.ids[0]]; rec.LastSeenAtMs != f.clock.Now().UnixMilli() {
		t.Fatalf("the retry wrote lastSeen %d", rec.LastSeenAtMs)
	}
	if _, ok := got[ghost]; ok {
		t.Fatal("a flush created a node record")
	}
}

// TestStoreApplyStampsNodeRecords: immediate writes stamp node records
// with increasing WriteSeq values (value and pointer forms), leave the
// caller's ops untouched, and a reopened store continues above them.
func TestStoreApplyStampsNodeRecords(t *testing.T) {
	dir := t.TempDir()
	st, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	ptr := &nodeRecord{ID: "node-b", Name: "b"}
	ops := []op{{bucketNodes, "node-a", nodeRecord{ID: "node-a", Name: "a"}}, {bucketNodes, "node-b", ptr},
		{bucketSessions, "s", sessionRecord{NodeID: "node-a"}}}
	if err := st.apply(ops...); err != nil {
		t.Fatal(err)
	}
	if ops[0].value.(nodeRecord).WriteSeq != 0 || ptr.WriteSeq != 0 {
		t.Fatal("apply changed the caller's records")
	}
	seqs := map[string]uint64{}
	st.load(bucketNodes, func(k string, v []byte) error {
		var rec nodeRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			t.Fatal(err)
		}
		seqs[k] = rec.WriteSeq
		return nil
	})
	if seqs["node-a"] != 1 || seqs["node-b"] != 2 {
		t.Fatalf("stamps %v, want node-a 1, node-b 2", seqs)
	}
	st.close()
	st2, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.close()
	st2.observeSeq(2)
	st2.observeSeq(1)
	if n := st2.nextSeq(); n != 3 {
		t.Fatalf("next stamp after observing 2: %d", n)
	}
}
