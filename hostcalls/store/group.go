package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// maxGroup bounds the calls one group transaction carries (bbolt's own
// DefaultMaxBatchSize), so one commit never grows without bound.
const maxGroup = 1000

// group is the group commit of one Store: concurrent Namespace.Batch calls
// share one bbolt read-write transaction, hence one commit and its
// fdatasyncs.
//
// There is no timer. A call that finds no commit in progress commits at
// once, alone; calls that arrive while a commit is in progress queue, and
// when it ends the first of them leads the next commit for the whole queue.
// So a lone writer pays no added latency, and under load each commit
// carries everyone who arrived during the previous one. (bbolt's DB.Batch
// instead waits MaxBatchDelay, 10 ms by default, before every batch; see
// docs/PROCESS.md "Durability and group commit".)
type group struct {
	db    *bolt.DB
	mu    sync.Mutex
	busy  bool // a leader is committing or about to
	queue []*groupCall

	commits, writes atomic.Uint64 // Store.Stats
}

type groupCall struct {
	fn   func(*bolt.Tx) error
	res  chan error    // the call's outcome, buffered
	lead chan struct{} // closed when this queued call must lead the next commit
}

// errSolo tells a call that its function failed inside a group and must
// run again in a transaction of its own.
var errSolo = errors.New("store: run solo")

// do runs fn in a group transaction and returns after that transaction
// committed (fsync) or failed. fn may run more than once.
func (g *group) do(fn func(*bolt.Tx) error) error {
	c := &groupCall{fn: fn, res: make(chan error, 1), lead: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if g.busy {
		g.mu.Unlock()
		select {
		case err := <-c.res:
			return g.finish(c, err)
		case <-c.lead:
		}
		g.mu.Lock()
	}
	g.busy = true
	n := len(g.queue)
	if n > maxGroup {
		n = maxGroup
	}
	calls := append([]*groupCall(nil), g.queue[:n]...)
	g.queue = append(g.queue[:0:0], g.queue[n:]...)
	g.mu.Unlock()

	g.commit(calls)

	g.mu.Lock()
	if len(g.queue) > 0 {
		close(g.queue[0].lead) // hand over: it leads the next commit
	} else {
		g.busy = false
	}
	g.mu.Unlock()
	return g.finish(c, <-c.res)
}

// finish re-runs a call whose function failed inside a group on its own,
// so its error (or success) is decided against committed state only.
func (g *group) finish(c *groupCall, err error) error {
	if err == errSolo {
		err = g.db.Update(c.fn)
		if err == nil {
			g.commits.Add(1)
			g.writes.Add(1)
		}
	}
	return err
}

// commit runs calls in one transaction, in arrival order. If one function
// fails, the transaction is rolled back, that call is told to run solo, and
// the rest run again in a fresh transaction (like bbolt's DB.Batch). The
// commit's own outcome (nil or a bbolt error) goes to every remaining call.
func (g *group) commit(calls []*groupCall) {
	for len(calls) > 0 {
		failed := -1
		err := g.db.Update(func(tx *bolt.Tx) error {
			for i, c := range calls {
				if err := safely(c.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed >= 0 {
			calls[failed].res <- errSolo
			calls = append(calls[:failed:failed], calls[failed+1:]...)
			continue
		}
		if err == nil {
			g.commits.Add(1)
			g.writes.Add(uint64(len(calls)))
		}
		for _, c := range calls {
			c.res <- err
		}
		return
	}
}

// safely calls fn, turning a panic into an error so one caller's panic
// never takes the leader's goroutine and the other callers down with it;
// the failing call then runs solo and panics in its own goroutine.
func safely(fn func(*bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("store: batch function panicked: %v", p)
		}
	}()
	return fn(tx)
}
