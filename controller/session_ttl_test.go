package controller

import (
	"strings"
	"testing"
	"time"

	"lemon/protocol"
)

// Config.SessionTTL (`lemon controller --session-ttl`) shortens the node
// session lifetime; it is bounded by MinSessionTTL and protocol.SessionTTL.
func TestSessionTTLBounds(t *testing.T) {
	for _, tc := range []struct {
		ttl time.Duration
		ok  bool
	}{
		{0, true}, // the default, 7 days
		{MinSessionTTL, true},
		{MinSessionTTL - time.Nanosecond, false},
		{protocol.SessionTTL, true},
		{protocol.SessionTTL + time.Nanosecond, false},
		{-time.Second, false},
	} {
		cfg := testConfig()
		cfg.SessionTTL = tc.ttl
		s, err := New(cfg)
		if tc.ok != (err == nil) {
			t.Fatalf("SessionTTL %s: err %v, want ok=%v", tc.ttl, err, tc.ok)
		}
		if err != nil {
			if !strings.Contains(err.Error(), "session TTL") {
				t.Fatalf("SessionTTL %s: error %q does not name the setting", tc.ttl, err)
			}
			continue
		}
		want := tc.ttl
		if want == 0 {
			want = protocol.SessionTTL
		}
		if s.cfg.SessionTTL != want {
			t.Fatalf("SessionTTL %s: effective %s", tc.ttl, s.cfg.SessionTTL)
		}
		s.Close()
	}
}

func TestShortSessionTTLExpires(t *testing.T) {
	clock := &testClock{t: time.UnixMilli(1_800_000_000_000)}
	cfg := pairingConfig("", clock)
	cfg.SessionTTL = MinSessionTTL
	s := startServer(t, cfg)
	issued := clock.Now().UnixMilli()
	res := pairNew(t, s, "short-ttl")
	if res.ExpiresAtMs != issued+MinSessionTTL.Milliseconds() {
		t.Fatalf("expiresAtMs %d, want %d", res.ExpiresAtMs, issued+MinSessionTTL.Milliseconds())
	}
	clock.Add(MinSessionTTL - time.Millisecond)
	connectNode(t, s.url, res.SessionToken, protocol.NodeAdvertise{NodeID: res.NodeID}, echoHandler) // fails the test if refused
	clock.Add(time.Millisecond)
	p := dialPeer(t, s.url)
	p.writeJSON(protocol.Request{Type: "req", ID: "c1", Method: "connect", Params: mustJSON(t, protocol.ConnectParams{
		Role: "node", Auth: protocol.ConnectAuth{Token: res.SessionToken}, Node: &protocol.NodeAdvertise{Methods: map[string]int{}}})})
	wantError(t, p.next(), protocol.CodeUnauthorized, protocol.DomainSessionExpired)
}
