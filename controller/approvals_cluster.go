package controller

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"lemon/protocol"
)

// Approvals in a cluster (docs/CLUSTER.md, "Approvals"): a held request
// waits on the controller its caller is connected to (the holder), and
// its content-free record is key <approvalId> of bucket lemon_approvals,
// so any controller lists it and decides it. Every state change is a
// compare-and-swap on the key's revision: a decision turns "pending" into
// "approved" or "denied", the holder's timeout (or its caller leaving)
// deletes the pending key. Of two approvers on two controllers, and of an
// approver and the timeout, exactly one wins; the others are told so. The
// holder learns a decision from its watch of the bucket (or at once when
// it was decided here) and releases its waiting call exactly once
// (approvalBook.release), then deletes the key.

// approvalRecord is the value of a held request's key in lemon_approvals.
type approvalRecord struct {
	Info     protocol.ApprovalInfo `json:"info"`
	Holder   string                `json:"holder"`
	Approver string                `json:"approver,omitempty"`
}

// approvalReadLag bounds how long a decision waits for a held request's
// key to reach the replica that serves its read.
const approvalReadLag = time.Second

func isKeyGone(err error) bool {
	return errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)
}

func clusterUnavailable() *protocol.Error {
	return protocol.Errorf(protocol.CodeUnavailable, "the cluster state is unavailable; try again").WithRetry(true, false)
}

func errAlreadyDecided() *protocol.Error {
	return protocol.DomainError(protocol.CodeConflict, protocol.DomainApprovalDecided,
		"another approver decided this request first, or it expired; nothing was changed by this decision")
}

// putApproval publishes a new held request; it returns the key's revision.
func (f *federation) putApproval(info protocol.ApprovalInfo) (uint64, error) {
	v, err := json.Marshal(approvalRecord{Info: info, Holder: f.name})
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(f.ctx, kvOpTimeout)
	defer cancel()
	return f.be.kv[kvApprovals].Create(ctx, info.ApprovalID, v)
}

// withdrawApproval deletes a still-pending held request (its timeout
// passed or its caller left). It returns "" when the request was still
// pending, else the status an approver set first.
func (f *federation) withdrawApproval(id string, rev uint64) string {
	ctx, cancel := context.WithTimeout(context.Background(), kvOpTimeout)
	defer cancel()
	kv := f.be.kv[kvApprovals]
	if err := kv.Delete(ctx, id, jetstream.LastRevision(rev)); err == nil {
		return ""
	}
	ent, err := kv.Get(ctx, id)
	if err != nil {
		return ""
	}
	var rec approvalRecord
	if json.Unmarshal(ent.Value(), &rec) != nil || rec.Info.Status == protocol.ApprovalPending {
		return ""
	}
	return rec.Info.Status
}

// forgetApproval deletes a resolved request's key.
func (f *federation) forgetApproval(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), kvOpTimeout)
	defer cancel()
	_ = f.be.kv[kvApprovals].Delete(ctx, id)
}

// putGrant shares a once-grant with the other controllers.
func (f *federation) putGrant(key, approvalID string) {
	ctx, cancel := context.WithTimeout(context.Background(), kvOpTimeout)
	defer cancel()
	_, _ = f.be.kv[kvGrants].Put(ctx, key, []byte(approvalID))
}

// listApprovals reads the pending, unexpired held requests of the whole
// cluster, oldest first.
func (f *federation) listApprovals() (protocol.ApprovalListResult, *protocol.Error) {
	ctx, cancel := context.WithTimeout(f.ctx, kvOpTimeout)
	defer cancel()
	w, err := f.be.kv[kvApprovals].WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return protocol.ApprovalListResult{}, clusterUnavailable()
	}
	defer w.Stop()
	now := f.s.now().UnixMilli()
	out := []protocol.ApprovalInfo{}
	for {
		select {
		case <-ctx.Done():
			return protocol.ApprovalListResult{}, clusterUnavailable()
		case ent, ok := <-w.Updates():
			if !ok {
				return protocol.ApprovalListResult{}, clusterUnavailable()
			}
			if ent == nil { // the end of the values stored
				sortApprovals(out)
				return protocol.ApprovalListResult{Approvals: out}, nil
			}
			var rec approvalRecord
			if json.Unmarshal(ent.Value(), &rec) != nil || rec.Info.Status != protocol.ApprovalPending || rec.Info.ExpiresAtMs <= now {
				continue
			}
			out = append(out, rec.Info)
		}
	}
}

func sortApprovals(out []protocol.ApprovalInfo) {
	sort.Slice(out, func(i, j int) bool {
		if out[i].RequestedAtMs != out[j].RequestedAtMs {
			return out[i].RequestedAtMs < out[j].RequestedAtMs
		}
		return out[i].ApprovalID < out[j].ApprovalID
	})
}

// decideApproval sets a pending request's status for approver c with a
// compare-and-swap; it returns the record as it was.
func (f *federation) decideApproval(c *conn, id, status string) (approvalRecord, *protocol.Error) {
	ctx, cancel := context.WithTimeout(f.ctx, kvOpTimeout)
	defer cancel()
	kv := f.be.kv[kvApprovals]
	ent, err := kv.Get(ctx, id)
	// A read may be served by a replica a moment behind the controller
	// that holds the request (its put was acknowledged by a quorum, not by
	// every replica): a key not found yet is read again for up to
	// approvalReadLag before the answer is not-found.
	for deadline := time.Now().Add(approvalReadLag); isKeyGone(err) && time.Now().Before(deadline); {
		time.Sleep(approvalReadLag / 20)
		ent, err = kv.Get(ctx, id)
	}
	if isKeyGone(err) {
		return approvalRecord{}, protocol.DomainError(protocol.CodeNotFound, protocol.DomainApprovalNotFound,
			"no request waiting for approval has this approvalId")
	}
	if err != nil {
		return approvalRecord{}, clusterUnavailable()
	}
	var rec approvalRecord
	if json.Unmarshal(ent.Value(), &rec) != nil {
		return approvalRecord{}, clusterUnavailable()
	}
	if rec.Info.Status != protocol.ApprovalPending {
		return approvalRecord{}, errAlreadyDecided()
	}
	if rec.Info.ExpiresAtMs <= f.s.now().UnixMilli() {
		return approvalRecord{}, protocol.DomainError(protocol.CodeNotFound, protocol.DomainApprovalNotFound,
			"no request waiting for approval has this approvalId")
	}
	if rec.Info.Principal == c.op.name {
		return approvalRecord{}, refuse(protocol.DomainSelfApproval,
			"an operator entry cannot decide its own requests; another entry holding operator.approvals must")
	}
	next := rec
	next.Info.Status, next.Approver = status, c.op.name
	v, err := json.Marshal(next)
	if err != nil {
		return approvalRecord{}, clusterUnavailable()
	}
	if _, err := kv.Update(ctx, id, v, ent.Revision()); err != nil {
		// A revision mismatch is a lost compare-and-swap: another decision
		// or the timeout came first. Anything else is the state being
		// unreachable. (The error says which; a read after it could be
		// served by a replica that has not applied the winner yet.)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			return approvalRecord{}, errAlreadyDecided()
		}
		return approvalRecord{}, clusterUnavailable()
	}
	return rec, nil
}

// watchApprovals releases the calls held here that an approver decided
// on any controller, and keeps the once-grants of the cluster.
func (f *federation) watchApprovals() error {
	w, err := f.be.kv[kvApprovals].WatchAll(f.ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	g, err := f.be.kv[kvGrants].WatchAll(f.ctx, jetstream.IgnoreDeletes())
	if err != nil {
		w.Stop()
		return err
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer w.Stop()
		defer g.Stop()
		for {
			select {
			case <-f.ctx.Done():
				return
			case ent, ok := <-w.Updates():
				if !ok {
					return
				}
				var rec approvalRecord
				if ent == nil || json.Unmarshal(ent.Value(), &rec) != nil || rec.Holder != f.name ||
					rec.Info.Status == protocol.ApprovalPending {
					continue
				}
				f.s.approvals.release(rec.Info.ApprovalID, rec.Info.Status)
			case ent, ok := <-g.Updates():
				if !ok {
					return
				}
				if ent != nil {
					f.s.approvals.grant(ent.Key())
				}
			}
		}
	}()
	return nil
}
