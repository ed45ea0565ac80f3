package protocol

import "testing"

// operator.pairing requests and exchanges; deciding and listing need
// operator.approvals, which operator.admin implies and operator.pairing
// does not.
func TestPairingScopeRules(t *testing.T) {
	for method, want := range map[string]string{
		MethodPairRequest:      ScopePairing,
		MethodConnectChallenge: ScopePairing,
		MethodPairApprove:      ScopeApprovals,
		MethodPairReject:       ScopeApprovals,
		MethodPairList:         ScopeApprovals,
	} {
		if got, ok := RequiredScope(method); !ok || got != want {
			t.Errorf("%s: scope %q (%v), want %q", method, got, ok, want)
		}
	}
	if HasScope([]string{ScopePairing}, ScopeApprovals) {
		t.Error("operator.pairing implies operator.approvals")
	}
	if !HasScope([]string{ScopeAdmin}, ScopeApprovals) {
		t.Error("operator.admin does not imply operator.approvals")
	}
}
