package controller

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"lemon/policies/authority"
	"lemon/protocol"
)

// decideFrame asks p to decide approval id.
func decideFrame(p *peer, id, decision string) frame {
	return p.call(protocol.MethodApprovalDecide, protocol.ApprovalDecideParams{ApprovalID: id, Decision: decision})
}

func listed(t *testing.T, p *peer, id string) bool {
	t.Helper()
	f := p.call(protocol.MethodApprovalList, nil)
	var list protocol.ApprovalListResult
	if !f.OK || json.Unmarshal(f.Payload, &list) != nil {
		t.Fatalf("approval.list: %s", f.raw)
	}
	for _, a := range list.Approvals {
		if a.ApprovalID == id {
			if a.Status != protocol.ApprovalPending {
				t.Fatalf("listed as %s", a.Status)
			}
			return true
		}
	}
	return false
}

// TestClusterApprovals: a request held on controller 0 (its caller is
// there; the node is held by controller 2) is listed on 1 and decided on
// 2; two decisions on two controllers race and exactly one wins; the
// requester's own entry cannot decide it from another controller; the
// timeout releases it everywhere; a once-grant holds on every controller.
func TestClusterApprovals(t *testing.T) {
	ms := startCluster(t, 3, func(int) Config { return authorityConfig(t) })
	n := authorityNode(t, ms[2].srv.url)
	nid := nodeIDOf("worker-1")
	clusterWait(t, "holder seen on c0", func() bool { return ms[0].srv.fed.holderOf(nid) == "c2" })
	ask := connectOperator(t, ms[0].srv.url, askToken)
	askOnB := connectOperator(t, ms[1].srv.url, askToken)
	apprB := connectOperator(t, ms[1].srv.url, apprToken)
	apprC := connectOperator(t, ms[2].srv.url, apprToken)
	roApprC := connectOperator(t, ms[2].srv.url, roApproveToken)

	// Hold on A, list on B, decide on C: the caller on A gets its result.
	ch := ask.start("node.fs.write", writeParams(nid, "aGk="))
	info := approvalEvent(t, ask, protocol.EventApprovalRequested)
	if info.Principal != "ask" || info.NodeID != nid || info.Status != protocol.ApprovalPending {
		t.Fatalf("approval info %+v", info)
	}
	nothingSent(t, n)
	// Another controller lists it once its read of the bucket has caught
	// up (a watch's consumer may sit on a replica a moment behind).
	clusterWait(t, "the held request listed on controllers 1 and 2", func() bool {
		return listed(t, apprB, info.ApprovalID) && listed(t, apprC, info.ApprovalID)
	})
	if f := apprB.call(protocol.MethodApprovalList, nil); strings.Contains(string(f.raw), "aGk=") || strings.Contains(string(f.raw), "/tmp/x") {
		t.Fatalf("list carries content: %s", f.raw)
	}
	// Self-approval across controllers: the same operator entry on B.
	wantError(t, decideFrame(askOnB, info.ApprovalID, "approve"), protocol.CodeForbidden, protocol.DomainSelfApproval)
	// The approver's own policy decides (read_only may not).
	wantError(t, decideFrame(roApprC, info.ApprovalID, "approve"), protocol.CodeForbidden, protocol.DomainPolicyDenied)
	if !listed(t, apprB, info.ApprovalID) {
		t.Fatal("a refused decision removed the request")
	}
	if f := decideFrame(apprC, info.ApprovalID, "approve"); !f.OK || !strings.Contains(string(f.Payload), `"approved"`) {
		t.Fatalf("decide on c2: %s", f.raw)
	}
	if f := ask.await(ch); !f.OK {
		t.Fatalf("approved write: %s", f.raw)
	}
	if ev := approvalEvent(t, ask, protocol.EventApprovalResolved); ev.ApprovalID != info.ApprovalID || ev.Status != protocol.ApprovalApproved {
		t.Fatalf("resolved %+v", ev)
	}
	received(t, n)
	nothingSent(t, n) // released exactly once
	clusterWait(t, "decided request gone", func() bool { return !listed(t, apprB, info.ApprovalID) })
	wantError(t, decideFrame(apprB, info.ApprovalID, "deny"), protocol.CodeNotFound, protocol.DomainApprovalNotFound)

	// Two concurrent decisions on B and C: exactly one wins, the other is
	// told clearly; the caller gets the winner's decision.
	for round := 0; round < 3; round++ {
		ch = ask.start("node.fs.write", writeParams(nid, "aGk="))
		info = approvalEvent(t, ask, protocol.EventApprovalRequested)
		var wg sync.WaitGroup
		frames := make([]frame, 2)
		for i, p := range []*peer{apprB, apprC} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				frames[i] = decideFrame(p, info.ApprovalID, []string{"approve", "deny"}[i])
			}()
		}
		wg.Wait()
		winner := -1
		for i, f := range frames {
			if f.OK {
				if winner >= 0 {
					t.Fatalf("both decisions won: %s / %s", frames[0].raw, frames[1].raw)
				}
				winner = i
				continue
			}
			if d := f.Error.DomainCode(); d != protocol.DomainApprovalDecided && d != protocol.DomainApprovalNotFound {
				t.Fatalf("losing decision: %s", f.raw)
			}
		}
		if winner < 0 {
			t.Fatalf("no decision won: %s / %s", frames[0].raw, frames[1].raw)
		}
		f := ask.await(ch)
		if winner == 0 {
			if !f.OK {
				t.Fatalf("approved by c1, got %s", f.raw)
			}
			received(t, n)
		} else {
			wantError(t, f, protocol.CodeForbidden, protocol.DomainApprovalDenied)
		}
		nothingSent(t, n)
	}

	// The loser of the compare-and-swap, made deterministic: a record no
	// controller holds (nothing deletes it once decided).
	orphan := approvalInfo(authority.ExecutionContext{Principal: "ask"}, "always", "node.fs.write", nid, json.RawMessage(`{}`), time.Now(), time.Minute)
	orphan.Principal = "ask"
	if _, err := ms[0].srv.fed.putApproval(orphan); err != nil {
		t.Fatal(err)
	}
	if f := decideFrame(apprB, orphan.ApprovalID, "deny"); !f.OK {
		t.Fatalf("first decision: %s", f.raw)
	}
	wantError(t, decideFrame(apprC, orphan.ApprovalID, "approve"), protocol.CodeConflict, protocol.DomainApprovalDecided)
	ms[0].srv.fed.forgetApproval(orphan.ApprovalID)

	// Timeout on A releases it everywhere.
	ms[0].srv.approvals.timeout.Store(int64(3 * time.Second))
	ch = ask.start("node.fs.write", writeParams(nid, "aGk="))
	info = approvalEvent(t, ask, protocol.EventApprovalRequested)
	for deadline := time.Now().Add(2 * time.Second); !listed(t, apprC, info.ApprovalID); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("held request not listed on c2")
		}
	}
	f := ask.await(ch)
	wantError(t, f, protocol.CodeTimeout, protocol.DomainApprovalTimeout)
	wantRetry(t, f, true, false)
	if ev := approvalEvent(t, ask, protocol.EventApprovalResolved); ev.Status != protocol.ApprovalExpired {
		t.Fatalf("expired event %+v", ev)
	}
	if listed(t, apprB, info.ApprovalID) || listed(t, apprC, info.ApprovalID) {
		t.Fatal("an expired request is still listed")
	}
	wantError(t, decideFrame(apprC, info.ApprovalID, "approve"), protocol.CodeNotFound, protocol.DomainApprovalNotFound)
	nothingSent(t, n)
	ms[0].srv.approvals.timeout.Store(int64(10 * time.Second))

	// A once-grant given on A's request holds for the same principal on B.
	ch = ask.start("node.process.run", runParams(nid, "p1", "make"))
	info = approvalEvent(t, ask, protocol.EventApprovalRequested)
	if f := decideFrame(apprB, info.ApprovalID, "approve"); !f.OK {
		t.Fatalf("decide run: %s", f.raw)
	}
	if f := ask.await(ch); !f.OK {
		t.Fatalf("approved run: %s", f.raw)
	}
	received(t, n)
	clusterWait(t, "grant on c1", func() bool {
		ms[1].srv.approvals.mu.Lock()
		defer ms[1].srv.approvals.mu.Unlock()
		return len(ms[1].srv.approvals.grants) == 1
	})
	if f := askOnB.call("node.process.run", runParams(nid, "p2", "make")); !f.OK {
		t.Fatalf("granted run on c1: %s", f.raw)
	}
	received(t, n)
}
