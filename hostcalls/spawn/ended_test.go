package spawn

import (
	"fmt"
	"testing"

	"lemon/hostcalls/contract"
)

// Another principal finishing primMaxEnded runs never makes a principal's
// ended-but-unread run "unknown": the bound is per principal
// (docs/PROCESS.md, "Spawn primitives"). Found by adversarial review
// (adv11).
func TestPrimEndedRunOfAnotherPrincipalKept(t *testing.T) {
	f := newFixture(t, nil)
	alice := newCall("inv-a", 0)
	alice.inv.Authority.Principal = "alice"
	var st contract.SpawnStartResult
	if err := primCall(t, f.s, alice, "spawn.start", startArgs(alice, "", "true"), &st); err != nil {
		t.Fatal(err)
	}
	<-alice.done
	bob := newCall("inv-b", 0)
	bob.inv.Authority.Principal = "bob"
	var bobIDs []string
	for i := 0; i <= primMaxEnded; i++ {
		var b contract.SpawnStartResult
		if err := primCall(t, f.s, bob, "spawn.start", startArgs(bob, "", "true"), &b); err != nil {
			t.Fatal(err)
		}
		<-bob.done
		bobIDs = append(bobIDs, b.Run)
	}
	var w contract.SpawnWaitResult
	if err := primCall(t, f.s, alice, "spawn.wait", contract.SpawnRunRef{Run: st.Run}, &w); err != nil || w.State != contract.SpawnExited {
		t.Fatalf("alice's ended run after bob's %d runs: %+v %v (evicted by another principal)", primMaxEnded+1, w, err)
	}
	// Bob's 65th run forgot bob's own oldest.
	if primCall(t, f.s, bob, "spawn.wait", contract.SpawnRunRef{Run: bobIDs[0]}, &w); w.State != contract.SpawnUnknown {
		t.Fatalf("bob's oldest after his %d runs reads %+v, want unknown", primMaxEnded+1, w)
	}
	if primCall(t, f.s, bob, "spawn.wait", contract.SpawnRunRef{Run: bobIDs[1]}, &w); w.State != contract.SpawnExited {
		t.Fatalf("bob's second oldest reads %+v", w)
	}
}

// endedFixture is a Spawner holding only the ended-run bookkeeping.
type endedFixture struct {
	s *Spawner
	n int
}

func newEndedFixture() *endedFixture {
	return &endedFixture{s: &Spawner{runs: map[string]*run{}, endedBy: map[string]endedLoad{}}}
}

// end records an ended run of principal holding out bytes of output.
func (f *endedFixture) end(principal string, out int) string {
	f.n++
	r := &run{runID: fmt.Sprintf("r%d", f.n), principal: principal, exit: primExit{stdout: make([]byte, out)}}
	f.s.runs[r.runID] = r
	f.s.recordEnded(r)
	return r.runID
}

func (f *endedFixture) known(id string) bool { return f.s.runs[id] != nil }

// The per-principal bound: the 64th ended run of a principal keeps them
// all; the 65th forgets that principal's own oldest, never another's
// older run.
func TestPrimEndedPerPrincipalBoundary(t *testing.T) {
	f := newEndedFixture()
	bob := f.end("bob", 0)
	var ids []string
	for i := 0; i < primMaxEnded; i++ {
		ids = append(ids, f.end("alice", 0))
	}
	for _, id := range append(ids, bob) {
		if !f.known(id) {
			t.Fatalf("at %d of alice's runs %s was forgotten", primMaxEnded, id)
		}
	}
	next := f.end("alice", 0)
	if f.known(ids[0]) {
		t.Fatal("alice's 65th run kept her oldest")
	}
	for _, id := range append(ids[1:], next, bob) {
		if !f.known(id) {
			t.Fatalf("alice's 65th run forgot %s", id)
		}
	}
	if len(f.s.ended) != primMaxEnded+1 || f.s.endedBy["alice"].runs != primMaxEnded {
		t.Fatalf("ended %d, alice %+v", len(f.s.ended), f.s.endedBy["alice"])
	}
}

// The node-wide count bound: at primMaxEndedNode ended runs every one is
// kept; one more forgets the oldest run of a principal holding the most
// (not a lighter principal's older run).
func TestPrimEndedNodeBoundary(t *testing.T) {
	f := newEndedFixture()
	light := f.end("light", 0) // the oldest run on the node
	heavy := primMaxEndedNode / primMaxEnded
	first := map[int]string{}
	for p := 0; p < heavy-1; p++ {
		for i := 0; i < primMaxEnded; i++ {
			id := f.end(fmt.Sprintf("p%d", p), 0)
			if i == 0 {
				first[p] = id
			}
		}
	}
	for len(f.s.ended) < primMaxEndedNode {
		f.end("fill", 0)
	}
	for _, id := range []string{light, first[0], first[1]} {
		if !f.known(id) {
			t.Fatalf("at %d ended runs %s was forgotten", primMaxEndedNode, id)
		}
	}
	next := f.end("new", 0)
	if len(f.s.ended) != primMaxEndedNode {
		t.Fatalf("one past the node bound %d ended runs kept, want %d", len(f.s.ended), primMaxEndedNode)
	}
	if f.known(first[0]) {
		t.Fatal("one past the node bound the heaviest principal's oldest run was kept")
	}
	for _, id := range []string{light, first[1], next} {
		if !f.known(id) {
			t.Fatalf("one past the node bound %s was forgotten", id)
		}
	}
}

// The node-wide output bound: at primMaxEndedBytes of output every run is
// kept; one byte more forgets the oldest run of the principal holding the
// most output, not the newcomer's.
func TestPrimEndedBytesBoundary(t *testing.T) {
	f := newEndedFixture()
	const mib = 1 << 20
	small := f.end("small", 0)
	var ids []string
	for i := 0; i < primMaxEndedBytes/mib; i++ {
		ids = append(ids, f.end("big", mib))
	}
	if f.s.endedBytes != primMaxEndedBytes || !f.known(ids[0]) || !f.known(small) {
		t.Fatalf("at the output bound: %d bytes, oldest kept %v", f.s.endedBytes, f.known(ids[0]))
	}
	next := f.end("other", 1)
	if f.known(ids[0]) {
		t.Fatal("one byte past the output bound the heaviest principal's oldest run was kept")
	}
	for _, id := range []string{small, ids[1], next} {
		if !f.known(id) {
			t.Fatalf("one byte past the output bound %s was forgotten", id)
		}
	}
	if f.s.endedBytes != primMaxEndedBytes-mib+1 {
		t.Fatalf("output held %d, want %d", f.s.endedBytes, primMaxEndedBytes-mib+1)
	}
}
