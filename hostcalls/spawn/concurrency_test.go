package spawn

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// Close waits for admissions in flight: every run that Start handed out is
// final when Close returns, and later starts are refused.
func TestCloseWaitsForAdmissionsInFlight(t *testing.T) {
	f := newFixture(t, nil)
	const n = 8
	hs := make([]*testRun, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hs[i], _, _ = f.start(context.Background(), req(fmt.Sprintf("close-%d", i), "sleep", "30"))
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
	if _, _, err := f.start(context.Background(), req("late", "true")); domain(err) != "UNAVAILABLE/process_store_unavailable" {
		t.Fatalf("start after Close: %v", err)
	}
}
