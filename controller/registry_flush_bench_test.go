package controller

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"lemon/protocol"
)

// seedPaired writes n paired node records and their sessions straight to
// the store in dir, as a controller that paired them would have.
func seedPaired(t testing.TB, dir string, now time.Time, n int) (ids, tokens []string) {
	t.Helper()
	st, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	var ops []op
	for i := range n {
		id := fmt.Sprintf("node-%032x", i+1)
		tok := newSecret("lns_")
		ids, tokens = append(ids, id), append(tokens, tok)
		ops = append(ops,
			op{bucketNodes, id, nodeRecord{ID: id, Name: fmt.Sprintf("alpha-%d", i), Identity: protocol.NodeIdentityPaired,
				CreatedAtMs: now.UnixMilli(), Generation: 1, RecoveryHash: hashHex(newSecret("lnr_"))}},
			op{bucketSessions, hashHex(tok), sessionRecord{NodeID: id, Generation: 1, IssuedAtMs: now.UnixMilli(),
				ExpiresAtMs: now.UnixMilli() + protocol.SessionTTL.Milliseconds()}})
	}
	if err := st.apply(ops...); err != nil {
		t.Fatal(err)
	}
	return ids, tokens
}

// BenchmarkFlushRegistryWait measures what a flush of 1,000 dirty node
// records (one fsync'd transaction in a temporary directory) costs the
// rest of the registry: while it runs, one goroutine calls describe in a
// loop. Reported: the flush's mean duration and the longest single
// describe call during any flush (lock wait plus scheduling on a busy
// machine), in milliseconds; per flush, the time spent in describe calls
// slower than 1 ms (stalled-ms/flush) and the number of describe calls
// that completed while it ran.
func BenchmarkFlushRegistryWait(b *testing.B) {
	const nodes = 1000
	dir := b.TempDir()
	now := time.UnixMilli(1_800_000_000_000)
	ids, _ := seedPaired(b, dir, now, nodes)
	auth, err := newAuthenticator(nil, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	s := &Server{cfg: Config{MaxPayload: protocol.DefaultMaxPayload, SessionTTL: protocol.SessionTTL, StateDir: dir},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now, auth: auth}
	st, err := openStore(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer st.close()
	r, err := newRegistry(s, st)
	if err != nil {
		b.Fatal(err)
	}
	methods := map[string]int{mEcho: 1, mSlow: 1}
	var flushTotal, waitMax, stalled time.Duration
	calls := 0
	for i := 0; i < b.N; i++ {
		r.mu.Lock()
		for _, id := range ids {
			e := r.nodes[id]
			e.rec.LastSeenAtMs = now.UnixMilli() + int64(i)
			e.rec.Methods = methods
			e.rec.Client = &protocol.ConnectClient{ID: "bench", Version: "1"}
			r.dirty[id] = true
		}
		r.mu.Unlock()
		done := make(chan time.Duration)
		go func() {
			start := time.Now()
			r.flush()
			done <- time.Since(start)
		}()
		for j := 0; ; j++ {
			select {
			case d := <-done:
				flushTotal += d
			default:
				start := time.Now()
				if _, perr := r.describe(ids[j%nodes]); perr != nil {
					b.Fatal(perr.Message)
				}
				d := time.Since(start)
				waitMax = max(waitMax, d)
				if d > time.Millisecond {
					stalled += d
				}
				calls++
				continue
			}
			break
		}
	}
	b.ReportMetric(float64(flushTotal.Microseconds())/1000/float64(b.N), "flush-ms")
	b.ReportMetric(float64(waitMax.Microseconds())/1000, "max-describe-ms")
	b.ReportMetric(float64(stalled.Microseconds())/1000/float64(b.N), "stalled-ms/flush")
	b.ReportMetric(float64(calls)/float64(b.N), "describes/flush")
	b.ReportMetric(0, "ns/op")
}
