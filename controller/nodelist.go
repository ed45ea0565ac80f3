package controller

import (
	"encoding/json"
	"sort"
	"strings"

	"lemon/protocol"
)

// nodeListOverhead is kept free in a node.list response for the frame
// envelope around the payload ({"type":"res","id":…,"ok":true,"payload":
// {"nodes":[…],"nextCursor":…,"truncated":true}}).
const nodeListOverhead = 1024

// nodeList answers node.list (docs/PROTOCOL.md, "Node registry"): the
// nodes matching p's filters, either one page in nodeId order after
// p.Cursor (p.Paged()) or, for a client that sends no paging params,
// sorted by name as before. Either is cut at protocol.MaxNodeListLimit
// entries (or p.Limit) and where the encoded entries would pass budget
// bytes; a cut page carries NextCursor, a cut unpaged list Truncated.
func (r *registry) nodeList(p protocol.NodeListParams, budget int) protocol.NodeListResult {
	prefix := strings.ToLower(p.NamePrefix)
	r.mu.Lock()
	all := make([]protocol.NodeSummary, 0, len(r.nodes))
	for _, e := range r.nodes {
		if p.Online != nil && e.online() != *p.Online {
			continue
		}
		if prefix != "" && !strings.HasPrefix(nameKey(e.rec.Name), prefix) {
			continue
		}
		if p.Cursor != "" && e.rec.ID <= p.Cursor {
			continue
		}
		all = append(all, e.summary())
	}
	r.mu.Unlock()
	limit := protocol.MaxNodeListLimit
	if p.Paged() {
		sort.Slice(all, func(i, j int) bool { return all[i].NodeID < all[j].NodeID })
		if p.Limit > 0 {
			limit = p.Limit
		}
	} else {
		sort.Slice(all, func(i, j int) bool {
			a, b := nameKey(all[i].Name), nameKey(all[j].Name)
			if a != b {
				return a < b
			}
			return all[i].NodeID < all[j].NodeID
		})
	}
	out := protocol.NodeListResult{Nodes: all}
	n, used := 0, 0
	for n < len(all) && n < limit {
		b, err := json.Marshal(all[n])
		if err != nil || used+len(b)+1 > budget {
			break
		}
		used += len(b) + 1
		n++
	}
	if n < len(all) {
		out.Nodes = all[:n]
		if p.Paged() {
			if n > 0 {
				out.NextCursor = all[n-1].NodeID
			} else {
				out.NextCursor = p.Cursor // not reached: one entry always fits
			}
		} else {
			out.Truncated = true
		}
	}
	return out
}
