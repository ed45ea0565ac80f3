package datadial

import (
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// BulkNice is the nice value of the threads that move a transfer's bytes
// (docs/FS.md, "Memory and flow").
const BulkNice = 5

// RunBulk runs fn on a thread of its own with nice BulkNice, so the
// process's other goroutines (control frames, other requests) win the CPU
// over file bytes when it is scarce. The thread ends with fn: a goroutine
// that exits locked to its thread takes the thread with it, so no other
// goroutine ever runs at the lowered priority.
func RunBulk(fn func()) {
	spareProcs.Do(addSpareProcs)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), BulkNice)
		defer close(done)
		fn()
	}()
	<-done
}

var spareProcs sync.Once

// addSpareProcs raises GOMAXPROCS to NumCPU+2 at a process's first
// transfer, unless GOMAXPROCS was set in the environment. A niced thread
// that the kernel has set aside still holds its Go P; with only NumCPU Ps,
// two busy byte loops could leave a control goroutine waiting for a P until
// the kernel runs them again, which is priority inversion
// (docs/RATIONALE.md, "Spare Ps for transfers").
func addSpareProcs() {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	if n := runtime.NumCPU() + 2; runtime.GOMAXPROCS(0) < n {
		runtime.GOMAXPROCS(n)
	}
}
