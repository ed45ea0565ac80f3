package host

import (
	"sync"

	"github.com/tetratelabs/wazero/experimental"
)

// linearMemory backs one instance's linear memory outside the Go heap
// (docs/RATIONALE.md, "Linear memory outside the Go heap"): the whole
// MemoryLimitPages is reserved once as address space (mmap with
// MAP_NORESERVE: no memory is committed until the guest touches it), and
// memory.grow hands out more of the reservation in place. wazero's default
// keeps the memory in a Go slice and grows it with append, which copies
// the whole memory at every growth (a Go guest grows by 512 KiB at a time)
// and keeps megabytes per instance in the Go heap.
//
// The reservation is unmapped only once nothing can touch it: wazero frees
// it when the module closes, which may happen while a call still runs on
// it (Host.Close, a deadline), so every call into the instance is bracketed
// by enter and exit, and the unmap waits for the last exit. A closed
// instance's enter fails, so no call starts on unmapped memory.
//
// Where the reservation cannot be made (a strict overcommit policy, a
// platform without mmap) the memory lives in the Go heap as wazero's
// default would keep it.
type linearMemory struct {
	mu    sync.Mutex
	base  []byte // the reservation; nil once unmapped
	heap  bool   // base is a Go slice, grown by append (the fallback)
	users int    // calls running on the instance
	freed bool   // the module closed: unmap at the last exit
}

// newLinearMemory is the experimental.MemoryAllocator of instances:
// maxBytes of address space, of which wazero then asks for the module's
// minimum.
func newLinearMemory(capBytes, maxBytes uint64) *linearMemory {
	m := &linearMemory{base: make([]byte, 0, capBytes), heap: true}
	if b, err := reserve(maxBytes); err == nil {
		m = &linearMemory{base: b}
	}
	if testMemoryCreated != nil {
		testMemoryCreated(m)
	}
	return m
}

// testMemoryCreated, when set (export_test.go), sees every memory made.
var testMemoryCreated func(*linearMemory)

// Reallocate implements experimental.LinearMemory: the first size bytes,
// in place, or nil past the reservation.
func (m *linearMemory) Reallocate(size uint64) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.heap {
		if size > uint64(cap(m.base)) {
			grown := make([]byte, size, size+size/2)
			copy(grown, m.base)
			m.base = grown
		}
		m.base = m.base[:size]
		return m.base
	}
	if m.base == nil || size > uint64(len(m.base)) {
		return nil
	}
	return m.base[:size:size]
}

// Free implements experimental.LinearMemory: the module closed.
func (m *linearMemory) Free() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.freed = true
	if m.users == 0 {
		m.unmapLocked()
	}
}

// enter registers a call about to run on the instance; false means the
// module closed and the call must not start. A nil memory (a module
// without one) always answers true.
func (m *linearMemory) enter() bool {
	if m == nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.freed {
		return false
	}
	m.users++
	return true
}

// exit ends a call entered with enter.
func (m *linearMemory) exit() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.users--; m.users == 0 && m.freed {
		m.unmapLocked()
	}
}

// mapped reports whether the reservation is still mapped (tests).
func (m *linearMemory) mapped() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.base != nil
}

func (m *linearMemory) unmapLocked() {
	if m.base == nil {
		return
	}
	if !m.heap {
		release(m.base[:cap(m.base)])
	}
	m.base = nil
}

var _ experimental.LinearMemory = (*linearMemory)(nil)
