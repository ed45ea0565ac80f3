package controller

import (
	"bytes"
	"encoding/json"
	"sort"

	"lemon/protocol"
)

// controllerMethods are the operator methods the controller serves itself,
// with the scope each needs (the same as protocol.RequiredScope). A
// joining host's operator.pairing can request and poll a pairing but not
// decide one (docs/THREAT_MODEL.md).
var controllerMethods = map[string]string{
	protocol.MethodNodeList:         protocol.ScopeRead,
	protocol.MethodNodeDescribe:     protocol.ScopeRead,
	protocol.MethodNodeInvoke:       protocol.ScopeAdmin,
	protocol.MethodNodeFanout:       protocol.ScopeRead, // plus the inner method's scope
	protocol.MethodNodeRename:       protocol.ScopeWrite,
	protocol.MethodModulesStatus:    protocol.ScopeRead,
	protocol.MethodPairRequest:      protocol.ScopePairing,
	protocol.MethodPairApprove:      protocol.ScopeApprovals,
	protocol.MethodPairReject:       protocol.ScopeApprovals,
	protocol.MethodPairList:         protocol.ScopeApprovals,
	protocol.MethodConnectChallenge: protocol.ScopePairing,
	protocol.MethodApprovalList:     protocol.ScopeApprovals,
	protocol.MethodApprovalDecide:   protocol.ScopeApprovals,
}

// statusOverhead is kept free in a node.modules.status response for the
// frame envelope around the payload.
const statusOverhead = 1024

// nodeOnlyMethods are requests only a node session may send.
var nodeOnlyMethods = map[string]bool{
	protocol.MethodInvokeResult:    true,
	protocol.MethodModulesManifest: true,
	protocol.MethodModulesFetch:    true,
}

// operatorMethods lists what an operator can call, for hello-ok.
func (s *Server) operatorMethods() []string {
	out := make([]string, 0, len(controllerMethods))
	for m := range controllerMethods {
		out = append(out, m)
	}
	out = append(out, s.routes().names()...)
	sort.Strings(out)
	return out
}

// requireScope answers FORBIDDEN unless the connection holds scope; an
// empty scope (a protocol method without a scope rule) is always refused.
func (c *conn) requireScope(id, scope string) bool {
	if scope == "" {
		c.respondErr(id, protocol.Errorf(protocol.CodeForbidden, "this method has no scope rule and is refused"))
		return false
	}
	if protocol.HasScope(c.scopes, scope) {
		return true
	}
	c.respondErr(id, protocol.Errorf(protocol.CodeForbidden, "this method requires scope %s", scope))
	return false
}

// handleOperatorRequest serves one request of a connected operator. ec is
// the req frame's executionContext (docs/POLICY.md, "Narrowing a
// request's context"), or nil.
func (c *conn) handleOperatorRequest(id, method string, params, ec json.RawMessage) {
	if scope, ok := controllerMethods[method]; ok {
		if !c.requireScope(id, scope) {
			return
		}
		if !c.authorizeController(id, method, ec) {
			return
		}
		switch method {
		case protocol.MethodApprovalList:
			var p protocol.ApprovalListParams
			if e := protocol.DecodeParams(params, &p); e != nil {
				c.respondErr(id, e)
				return
			}
			res, e := c.s.approvals.list()
			c.reply(id, res, e)
		case protocol.MethodApprovalDecide:
			var p protocol.ApprovalDecideParams
			if e := protocol.DecodeParams(params, &p); e != nil {
				c.respondErr(id, e)
				return
			}
			res, e := c.s.approvals.decide(c, p)
			c.reply(id, res, e)
		case protocol.MethodNodeList:
			p, e := protocol.ValidateNodeList(params)
			if e != nil {
				c.respondErr(id, e)
				return
			}
			c.respond(id, c.s.reg.nodeList(p, c.replyBudget()-nodeListOverhead))
		case protocol.MethodNodeDescribe:
			var p protocol.NodeDescribeParams
			if e := protocol.DecodeParams(params, &p); e != nil {
				c.respondErr(id, e)
				return
			}
			if e := protocol.RequireNodeID(p.NodeID); e != nil {
				c.respondErr(id, e)
				return
			}
			d, e := c.s.reg.describe(p.NodeID)
			if e != nil {
				c.respondErr(id, e)
				return
			}
			c.respond(id, d)
		case protocol.MethodNodeInvoke:
			c.genericInvoke(id, params, ec)
		case protocol.MethodNodeFanout:
			c.handleFanout(id, params, ec)
		case protocol.MethodModulesStatus:
			var p protocol.ModulesStatusParams
			if e := protocol.DecodeParams(params, &p); e != nil {
				c.respondErr(id, e)
				return
			}
			c.respond(id, c.s.reg.modulesStatus(c.replyBudget()-statusOverhead))
		default:
			c.handlePairing(id, method, params)
		}
		return
	}
	if nodeOnlyMethods[method] {
		c.respondErr(id, protocol.Errorf(protocol.CodeForbidden, "this method is for node sessions"))
		return
	}
	spec, ok := c.s.routes()[method]
	if !ok {
		c.respondErr(id, protocol.Errorf(protocol.CodeMethodNotFound, "unknown method"))
		return
	}
	if !c.requireScope(id, spec.Scope) {
		return
	}
	c.routeNodeMethod(id, spec, params, ec)
}

// replyBudget is the largest frame this connection's peer accepts: the
// controller's maxPayload, or the peer's when smaller.
func (c *conn) replyBudget() int {
	limit := c.s.cfg.MaxPayload
	if c.peerMax > 0 {
		limit = min(limit, c.peerMax)
	}
	return limit
}

// routes is the current route table: the pinned set's declarations, or
// protocol's methods when no set is pinned.
func (s *Server) routes() methodTable {
	if ms := s.modules.Load(); ms != nil {
		return ms.table
	}
	return s.protoTable
}

// genericInvoke serves node.invoke {nodeId, method, args}: args are the
// inner method's params; nodeId is added to them when absent and must
// match when present. Methods marked NoGenericInvoke are refused.
func (c *conn) genericInvoke(id string, params, ec json.RawMessage) {
	var p protocol.NodeInvokeParams
	if e := protocol.DecodeParams(params, &p); e != nil {
		c.respondErr(id, e)
		return
	}
	if e := protocol.RequireNodeID(p.NodeID); e != nil {
		c.respondErr(id, e)
		return
	}
	if p.Method == "" {
		c.respondErr(id, protocol.InvalidParams("method", "method is required"))
		return
	}
	spec, ok := c.s.routes()[p.Method]
	if !ok {
		c.respondErr(id, protocol.InvalidParams("method", "method is not a node method the pinned set declares"))
		return
	}
	if spec.NoGenericInvoke {
		c.respondErr(id, protocol.DomainError(protocol.CodeForbidden, protocol.DomainGenericInvokeRefused,
			"this method cannot be called through node.invoke; call it directly"))
		return
	}
	if !c.requireScope(id, spec.Scope) {
		return
	}
	args, fields, e := argsObject(p.Args)
	if e != nil {
		c.respondErr(id, e)
		return
	}
	if raw, ok := fields["nodeId"]; ok {
		var inner string
		if json.Unmarshal(raw, &inner) != nil || inner != p.NodeID {
			c.respondErr(id, protocol.InvalidParams("args.nodeId", "args.nodeId must equal nodeId"))
			return
		}
	} else {
		nid, _ := json.Marshal(p.NodeID)
		// Prepend nodeId to the object without reordering the caller's fields.
		rest := bytes.TrimSpace(args[1:])
		var b bytes.Buffer
		b.WriteString(`{"nodeId":`)
		b.Write(nid)
		if len(rest) > 0 && rest[0] != '}' {
			b.WriteByte(',')
		}
		b.Write(rest)
		args = b.Bytes()
	}
	c.routeNodeMethod(id, spec, args, ec)
}

// argsObject reads the args of node.invoke and node.fanout: absent or
// null is {}, anything but a JSON object is INVALID_PARAMS naming args.
// It returns the args and their top-level members.
func argsObject(raw json.RawMessage) (json.RawMessage, map[string]json.RawMessage, *protocol.Error) {
	args := bytes.TrimSpace(raw)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	var fields map[string]json.RawMessage
	if args[0] != '{' || json.Unmarshal(args, &fields) != nil {
		return nil, nil, protocol.InvalidParams("args", "args must be a JSON object")
	}
	return args, fields, nil
}

// handleNodeRequest serves one request of a connected node.
func (c *conn) handleNodeRequest(id, method string, params json.RawMessage, frameLen int) {
	switch method {
	case protocol.MethodInvokeResult:
		c.handleInvokeResult(id, params, frameLen)
	case protocol.MethodModulesManifest:
		c.handleModulesManifest(id, params)
	case protocol.MethodModulesFetch:
		c.handleModulesFetch(id, params)
	default:
		if _, ok := controllerMethods[method]; ok {
			c.respondErr(id, protocol.Errorf(protocol.CodeForbidden, "node sessions hold no operator scopes"))
			return
		}
		if _, ok := c.s.routes()[method]; ok {
			c.respondErr(id, protocol.Errorf(protocol.CodeForbidden, "node sessions hold no operator scopes"))
			return
		}
		c.respondErr(id, protocol.Errorf(protocol.CodeMethodNotFound, "unknown method"))
	}
}
