package controller

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"lemon/protocol"
)

// fleetConfig is testConfig plus n offline interim-token nodes n-0000…
func fleetConfig(n int) Config {
	cfg := testConfig()
	for i := range n {
		cfg.NodeTokens = append(cfg.NodeTokens, NodeCredential{Name: fmt.Sprintf("n-%04d", i), TokenHash: HashToken(fmt.Sprintf("tok-%04d-0123456789", i))})
	}
	return cfg
}

func listPage(t *testing.T, op *peer, params map[string]any) protocol.NodeListResult {
	t.Helper()
	f := op.call(protocol.MethodNodeList, params)
	if !f.OK {
		t.Fatalf("node.list %v: %s", params, f.raw)
	}
	var r protocol.NodeListResult
	if err := json.Unmarshal(f.Payload, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNodeListPagingAndFilters(t *testing.T) {
	const extra = protocol.MaxNodeListLimit + 1 // 1001 n-* nodes, plus worker-1 and worker-2
	s := startServer(t, fleetConfig(extra))
	connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{Name: "worker-1"}, echoHandler)
	op := connectOperator(t, s.url, readToken)
	total := extra + 2

	// limit at its maximum passes; one past it fails.
	p1 := listPage(t, op, map[string]any{"limit": protocol.MaxNodeListLimit})
	if len(p1.Nodes) != protocol.MaxNodeListLimit || p1.NextCursor == "" {
		t.Fatalf("first page: %d nodes, cursor %q", len(p1.Nodes), p1.NextCursor)
	}
	wantError(t, op.call(protocol.MethodNodeList, map[string]any{"limit": protocol.MaxNodeListLimit + 1}), protocol.CodeInvalidParams, "")
	wantError(t, op.call(protocol.MethodNodeList, map[string]any{"limit": -1}), protocol.CodeInvalidParams, "")
	wantError(t, op.call(protocol.MethodNodeList, map[string]any{"cursor": strings.Repeat("x", 257)}), protocol.CodeInvalidParams, "")
	wantError(t, op.call(protocol.MethodNodeList, map[string]any{"namePrefix": strings.Repeat("n", 129)}), protocol.CodeInvalidParams, "")
	wantError(t, op.call(protocol.MethodNodeList, map[string]any{"namePrefix": "a\x01"}), protocol.CodeInvalidParams, "")
	wantError(t, op.call(protocol.MethodNodeList, map[string]any{"bogus": 1}), protocol.CodeInvalidParams, "")
	if r := listPage(t, op, map[string]any{"namePrefix": strings.Repeat("n", 128)}); len(r.Nodes) != 0 || r.Truncated {
		t.Fatalf("128-byte prefix: %+v", r)
	}
	p2 := listPage(t, op, map[string]any{"limit": protocol.MaxNodeListLimit, "cursor": p1.NextCursor})
	if len(p2.Nodes) != total-protocol.MaxNodeListLimit || p2.NextCursor != "" {
		t.Fatalf("second page: %d nodes, cursor %q", len(p2.Nodes), p2.NextCursor)
	}
	all := append(p1.Nodes, p2.Nodes...)
	if !sort.SliceIsSorted(all, func(i, j int) bool { return all[i].NodeID < all[j].NodeID }) {
		t.Fatal("pages are not in nodeId order")
	}
	seen := map[string]bool{}
	for _, n := range all {
		if seen[n.NodeID] {
			t.Fatalf("node %s on two pages", n.Name)
		}
		seen[n.NodeID] = true
	}

	// A client without paging params: sorted by name, at most the limit.
	legacy := listPage(t, op, nil)
	if len(legacy.Nodes) != protocol.MaxNodeListLimit || !legacy.Truncated || legacy.NextCursor != "" ||
		legacy.Nodes[0].Name != "n-0000" || legacy.Nodes[999].Name != "n-0999" {
		t.Fatalf("unpaged: %d nodes, truncated %v, first %s", len(legacy.Nodes), legacy.Truncated, legacy.Nodes[0].Name)
	}

	// Filters: a case-insensitive name prefix, the online state, both.
	if r := listPage(t, op, map[string]any{"namePrefix": "N-00"}); len(r.Nodes) != 100 || r.Truncated {
		t.Fatalf("prefix N-00: %d nodes", len(r.Nodes))
	}
	on := true
	if r := listPage(t, op, map[string]any{"online": on}); len(r.Nodes) != 1 || r.Nodes[0].Name != "worker-1" {
		t.Fatalf("online: %+v", r.Nodes)
	}
	if r := listPage(t, op, map[string]any{"online": false, "namePrefix": "worker", "limit": 10}); len(r.Nodes) != 1 || r.Nodes[0].Name != "worker-2" {
		t.Fatalf("offline worker*: %+v", r.Nodes)
	}
}

// A page at the maximum limit is cut where it would not fit the
// connection's maxPayload; the cursor continues without loss.
func TestNodeListPageFitsMaxPayload(t *testing.T) {
	cfg := fleetConfig(protocol.MaxNodeListLimit + 1)
	cfg.MaxPayload = 64 << 10
	s := startServer(t, cfg)
	op := connectOperator(t, s.url, readToken)
	cursor, got, pages := "", 0, 0
	for {
		params := map[string]any{"limit": protocol.MaxNodeListLimit}
		if cursor != "" {
			params["cursor"] = cursor
		}
		f := op.call(protocol.MethodNodeList, params)
		if !f.OK || len(f.raw) > cfg.MaxPayload {
			t.Fatalf("page of %d bytes: %.200s", len(f.raw), f.raw)
		}
		var r protocol.NodeListResult
		json.Unmarshal(f.Payload, &r)
		got += len(r.Nodes)
		pages++
		if r.NextCursor == "" {
			break
		}
		cursor = r.NextCursor
	}
	if got != protocol.MaxNodeListLimit+3 || pages < 2 {
		t.Fatalf("%d nodes over %d pages", got, pages)
	}
	if r := listPage(t, op, nil); !r.Truncated || len(r.Nodes) >= protocol.MaxNodeListLimit {
		t.Fatalf("unpaged at 64 KiB: %d nodes, truncated %v", len(r.Nodes), r.Truncated)
	}
}
