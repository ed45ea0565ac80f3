package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

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

// A caller that does not read its fan-out's events is closed as a slow
// consumer, and the fan-out stops calling nodes.
func TestFanoutSlowConsumerStopsDispatch(t *testing.T) {
	const nodes = 12
	cfg := testConfig()
	cfg.MaxBufferedBytes = protocol.DefaultMaxPayload
	cfg.SlowConsumerTimeout = 200 * time.Millisecond
	for i := range nodes {
		cfg.NodeTokens = append(cfg.NodeTokens, NodeCredential{Name: fmt.Sprintf("big-%02d", i), TokenHash: HashToken(fmt.Sprintf("big-token-%02d-0123456789", i))})
	}
	s := startSmallBufServer(t, cfg)
	var calls atomic.Int32
	half := json.RawMessage(`{"v":"` + strings.Repeat("x", protocol.DefaultMaxPayload/2) + `"}`)
	ids := make([]string, nodes)
	for i := range nodes {
		ids[i] = nodeIDOf(fmt.Sprintf("big-%02d", i))
		connectNode(t, s.url, fmt.Sprintf("big-token-%02d-0123456789", i), protocol.NodeAdvertise{Name: fmt.Sprintf("big-%02d", i)},
			func(req protocol.InvokeRequest) (any, *protocol.Error, bool) {
				calls.Add(1)
				return half, nil, true
			})
	}
	ws := rawOperator(t, s.url)
	req, _ := json.Marshal(protocol.Request{Type: protocol.FrameReq, ID: "f1", Method: protocol.MethodNodeFanout,
		Params: mustJSON(t, protocol.FanoutParams{Method: "node.host.info", NodeIDs: ids, Concurrency: 1})})
	if err := ws.WriteMessage(websocket.TextMessage, req); err != nil {
		t.Fatal(err)
	}
	// Read nothing until the controller gives up on this socket.
	waitQueueFull(t, s, ws)
	time.Sleep(cfg.SlowConsumerTimeout)
	var closeErr *websocket.CloseError
	for {
		_, _, err := ws.ReadMessage()
		if err != nil {
			if !errors.As(err, &closeErr) || closeErr.Code != websocket.ClosePolicyViolation || closeErr.Text != slowConsumerReason {
				t.Fatalf("socket ended with %v, want 1008 %q", err, slowConsumerReason)
			}
			break
		}
	}
	if n := calls.Load(); n >= nodes {
		t.Fatalf("%d of %d nodes called after the caller was cut", n, nodes)
	}
}
