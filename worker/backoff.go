package worker

import (
	"math/rand/v2"
	"time"
)

// Backoff is the reconnect schedule: "full jitter" exponential backoff.
// The n-th consecutive failed attempt (from 0) waits a uniformly random
// time in [0, min(Max, Initial·2ⁿ)], so a controller restart under many
// nodes sees their reconnects spread out rather than arriving at once.
type Backoff struct {
	Initial time.Duration // default 500 ms
	Max     time.Duration // default 30 s
}

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = 500 * time.Millisecond
	}
	if b.Max <= 0 {
		b.Max = 30 * time.Second
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	return b
}

// Ceiling is the upper bound of the delay before attempt n.
func (b Backoff) Ceiling(n int) time.Duration {
	b = b.withDefaults()
	d := b.Initial
	for i := 0; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Delay draws the wait before attempt n from [0, Ceiling(n)].
func (b Backoff) Delay(n int, r *rand.Rand) time.Duration {
	c := b.Ceiling(n)
	return time.Duration(r.Int64N(int64(c) + 1))
}
