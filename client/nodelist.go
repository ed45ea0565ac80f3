package client

import (
	"context"
	"encoding/json"
	"sort"
	"strings"

	"lemon/protocol"
)

// MaxListedNodes bounds what ListNodes gathers (pages of
// protocol.MaxNodeListLimit), so a misbehaving controller cannot make it
// loop or grow without end.
const MaxListedNodes = 1_000_000

// ListNodes returns every node matching filter's NamePrefix and Online,
// paging through node.list (docs/PROTOCOL.md, "Node registry"), sorted
// by name then nodeId. filter's Cursor and Limit are ignored. A
// controller that predates paging (it refuses the limit param with
// INVALID_PARAMS) is asked once without paging params. Errors are the
// first failed call's; a page that does not advance the cursor, or more
// than MaxListedNodes nodes, ends the walk with INTERNAL_ERROR.
func (c *Conn) ListNodes(ctx context.Context, filter protocol.NodeListParams) ([]protocol.NodeSummary, *protocol.Error) {
	p := protocol.NodeListParams{Limit: protocol.MaxNodeListLimit, NamePrefix: filter.NamePrefix, Online: filter.Online}
	var out []protocol.NodeSummary
	for {
		raw, perr := c.Call(ctx, protocol.MethodNodeList, p)
		if perr != nil {
			if p.Cursor == "" && perr.Code == protocol.CodeInvalidParams && perr.Details != nil && perr.Details.Field == "limit" {
				raw, perr = c.Call(ctx, protocol.MethodNodeList, protocol.NodeListParams{})
				if perr != nil {
					return nil, perr
				}
				var r protocol.NodeListResult
				if json.Unmarshal(raw, &r) != nil {
					return nil, protocol.Errorf(protocol.CodeInternal, "malformed node.list payload")
				}
				return r.Nodes, nil
			}
			return nil, perr
		}
		var r protocol.NodeListResult
		if json.Unmarshal(raw, &r) != nil {
			return nil, protocol.Errorf(protocol.CodeInternal, "malformed node.list payload")
		}
		out = append(out, r.Nodes...)
		if len(out) > MaxListedNodes {
			return nil, protocol.Errorf(protocol.CodeInternal, "node.list returned too many nodes")
		}
		if r.NextCursor == "" {
			break
		}
		if r.NextCursor <= p.Cursor {
			return nil, protocol.Errorf(protocol.CodeInternal, "node.list cursor did not advance")
		}
		p.Cursor = r.NextCursor
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := strings.ToLower(out[i].Name), strings.ToLower(out[j].Name)
		if a != b {
			return a < b
		}
		return out[i].NodeID < out[j].NodeID
	})
	return out, nil
}
