package client

import (
	"math"
	"testing"
)

// Regression: a hello-ok maxPayload near MaxInt64 overflowed the read
// limit to a negative number, which gorilla/websocket treats as no limit
// at all, so a controller could make the client buffer any frame.
func TestReadLimitForIsBounded(t *testing.T) {
	cases := []struct {
		maxPayload int
		want       int64
	}{
		{1 << 20, 1<<20 + EnvelopeSlack},
		{64 << 20, 64<<20 + EnvelopeSlack},
		{64<<20 + 1, MaxReadLimit},
		{math.MaxInt64, MaxReadLimit},
		{math.MaxInt64 - EnvelopeSlack + 1, MaxReadLimit},
		{-1, MaxReadLimit},
	}
	for _, c := range cases {
		if got := readLimitFor(c.maxPayload); got != c.want || got <= 0 {
			t.Errorf("readLimitFor(%d) = %d, want %d", c.maxPayload, got, c.want)
		}
	}
}
