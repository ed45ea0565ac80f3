package host_test

import (
	"context"
	"encoding/json"
	"testing"

	"lemon/host"
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
		_, perr := f.h.Invoke(context.Background(), protocol.InvokeRequest{Method: "test.ping", Args: json.RawMessage(`{}`),
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
	// Well-formed contexts: a list narrows, an object without the key or
	// an absent context does not.
	for ec, ok := range map[string]bool{
		`{"capabilities":["hostinfo"]}`: true,
		`{"capabilities":["read"]}`:     false,
		`{"capabilities":[]}`:           false,
		`{"runId":"r1"}`:                true,
		``:                              true,
		`null`:                          true,
	} {
		perr := invoke(ec)
		if (perr == nil) != ok {
			t.Errorf("context %q: %v, want ok=%v", ec, perr, ok)
		}
		if !ok && (perr == nil || perr.DomainCode() != protocol.DomainCapabilityDenied) {
			t.Errorf("context %q: %v, want capability_denied", ec, perr)
		}
	}
}
