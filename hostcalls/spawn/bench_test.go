package spawn

import (
	"context"
	"fmt"
	"os/exec"
	"testing"

	"lemon/protocol"
)

// BenchmarkSpawnTrue measures one run of `true` through Spawner.Start
// (admission fsync, fork/exec in a new group with the pinned cwd, reap,
// terminal fsync) against a bare os/exec run of the same binary.
func BenchmarkSpawnTrue(b *testing.B) {
	b.Run("spawner", func(b *testing.B) {
		f := newBenchFixture(b)
		ctx := context.Background()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if i > 0 && i%(protocol.ProcessMaxRetained-1) == 0 {
				b.StopTimer()
				f = newBenchFixture(b)
				b.StartTimer()
			}
			h, _, err := f.s.Start(ctx, req(fmt.Sprintf("b%d", i), "true"))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := h.Result(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("os-exec", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := exec.Command("/usr/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
