package host_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"lemon/host"
	"lemon/protocol"
)

func (f *fixture) counts() (pings, writes int) {
	f.tt.mu.Lock()
	defer f.tt.mu.Unlock()
	return f.tt.pings, f.tt.writes
}

func flags(t *testing.T, what string, perr *protocol.Error) (retrySafe, mayHaveApplied bool) {
	t.Helper()
	if perr == nil || perr.Details == nil || perr.Details.RetrySafe == nil || perr.Details.MutationMayHaveApplied == nil {
		t.Fatalf("%s: %v, want an error with both outcome flags", what, perr)
	}
	return *perr.Details.RetrySafe, *perr.Details.MutationMayHaveApplied
}

// A rate limit is charged until the invocation's first effect, never
// after: test.writeping (an effect, then a second host call, the shape of
// node.process.run) completes with the only token, and the next one is
// refused before its effect, truthfully saying nothing was done.
func TestRateLimitStopsAtFirstEffect(t *testing.T) {
	f := newFixture(t, host.Config{RateRules: []host.RateRule{{Module: "testmod", PerSecond: 0.001, Burst: 1}}})
	if _, perr := f.invoke(t, "test.writeping", `{}`); perr != nil {
		t.Fatalf("first writeping: %v (the host call after the effect must not be refused)", perr)
	}
	if p, w := f.counts(); p != 1 || w != 1 {
		t.Fatalf("after the first writeping: pings %d writes %d, want 1 1", p, w)
	}
	_, perr := f.invoke(t, "test.writeping", `{}`)
	if perr == nil || perr.Code != protocol.CodeRateLimited {
		t.Fatalf("second writeping: %v, want RATE_LIMITED", perr)
	}
	if retry, applied := flags(t, "second writeping", perr); !retry || applied {
		t.Fatalf("refused before any effect: retrySafe %v mutationMayHaveApplied %v, want true false", retry, applied)
	}
	if p, w := f.counts(); p != 1 || w != 1 {
		t.Fatalf("a refused invocation did something: pings %d writes %d", p, w)
	}
}

// After the first effect a further effect is still charged: with one
// token, test.writewrite's second write is refused, and the refusal says
// the first write stands (retrySafe:false, mutationMayHaveApplied:true).
func TestRateLimitAfterEffectIsTruthful(t *testing.T) {
	f := newFixture(t, host.Config{RateRules: []host.RateRule{{Module: "testmod", PerSecond: 0.001, Burst: 1}}})
	_, perr := f.invoke(t, "test.writewrite", `{}`)
	if perr == nil || perr.Code != protocol.CodeRateLimited {
		t.Fatalf("writewrite with one token: %v, want RATE_LIMITED", perr)
	}
	if retry, applied := flags(t, "writewrite", perr); retry || !applied {
		t.Fatalf("refused after an effect: retrySafe %v mutationMayHaveApplied %v, want false true", retry, applied)
	}
	if _, w := f.counts(); w != 1 {
		t.Fatalf("writes %d, want 1 (the first write ran, the second was refused)", w)
	}
	g := newFixture(t, host.Config{RateRules: []host.RateRule{{Module: "testmod", PerSecond: 0.001, Burst: 2}}})
	if _, perr := g.invoke(t, "test.writewrite", `{}`); perr != nil {
		t.Fatalf("writewrite with two tokens: %v", perr)
	}
	if _, w := g.counts(); w != 2 {
		t.Fatalf("writes %d, want 2", w)
	}
}

// Every matching bucket applies, whatever the order of the rules, and a
// call one bucket refuses charges none: test.ping matches both rules,
// test.write only the catch-all.
func TestEveryMatchingBucketApplies(t *testing.T) {
	perPing := host.RateRule{Module: "testmod", HostCall: "test.ping", PerSecond: 0.001, Burst: 2}
	all := host.RateRule{Module: "", HostCall: "", PerSecond: 0.001, Burst: 3}
	for _, rules := range [][]host.RateRule{{perPing, all}, {all, perPing}} {
		f := newFixture(t, host.Config{RateRules: rules})
		for i := 1; i <= 2; i++ { // at the ping bucket's burst
			if _, perr := f.invoke(t, "test.ping", `{}`); perr != nil {
				t.Fatalf("rules %+v: ping %d: %v", rules, i, perr)
			}
		}
		if _, perr := f.invoke(t, "test.ping", `{}`); perr == nil || perr.Code != protocol.CodeRateLimited {
			t.Fatalf("rules %+v: ping 3 (one past the ping bucket): %v, want RATE_LIMITED", rules, perr)
		}
		// The catch-all bucket holds 1 of 3: the refused ping took nothing.
		if _, perr := f.invoke(t, "test.write", `{}`); perr != nil {
			t.Fatalf("rules %+v: write at the catch-all's burst: %v", rules, perr)
		}
		if _, perr := f.invoke(t, "test.write", `{}`); perr == nil || perr.Code != protocol.CodeRateLimited {
			t.Fatalf("rules %+v: write one past the catch-all: %v, want RATE_LIMITED", rules, perr)
		}
		if p, w := f.counts(); p != 2 || w != 1 {
			t.Fatalf("rules %+v: pings %d writes %d, want 2 1", rules, p, w)
		}
	}
}

// An error a module returns after its effect says the effect may have
// happened, whatever flags the module set, and the request's outcome is
// marked for the node's session. Without an effect the flags stay.
func TestErrorAfterEffectSaysApplied(t *testing.T) {
	f := newFixture(t, host.Config{})
	out := &protocol.InvokeOutcome{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, perr := f.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "i1", Method: "test.writefail", Args: json.RawMessage(`{}`), Outcome: out})
	if perr == nil || perr.Code != protocol.CodeInvalidParams {
		t.Fatalf("writefail: %v", perr)
	}
	if retry, applied := flags(t, "writefail", perr); retry || !applied {
		t.Fatalf("after the write: retrySafe %v mutationMayHaveApplied %v, want false true", retry, applied)
	}
	if !out.Applied() {
		t.Fatal("the request's outcome is not marked applied")
	}
	// A read-only method that fails is not marked.
	clean := &protocol.InvokeOutcome{}
	f.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "i2", Method: "test.trap", Args: json.RawMessage(`{}`), Outcome: clean})
	if clean.Applied() {
		t.Fatal("a method without an effect is marked applied")
	}
}

// The session's result room reaches host calls.
func TestMaxResultBytesReachesHostCalls(t *testing.T) {
	f := newFixture(t, host.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, perr := f.h.Invoke(ctx, protocol.InvokeRequest{InvokeID: "i1", Method: "test.ping", Args: json.RawMessage(`{}`), MaxResultBytes: 65405}); perr != nil {
		t.Fatal(perr)
	}
	f.tt.mu.Lock()
	got := f.tt.lastResult
	f.tt.mu.Unlock()
	if got != 65405 {
		t.Fatalf("host call saw MaxResultBytes %d, want 65405", got)
	}
}
