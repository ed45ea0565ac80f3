package protocol

import "encoding/json"

// Fan-out: one operator request runs one node method on many nodes
// (docs/PROTOCOL.md, "Fan-out").
const (
	// MethodNodeFanout is the fan-out request (scope operator.read, plus
	// the inner method's scope).
	MethodNodeFanout = "node.fanout"
	// EventFanoutResult carries one node's outcome of a fan-out.
	EventFanoutResult = "node.fanout.result"
)

// Bounds of a fan-out.
const (
	// DefaultMaxFanoutNodes is the default most nodes one fan-out reaches
	// (the controller's Config.MaxFanoutNodes).
	DefaultMaxFanoutNodes = 10000
	// MaxFanoutConcurrency is the most node calls one fan-out has in
	// flight; DefaultFanoutConcurrency is used when the request names none.
	MaxFanoutConcurrency     = 1024
	DefaultFanoutConcurrency = 256
	// DefaultMaxFanoutsPerConn is the default most fan-outs one operator
	// connection runs at once (Config.MaxFanoutsPerConn).
	DefaultMaxFanoutsPerConn = 4
)

// Domain codes of fan-out refusals.
const (
	// DomainFanoutTooLarge: the selection holds more nodes than the
	// controller's fan-out bound. Nothing was sent.
	DomainFanoutTooLarge = "fanout_too_large"
	// DomainTooManyFanouts: the connection already runs the most fan-outs
	// at once (retrySafe).
	DomainTooManyFanouts = "too_many_fanouts"
	// DomainFanoutNeedsApproval: the operator's policy holds the method for
	// approval, which a fan-out does not wait for. Nothing was sent.
	DomainFanoutNeedsApproval = "fanout_approval_required"
)

// NodeFilter selects nodes as node.list's filters do: NamePrefix
// (case-insensitive) and Online; an empty filter selects every node.
type NodeFilter struct {
	NamePrefix string `json:"namePrefix,omitempty"`
	Online     *bool  `json:"online,omitempty"`
}

// FanoutParams are the params of node.fanout: Method is a node method,
// Args its params without nodeId (the controller adds each node's);
// exactly one of NodeIDs (1..max distinct ids) and Filter selects the
// nodes. Concurrency is 1..MaxFanoutConcurrency (default
// DefaultFanoutConcurrency).
type FanoutParams struct {
	Method      string          `json:"method"`
	Args        json.RawMessage `json:"args,omitempty"`
	NodeIDs     []string        `json:"nodeIds,omitempty"`
	Filter      *NodeFilter     `json:"filter,omitempty"`
	Concurrency int             `json:"concurrency,omitempty"`
}

// ValidateFanout checks node.fanout params strictly; maxNodes bounds
// NodeIDs.
func ValidateFanout(params json.RawMessage, maxNodes int) (FanoutParams, *Error) {
	var p FanoutParams
	if e := DecodeParams(params, &p); e != nil {
		return p, e
	}
	if p.Method == "" || len(p.Method) > 128 {
		return p, InvalidParams("method", "method is required (at most 128 bytes)")
	}
	if (p.NodeIDs == nil) == (p.Filter == nil) {
		return p, InvalidParams("nodeIds", "exactly one of nodeIds and filter is required")
	}
	if p.NodeIDs != nil {
		if len(p.NodeIDs) == 0 {
			return p, InvalidParams("nodeIds", "nodeIds must not be empty")
		}
		if len(p.NodeIDs) > maxNodes {
			e := DomainError(CodeInvalidParams, DomainFanoutTooLarge, "more nodes than one fan-out may reach")
			e.Details.Field = "nodeIds"
			return p, e.WithRetry(false, false)
		}
		seen := make(map[string]bool, len(p.NodeIDs))
		for _, id := range p.NodeIDs {
			if RequireNodeID(id) != nil {
				return p, InvalidParams("nodeIds", "a nodeId is malformed")
			}
			if seen[id] {
				return p, InvalidParams("nodeIds", "a nodeId is listed twice")
			}
			seen[id] = true
		}
	}
	if p.Filter != nil && p.Filter.NamePrefix != "" {
		if _, e := ValidateNodeList(mustMarshal(NodeListParams{NamePrefix: p.Filter.NamePrefix})); e != nil {
			return p, InvalidParams("filter.namePrefix", "namePrefix must be 1 to 128 bytes without control characters")
		}
	}
	if p.Concurrency < 0 || p.Concurrency > MaxFanoutConcurrency {
		return p, InvalidParams("concurrency", "concurrency must be 1 to 1024")
	}
	if p.Concurrency == 0 {
		p.Concurrency = DefaultFanoutConcurrency
	}
	return p, nil
}

func mustMarshal(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// FanoutResult is the payload of event node.fanout.result: one node's
// outcome. RequestID is the node.fanout request's id. Exactly one of
// Result (OK) and Error is set. RetrySafe and MutationMayHaveApplied are
// this node's outcome flags: on an error those of its details; on a
// success true/false for a pure read and false/true for anything else.
type FanoutResult struct {
	RequestID              string          `json:"requestId"`
	FanoutID               string          `json:"fanoutId"`
	NodeID                 string          `json:"nodeId"`
	Name                   string          `json:"name,omitempty"`
	OK                     bool            `json:"ok"`
	Result                 json.RawMessage `json:"result,omitempty"`
	Error                  *Error          `json:"error,omitempty"`
	RetrySafe              bool            `json:"retrySafe"`
	MutationMayHaveApplied bool            `json:"mutationMayHaveApplied"`
}

// FanoutSummary is the payload answering node.fanout once every selected
// node has its event: Total nodes selected, OK and Failed among them.
type FanoutSummary struct {
	FanoutID   string `json:"fanoutId"`
	Method     string `json:"method"`
	Total      int    `json:"total"`
	OK         int    `json:"ok"`
	Failed     int    `json:"failed"`
	DurationMs int64  `json:"durationMs"`
}
