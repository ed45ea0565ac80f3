package controller

import (
	"testing"

	"lemon/protocol"
)

// A transfer to a node another controller holds names that controller by
// its cluster name, and has no resume hint (nothing was sent).
func TestTransferNotRoutedNamesHolder(t *testing.T) {
	e := transferNotRouted("ctl-b")
	if got := e.Error(); got != `UNAVAILABLE (transfer_not_routed): this node's socket is held by controller "ctl-b" of the cluster: run the transfer through that controller` {
		t.Fatalf("got %q", got)
	}
	if e.DomainCode() != protocol.DomainTransferNotRouted || e.Details.RetrySafe == nil || !*e.Details.RetrySafe {
		t.Fatalf("flags: %+v", e.Details)
	}
	if got := transferNotRouted("").Error(); got != "UNAVAILABLE (transfer_not_routed): this node's socket is held by another controller of the cluster: run the transfer through that controller" {
		t.Fatalf("unknown holder: %q", got)
	}
}
