package spawn

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"lemon/hostcalls/store"
	"lemon/protocol"
)

// Concurrent decisions about distinct ids share commits (group commit);
// the retained limit still counts every record written before it in the
// same transaction, so exactly the free ids are admitted, runs and
// tombstones alike, and no refused run executes.
func TestConcurrentAdmissionsAtRetainedLimit(t *testing.T) {
	const prefilled, runs, cancels = protocol.ProcessMaxRetained - 10, 14, 8
	f := newFixture(t, nil)
	err := f.s.ns.Update(func(tx *store.Tx) error {
		for i := 0; i < prefilled; i++ {
			rec := record{V: 1, State: protocol.ProcessStateCancelled, Tombstone: true}
			if err := tx.Put(fmt.Sprintf("%sold-%04d", recordPrefix, i), rec.encode()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	before := f.st.Stats()
	type outcome struct {
		id    string
		run   bool
		rc    Receipt
		err   error
		h     *Run
		state string
	}
	out := make([]outcome, runs+cancels)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			o := &out[i]
			if i < runs {
				o.id, o.run = fmt.Sprintf("run-%02d", i), true
				o.h, _, o.err = f.s.Start(context.Background(), req(o.id, "touch", fmt.Sprintf("run-%02d", i)))
				return
			}
			o.id = fmt.Sprintf("tomb-%02d", i)
			var wait <-chan struct{}
			o.rc, wait, o.err = f.s.Cancel(o.id, 0)
			if wait != nil {
				t.Errorf("%s: cancel of an absent id waits", o.id)
			}
		}()
	}
	close(start)
	wg.Wait()
	admitted := 0
	for _, o := range out {
		switch {
		case o.err == nil && o.run:
			rc, err := o.h.Result()
			if err != nil || rc.State != protocol.ProcessStateCompleted || exitOf(rc) != "0" {
				t.Fatalf("%s: %+v %v", o.id, rc, err)
			}
			if _, err := os.Stat(filepath.Join(f.root, o.id)); err != nil {
				t.Fatalf("%s admitted but did not run", o.id)
			}
			admitted++
		case o.err == nil:
			if o.rc.State != protocol.ProcessStateCancelled || o.rc.ExitCode != nil {
				t.Fatalf("%s: tombstone %+v", o.id, o.rc)
			}
			admitted++
		case domain(o.err) == "UNAVAILABLE/process_receipt_limit":
			if o.run {
				if _, err := os.Stat(filepath.Join(f.root, o.id)); err == nil {
					t.Fatalf("%s refused but ran", o.id)
				}
			}
			if rc, err := f.s.Get(o.id); err != nil || rc.State != protocol.ProcessStateNotFound {
				t.Fatalf("%s refused but left %+v %v", o.id, rc, err)
			}
		default:
			t.Fatalf("%s: %v", o.id, o.err)
		}
	}
	if admitted != protocol.ProcessMaxRetained-prefilled {
		t.Fatalf("admitted %d ids at %d retained, want %d", admitted, prefilled, protocol.ProcessMaxRetained-prefilled)
	}
	f.s.ns.View(func(tx *store.Tx) error {
		if n := tx.Count(recordPrefix); n != protocol.ProcessMaxRetained {
			t.Errorf("%d records, want %d", n, protocol.ProcessMaxRetained)
		}
		return nil
	})
	st := f.st.Stats()
	t.Logf("%d writes in %d commits", st.Writes-before.Writes, st.Commits-before.Commits)
}

// Concurrent starts of distinct ids, some of which fail after passing the
// active-run check (no such command; an exec the OS refuses after the
// running record was committed), start every valid run: an admission in
// flight is waited for, never counted, so no run is refused while fewer
// than 16 are active. The 17th valid run is then refused.
func TestConcurrentAdmissionsAtActiveLimit(t *testing.T) {
	f := newFixture(t, nil)
	garbage := filepath.Join(f.root, "garbage")
	os.WriteFile(garbage, []byte("\x00\x01\x02 not a program"), 0o700)
	type try struct {
		argv []string
		want string // "" : started
	}
	var tries []try
	for i := 0; i < protocol.ProcessMaxActive; i++ {
		tries = append(tries, try{argv: []string{"sleep", "30"}})
		if i%4 == 0 {
			tries = append(tries, try{[]string{"lemon-no-such-command"}, "NOT_FOUND/executable_not_found"},
				try{[]string{garbage}, "INVALID_PARAMS/exec_format_error"})
		}
	}
	hs := make([]*Run, len(tries))
	errs := make([]error, len(tries))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			hs[i], _, errs[i] = f.s.Start(context.Background(), req(fmt.Sprintf("act-%02d", i), tries[i].argv...))
		}()
	}
	close(start)
	wg.Wait()
	defer func() {
		for i, h := range hs {
			if h != nil {
				f.s.Cancel(fmt.Sprintf("act-%02d", i), 0)
				<-h.Done()
			}
		}
	}()
	for i, tr := range tries {
		// A failing one may also meet 16 active runs first: the limit is
		// checked before the command.
		got := domain(errs[i])
		if (tr.want == "" && errs[i] != nil) || (tr.want != "" && got != tr.want && got != "UNAVAILABLE/process_receipt_limit") {
			t.Errorf("act-%02d: %s, want %q", i, got, tr.want)
		}
		if tr.want != "" {
			if rc, _ := f.s.Get(fmt.Sprintf("act-%02d", i)); rc.State != protocol.ProcessStateNotFound {
				t.Errorf("failed act-%02d left %+v", i, rc)
			}
		}
	}
	if _, _, err := f.s.Start(context.Background(), req("act-17th", "true")); domain(err) != "UNAVAILABLE/process_receipt_limit" {
		t.Fatalf("17th active run: %v", err)
	}
}

// Many runs and cancels of one id race with each other and with admissions
// of other ids (so their commits are shared): exactly one outcome wins.
// Either a tombstone was written first, and nothing ever ran under the id,
// or exactly one run was admitted and executed at most once.
func TestRunCancelRaceUnderGroupCommit(t *testing.T) {
	const rounds, racers, others = 10, 4, 6
	f := newFixture(t, nil)
	for round := 0; round < rounds; round++ {
		id := fmt.Sprintf("one-%d", round)
		marks := filepath.Join(f.root, id)
		// Every execution appends a line, so a second execution shows.
		r := req(id, "sh", "-c", `echo x >> "$0"`, marks)
		var (
			mu                 sync.Mutex
			handles, tombReply int
			runReplies         []Receipt
			hs                 []*Run
		)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := 0; i < racers; i++ {
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-start
				h, existing, err := f.s.Start(context.Background(), r)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Errorf("%s run: %v", id, err)
				case h != nil:
					handles++
					hs = append(hs, h)
				default:
					runReplies = append(runReplies, *existing)
				}
			}()
			go func() {
				defer wg.Done()
				<-start
				rc, wait, err := f.s.Cancel(id, 0)
				if wait != nil {
					<-wait
					return
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Errorf("%s cancel: %v", id, err)
				case rc.State == protocol.ProcessStateCancelled && rc.ExitCode == nil:
					tombReply++ // only a tombstone answers cancelled without an exit
				}
			}()
		}
		for i := 0; i < others; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, err := f.run(req(fmt.Sprintf("other-%d-%d", round, i), "true")); err != nil {
					t.Errorf("other run: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		for _, h := range hs {
			<-h.Done()
		}
		b, _ := os.ReadFile(marks)
		executions := len(b) / 2
		final, err := f.s.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case handles > 1:
			t.Fatalf("%s: %d runs admitted", id, handles)
		case handles == 1 && tombReply > 0:
			t.Fatalf("%s: a run was admitted and a tombstone answered", id)
		case handles == 0 && tombReply == 0:
			t.Fatalf("%s: neither a run nor a tombstone won", id)
		case tombReply > 0:
			if executions != 0 || final.State != protocol.ProcessStateCancelled || final.ExitCode != nil {
				t.Fatalf("%s: tombstoned, yet executions=%d final=%+v", id, executions, final)
			}
			for _, rc := range runReplies {
				if rc.State != protocol.ProcessStateCancelled || rc.ExitCode != nil {
					t.Fatalf("%s: tombstoned, run answered %+v", id, rc)
				}
			}
		default: // the run won
			if executions > 1 {
				t.Fatalf("%s: executed %d times", id, executions)
			}
			// Completed, or cancelled with the observed exit (a kill may land
			// before or after the echo, or on the exited group).
			switch {
			case final.ExitCode == nil,
				final.State == protocol.ProcessStateCompleted && (executions != 1 || *final.ExitCode != 0),
				final.State != protocol.ProcessStateCompleted && final.State != protocol.ProcessStateCancelled:
				t.Fatalf("%s: final %+v after %d executions", id, final, executions)
			}
			for _, rc := range runReplies {
				if rc.State == protocol.ProcessStateNotFound || (rc.State == protocol.ProcessStateCancelled && rc.ExitCode == nil) {
					t.Fatalf("%s: run admitted, another run answered %+v", id, rc)
				}
			}
		}
	}
}

// Close waits for admissions in flight: every run that Start handed out is
// final when Close returns, and later starts are refused.
func TestCloseWaitsForAdmissionsInFlight(t *testing.T) {
	f := newFixture(t, nil)
	const n = 8
	hs := make([]*Run, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hs[i], _, _ = f.s.Start(context.Background(), req(fmt.Sprintf("close-%d", i), "sleep", "30"))
		}()
	}
	f.s.Close()
	wg.Wait()
	for i, h := range hs {
		if h == nil {
			continue
		}
		select {
		case <-h.Done():
		default:
			t.Fatalf("close-%d still running after Close", i)
		}
	}
	if _, _, err := f.s.Start(context.Background(), req("late", "true")); domain(err) != "UNAVAILABLE/process_store_unavailable" {
		t.Fatalf("start after Close: %v", err)
	}
}
