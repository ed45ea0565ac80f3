package controller

import (
	"encoding/json"
	"testing"

	"lemon/protocol"
)

// TestAdv3ApprovalUnknownNode: a held method called for a node the
// controller does not know is refused NOT_FOUND before it is held (it
// would be refused after approval anyway, and docs/POLICY.md promises an
// approver never sees a request that would be refused), and a nodeId
// holding a control character (an escape that would reach the approver's
// `lemon approvals` table) is INVALID_PARAMS.
func TestAdv3ApprovalUnknownNode(t *testing.T) {
	s := startServer(t, authorityConfig(t))
	authorityNode(t, s.url)
	ask := connectOperator(t, s.url, askToken)
	approver := connectOperator(t, s.url, apprToken)
	wantError(t, ask.call("node.fs.write", writeParams("node-0123456789abcdef0123456789abcdef", "aGk=")),
		protocol.CodeNotFound, "")
	wantError(t, ask.call("node.fs.write", writeParams("n\x1b[1Ax", "aGk=")), protocol.CodeInvalidParams, "")
	var list protocol.ApprovalListResult
	f := approver.call(protocol.MethodApprovalList, nil)
	if json.Unmarshal(f.Payload, &list) != nil || len(list.Approvals) != 0 {
		t.Fatalf("held: %s", f.raw)
	}
}
