package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// holdLeader starts one Batch whose function blocks inside the group
// transaction until release is closed, and returns once it is blocked: every
// Batch called meanwhile queues behind it.
func holdLeader(t *testing.T, ns *Namespace, key string) (release chan struct{}, done chan error) {
	t.Helper()
	entered := make(chan struct{})
	release = make(chan struct{})
	done = make(chan error, 1)
	var once sync.Once
	go func() {
		done <- ns.Batch(func(tx *Tx) error {
			once.Do(func() { close(entered) })
			<-release
			return tx.Put(key, []byte("leader"))
		})
	}()
	<-entered
	return release, done
}

// waitQueued waits (without a timeout: the test runner's deadline bounds
// it) until n calls are queued behind the running commit.
func waitQueued(s *Store, n int) {
	for {
		s.group.mu.Lock()
		q := len(s.group.queue)
		s.group.mu.Unlock()
		if q >= n {
			return
		}
		runtime.Gosched()
	}
}

func TestBatchSharesOneCommitAndIsDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.db")
	s := open(t, path, 0)
	ns, _ := s.Namespace("spawn")
	before := s.Stats()
	release, leaderDone := holdLeader(t, ns, "k/leader")
	const n = 63
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = ns.Batch(func(tx *Tx) error { return tx.Put(fmt.Sprintf("k/%02d", i), []byte("v")) })
		}()
	}
	waitQueued(s, n)
	close(release)
	wg.Wait()
	if err := <-leaderDone; err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	// The leader committed alone; the 63 queued calls shared the next commit.
	got := s.Stats()
	if c, w := got.Commits-before.Commits, got.Writes-before.Writes; c != 2 || w != n+1 {
		t.Fatalf("commits %d writes %d, want 2 and %d", c, w, n+1)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, 0)
	defer s.Close()
	ns, _ = s.Namespace("spawn")
	ns.View(func(tx *Tx) error {
		if c := tx.Count("k/"); c != n+1 {
			t.Errorf("after reopen %d keys, want %d", c, n+1)
		}
		return nil
	})
}

// A check-and-write in a group counts the writes of the calls before it,
// so a limit holds exactly when concurrent calls share one transaction.
func TestBatchCheckSeesEarlierCallsOfTheGroup(t *testing.T) {
	const limit, prefilled, callers = 1000, 990, 20
	s := open(t, filepath.Join(t.TempDir(), "node.db"), 0)
	defer s.Close()
	ns, _ := s.Namespace("spawn")
	ns.Update(func(tx *Tx) error {
		for i := 0; i < prefilled-1; i++ { // the leader adds one more
			tx.Put(fmt.Sprintf("r/old%04d", i), nil)
		}
		return nil
	})
	release, leaderDone := holdLeader(t, ns, "r/leader")
	var admitted, refused atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			full := false
			err := ns.Batch(func(tx *Tx) error {
				full = false
				if tx.Count("r/") >= limit {
					full = true
					return nil
				}
				return tx.Put(fmt.Sprintf("r/new%02d", i), nil)
			})
			switch {
			case err != nil:
				t.Error(err)
			case full:
				refused.Add(1)
			default:
				admitted.Add(1)
			}
		}()
	}
	waitQueued(s, callers)
	close(release)
	wg.Wait()
	<-leaderDone
	if a, r := admitted.Load(), refused.Load(); a != limit-prefilled || r != callers-(limit-prefilled) {
		t.Fatalf("admitted %d refused %d, want %d and %d", a, r, limit-prefilled, callers-(limit-prefilled))
	}
	ns.View(func(tx *Tx) error {
		if c := tx.Count("r/"); c != limit {
			t.Errorf("%d records, want %d", c, limit)
		}
		return nil
	})
}

// A failing function costs the group a rollback: the others run again and
// commit; the failing one runs solo, and only its solo outcome counts.
func TestBatchFailingCallRunsSolo(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "node.db"), 0)
	defer s.Close()
	ns, _ := s.Namespace("spawn")
	release, leaderDone := holdLeader(t, ns, "k/leader")
	errRefused := errors.New("refused")
	var okRuns, badRuns atomic.Int32
	results := make(chan error, 3)
	go func() {
		results <- ns.Batch(func(tx *Tx) error { okRuns.Add(1); return tx.Put("k/ok1", []byte("1")) })
	}()
	waitQueued(s, 1)
	go func() {
		results <- ns.Batch(func(tx *Tx) error {
			badRuns.Add(1)
			tx.Put("k/bad", []byte("x"))
			return errRefused
		})
	}()
	waitQueued(s, 2)
	go func() {
		results <- ns.Batch(func(tx *Tx) error { return tx.Put("k/ok2", []byte("2")) })
	}()
	waitQueued(s, 3)
	close(release)
	var gotRefused, gotNil int
	for i := 0; i < 3; i++ {
		switch err := <-results; {
		case errors.Is(err, errRefused):
			gotRefused++
		case err == nil:
			gotNil++
		default:
			t.Fatalf("unexpected %v", err)
		}
	}
	<-leaderDone
	if gotRefused != 1 || gotNil != 2 {
		t.Fatalf("refused %d ok %d", gotRefused, gotNil)
	}
	// ok1 ran in the group, then again after the rollback; bad ran in the
	// group and solo.
	if okRuns.Load() != 2 || badRuns.Load() != 2 {
		t.Fatalf("ok1 ran %d times, bad %d", okRuns.Load(), badRuns.Load())
	}
	ns.View(func(tx *Tx) error {
		for k, want := range map[string]bool{"k/ok1": true, "k/ok2": true, "k/leader": true, "k/bad": false} {
			if _, ok := tx.Get(k); ok != want {
				t.Errorf("%s present=%v", k, ok)
			}
		}
		return nil
	})
}

// A panic stays in the panicking caller's goroutine; the rest commit.
func TestBatchPanicStaysWithItsCaller(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "node.db"), 0)
	defer s.Close()
	ns, _ := s.Namespace("spawn")
	release, leaderDone := holdLeader(t, ns, "k/leader")
	panicked := make(chan any, 1)
	okErr := make(chan error, 1)
	go func() {
		defer func() { panicked <- recover() }()
		ns.Batch(func(tx *Tx) error { panic("boom") })
	}()
	waitQueued(s, 1)
	go func() { okErr <- ns.Batch(func(tx *Tx) error { return tx.Put("k/ok", nil) }) }()
	waitQueued(s, 2)
	close(release)
	if p := <-panicked; p != "boom" {
		t.Fatalf("recovered %v", p)
	}
	if err := <-okErr; err != nil {
		t.Fatal(err)
	}
	if err := <-leaderDone; err != nil {
		t.Fatal(err)
	}
}

func TestBatchOnClosedStoreIsUnavailable(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "node.db"), 0)
	ns, _ := s.Namespace("spawn")
	s.Close()
	if err := ns.Batch(func(tx *Tx) error { return tx.Put("k", nil) }); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("%v", err)
	}
}
