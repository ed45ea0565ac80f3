package host

import (
	"testing"
	"unsafe"
)

// TestLinearMemoryGrowsInPlace: growing hands out more of the reservation
// at the same address, keeping what was written and zero-filling the
// rest; past the reservation the answer is nil (wazero then fails
// memory.grow with -1).
func TestLinearMemoryGrowsInPlace(t *testing.T) {
	const page = 64 << 10
	m := newLinearMemory(page, 4*page)
	defer m.Free()
	if m.heap {
		t.Skip("no address-space reservation on this machine")
	}
	a := m.Reallocate(page)
	if len(a) != page {
		t.Fatalf("first page: %d bytes", len(a))
	}
	a[0], a[page-1] = 7, 9
	b := m.Reallocate(4 * page)
	if len(b) != 4*page || unsafe.SliceData(a) != unsafe.SliceData(b) {
		t.Fatalf("grown to %d bytes at %p, was %p", len(b), unsafe.SliceData(b), unsafe.SliceData(a))
	}
	if b[0] != 7 || b[page-1] != 9 || b[page] != 0 || b[4*page-1] != 0 {
		t.Fatal("growth lost what was written or is not zero-filled")
	}
	if c := m.Reallocate(4*page + 1); c != nil {
		t.Fatalf("past the reservation: %d bytes", len(c))
	}
}

// TestLinearMemoryFreeWaitsForCalls: a module closed while a call runs
// on it keeps its memory mapped until the call ends; a closed module's
// instance refuses new calls.
func TestLinearMemoryFreeWaitsForCalls(t *testing.T) {
	m := newLinearMemory(64<<10, 64<<10)
	m.Reallocate(64 << 10)
	if !m.enter() || !m.enter() {
		t.Fatal("enter on an open memory failed")
	}
	m.Free()
	if !m.mapped() {
		t.Fatal("unmapped while two calls run")
	}
	if m.enter() {
		t.Fatal("a call started after the module closed")
	}
	m.exit()
	if !m.mapped() {
		t.Fatal("unmapped while one call runs")
	}
	m.exit()
	if m.mapped() {
		t.Fatal("still mapped after the last call")
	}
	var none *linearMemory
	if !none.enter() {
		t.Fatal("a module without memory refused a call")
	}
	none.exit()
}
