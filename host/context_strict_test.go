package host_test

import (
	"context"
	"encoding/json"
	"testing"

	"lemon/host"
	"lemon/host/hosttest"
	"lemon/protocol"
)

// Regression: the execution context was read with encoding/json, so an
// ambiguous context was honoured instead of refused as malformed: with a
// repeated "capabilities" key the last list won (one that a reader taking
// the first would have narrowed), a case variant was matched to it, and
// "capabilities": null meant no restriction at all.
func TestAmbiguousExecutionContextRefused(t *testing.T) {
	f := newFixture(t, host.Config{})
	invoke := func(ec string) *protocol.Error {
		_, perr := f.h.Invoke(context.Background(), protocol.InvokeRequest{InvokeID: "i-strict", Method: "test.ping", Args: json.RawMessage(`{}`),
			ExecutionContext: json.RawMessage(ec)})
		return perr
	}
	for _, ec := range []string{
		`{"capabilities":["write"],"capabilities":["hostinfo"]}`,
		`{"Capabilities":["hostinfo"]}`,
		`{"capabilities":["hostinfo"],"CAPABILITIES":["write"]}`,
		`{"capabilities":null}`,
		`{"capabilities":"hostinfo"}`,
		`["hostinfo"]`,
	} {
		perr := invoke(ec)
		if perr == nil || perr.Code != protocol.CodeInvalidParams || perr.Details == nil || perr.Details.Field != "executionContext" {
			t.Errorf("context %s: %v, want INVALID_PARAMS executionContext", ec, perr)
		}
	}
	// A context must be a whole v1 context now: a bare capability list is
	// malformed too.
	for _, ec := range []string{`{"capabilities":["hostinfo"]}`, `{"runId":"r1"}`} {
		if perr := invoke(ec); perr == nil || perr.Code != protocol.CodeInvalidParams {
			t.Errorf("context %s: %v, want INVALID_PARAMS", ec, perr)
		}
	}
	// Well-formed contexts: a list narrows; an absent context does not.
	for _, c := range []struct {
		ec string
		ok bool
	}{
		{string(hosttest.Context(t, "i-strict", "hostinfo")), true},
		{string(hosttest.Context(t, "i-strict", "read")), false},
		{string(hosttest.Context(t, "i-strict")), false},
		{``, true},
		{`null`, true},
	} {
		perr := invoke(c.ec)
		if (perr == nil) != c.ok {
			t.Errorf("context %q: %v, want ok=%v", c.ec, perr, c.ok)
		}
		if !c.ok && (perr == nil || perr.DomainCode() != protocol.DomainCapabilityDenied) {
			t.Errorf("context %q: %v, want capability_denied", c.ec, perr)
		}
	}
}
