package controller

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"lemon/audit"
	"lemon/protocol"
)

// A fan-out's node calls are audited as direct calls, one record per node
// (inner method, node, invokeId, outcome) besides the fan-out's own; each
// node gets an execution context of its own whose runId is its invokeId;
// no params content reaches a log line or record.
func TestFanoutAuditsEachNodeCall(t *testing.T) {
	var logs, aud lockedBuf
	cfg := testConfig()
	cfg.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Audit = audit.New(&aud, false)
	s := startServer(t, cfg)
	seen := make(chan protocol.InvokeRequest, 1)
	connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, func(req protocol.InvokeRequest) (any, *protocol.Error, bool) {
		seen <- req
		return echoHandler(req)
	})
	op := connectOperator(t, s.url, adminToken)
	on, off := nodeIDOf("worker-1"), nodeIDOf("worker-2")
	f := op.call(protocol.MethodNodeFanout, map[string]any{"method": mEcho, "nodeIds": []string{on, off},
		"args": map[string]any{"value": "/home/" + canary}})
	if !f.OK {
		t.Fatalf("fan-out: %s", f.raw)
	}
	var sum protocol.FanoutSummary
	json.Unmarshal(f.Payload, &sum)
	if sum.Total != 2 || sum.OK != 1 || sum.Failed != 1 || sum.Method != mEcho {
		t.Fatalf("summary %+v", sum)
	}
	events := map[string]protocol.FanoutResult{}
	for range 2 {
		ev := op.next()
		var r protocol.FanoutResult
		if ev.Event != protocol.EventFanoutResult || json.Unmarshal(ev.Payload, &r) != nil || r.RequestID != f.ID {
			t.Fatalf("event %s", ev.raw)
		}
		events[r.NodeID] = r
	}
	if r := events[on]; !r.OK || r.RetrySafe || !r.MutationMayHaveApplied || !strings.Contains(string(r.Result), canary) {
		t.Fatalf("online node event %+v", r)
	}
	if r := events[off]; r.OK || r.Error.DomainCode() != protocol.DomainNodeOffline || !r.RetrySafe || r.MutationMayHaveApplied {
		t.Fatalf("offline node event %+v", r)
	}
	req := <-seen
	var ctx struct {
		RunID     string `json:"runId"`
		Principal string `json:"principal"`
	}
	if json.Unmarshal(req.ExecutionContext, &ctx) != nil || ctx.RunID != req.InvokeID || ctx.Principal != "admin" {
		t.Fatalf("node's execution context %s for invoke %s", req.ExecutionContext, req.InvokeID)
	}

	recs := records(t, aud.String())
	if len(recs) != 3 {
		t.Fatalf("%d audit records, want 3:\n%s", len(recs), aud.String())
	}
	byNode := map[string]audit.Record{}
	for _, r := range recs[:2] {
		byNode[r.NodeID] = r
	}
	if r := byNode[on]; r.Method != mEcho || r.Outcome != "ok" || r.InvokeID != req.InvokeID {
		t.Fatalf("online node record %+v", r)
	}
	if r := byNode[off]; r.Method != mEcho || r.Outcome != "error" || r.Code != protocol.CodeUnavailable || r.InvokeID != "" {
		t.Fatalf("offline node record %+v", r)
	}
	if r := recs[2]; r.Method != protocol.MethodNodeFanout || r.Outcome != "ok" || r.Principal != "admin" {
		t.Fatalf("fan-out record %+v", r)
	}
	if strings.Contains(logs.String(), canary) || strings.Contains(aud.String(), canary) {
		t.Fatal("params content reached a log line or audit record")
	}
}
