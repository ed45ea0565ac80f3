package datadial

import (
	"runtime"

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
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), BulkNice)
		defer close(done)
		fn()
	}()
	<-done
}
