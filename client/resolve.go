package client

import (
	"context"

	"lemon/protocol"
)

// DomainNodeNameAmbiguous is the details.code of ResolveNode's error when
// more than one node carries the name given.
const DomainNodeNameAmbiguous = "node_name_ambiguous"

// ResolveNode turns s, a nodeId or a node name, into a nodeId with one
// node.list walk (ListNodes; README.md, "CLI"): a node whose nodeId is s wins;
// else the one node named s; else s unchanged, so the method called with
// it answers NOT_FOUND as for any unknown nodeId. Two or more nodes named
// s give INVALID_PARAMS on nodeId with details.code node_name_ambiguous
// (the message names neither the nodes nor the name). When node.list is
// refused (a token without operator.read) or its answer is unreadable, s
// is returned unchanged: it can still be a nodeId. A cancelled ctx is
// returned as the call's error.
func (c *Conn) ResolveNode(ctx context.Context, s string) (string, *protocol.Error) {
	nodes, perr := c.ListNodes(ctx, protocol.NodeListParams{})
	if perr != nil {
		if ctx.Err() != nil {
			return s, perr
		}
		return s, nil
	}
	var byName []string
	for _, n := range nodes {
		if n.NodeID == s {
			return s, nil
		}
		if n.Name == s {
			byName = append(byName, n.NodeID)
		}
	}
	switch len(byName) {
	case 0:
		return s, nil
	case 1:
		return byName[0], nil
	}
	e := protocol.DomainError(protocol.CodeInvalidParams, DomainNodeNameAmbiguous,
		"more than one node has this name: give the nodeId ('lemon nodes' lists them)")
	e.Details.Field = "nodeId"
	return s, e.WithRetry(true, false)
}
