package spawn

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
	"testing"

	"lemon/protocol"
)

// BenchmarkSpawnTrue measures one run of `true` through Spawner.Start
// (admission fsync, fork/exec in a new group with the pinned cwd, reap,
// terminal fsync) against a bare os/exec run of the same binary, and 16
// concurrent runs through one Spawner (one op = 16 runs), whose admission
// and terminal writes share commits. commits/op counts store commits (each
// two fdatasyncs).
func BenchmarkSpawnTrue(b *testing.B) {
	b.Run("spawner", func(b *testing.B) {
		f := newBenchFixture(b)
		ctx := context.Background()
		var commits uint64
		c0 := f.st.Stats().Commits
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if i > 0 && i%(protocol.ProcessMaxRetained-1) == 0 {
				b.StopTimer()
				commits += f.st.Stats().Commits - c0
				f = newBenchFixture(b)
				c0 = f.st.Stats().Commits
				b.StartTimer()
			}
			h, _, err := f.start(ctx, req(fmt.Sprintf("b%d", i), "true"))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := h.Result(); err != nil {
				b.Fatal(err)
			}
		}
		commits += f.st.Stats().Commits - c0
		b.ReportMetric(float64(commits)/float64(b.N), "commits/op")
	})
	b.Run("spawner-16-concurrent", func(b *testing.B) {
		f := newBenchFixture(b)
		ctx := context.Background()
		var commits uint64
		c0 := f.st.Stats().Commits
		n := 0
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if n+protocol.ProcessMaxActive > protocol.ProcessMaxRetained {
				b.StopTimer()
				commits += f.st.Stats().Commits - c0
				f = newBenchFixture(b)
				c0, n = f.st.Stats().Commits, 0
				b.StartTimer()
			}
			var wg sync.WaitGroup
			for j := 0; j < protocol.ProcessMaxActive; j++ {
				id := fmt.Sprintf("c%d", n)
				n++
				wg.Add(1)
				go func() {
					defer wg.Done()
					h, _, err := f.start(ctx, req(id, "true"))
					if err != nil {
						b.Error(err)
						return
					}
					if _, err := h.Result(); err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
		}
		commits += f.st.Stats().Commits - c0
		b.ReportMetric(float64(commits)/float64(b.N), "commits/op")
	})
	b.Run("os-exec", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := exec.Command("/usr/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
