package worker

import (
	"encoding/json"
	"strings"
	"testing"

	"lemon/protocol"
)

// encodeResult keeps a result whose request frame is exactly the limit and
// turns one byte more into a payload_too_large error.
func TestEncodeResultMaxPayloadBoundary(t *testing.T) {
	const limit = 4096
	frame := func(payload string) int {
		b, _ := json.Marshal(protocol.InvokeResult{InvokeID: "i1", Result: json.RawMessage(payload)})
		return len(b) + resultFrameOverhead
	}
	fill := strings.Repeat("a", limit-frame(`""`))
	at := `"` + fill + `"`
	if frame(at) != limit {
		t.Fatalf("fixture frame = %d", frame(at))
	}
	var r protocol.InvokeResult
	json.Unmarshal(encodeResult("i1", "node.fs.list", json.RawMessage(at), nil, limit), &r)
	if r.Error != nil || string(r.Result) != at {
		t.Fatalf("at limit: error %v", r.Error)
	}
	r = protocol.InvokeResult{}
	json.Unmarshal(encodeResult("i1", "node.fs.list", json.RawMessage(`"`+fill+`a"`), nil, limit), &r)
	if r.Error == nil || r.Error.DomainCode() != protocol.DomainPayloadTooLarge || r.Result != nil {
		t.Fatalf("over limit: %+v", r)
	}
}

func TestEncodeResultJSONLimits(t *testing.T) {
	deep := strings.Repeat("[", protocol.MaxJSONDepth) + strings.Repeat("]", protocol.MaxJSONDepth)
	var r protocol.InvokeResult
	json.Unmarshal(encodeResult("i", "node.fs.list", json.RawMessage(deep), nil, 1<<20), &r)
	if r.Error != nil {
		t.Fatalf("depth %d refused: %v", protocol.MaxJSONDepth, r.Error)
	}
	tooDeep := "[" + deep + "]"
	r = protocol.InvokeResult{}
	json.Unmarshal(encodeResult("i", "node.fs.list", json.RawMessage(tooDeep), nil, 1<<20), &r)
	if r.Error == nil || r.Error.DomainCode() != protocol.DomainPayloadTooLarge {
		t.Fatalf("depth %d accepted", protocol.MaxJSONDepth+1)
	}
	items := "[" + strings.Repeat("1,", protocol.MaxJSONItems-1) + "1]"
	r = protocol.InvokeResult{}
	json.Unmarshal(encodeResult("i", "node.fs.list", json.RawMessage(items), nil, 1<<20), &r)
	if r.Error != nil {
		t.Fatalf("%d items refused", protocol.MaxJSONItems)
	}
	r = protocol.InvokeResult{}
	json.Unmarshal(encodeResult("i", "node.fs.list", json.RawMessage("[1,"+items[1:]), nil, 1<<20), &r)
	if r.Error == nil {
		t.Fatalf("%d items accepted", protocol.MaxJSONItems+1)
	}
	r = protocol.InvokeResult{}
	json.Unmarshal(encodeResult("i", "node.fs.list", json.RawMessage(`{"a":`), nil, 1<<20), &r)
	if r.Error == nil || r.Error.Code != protocol.CodeInternal {
		t.Fatal("invalid JSON accepted")
	}
}

// A result that cannot be delivered says what happened to its work: the
// method ran, so a read may be retried and changed nothing, while a
// mutation's effect happened and must not be retried blindly.
func TestUndeliverableResultFlags(t *testing.T) {
	const limit = 4096
	big := json.RawMessage(`"` + strings.Repeat("a", limit) + `"`)
	deep := json.RawMessage(strings.Repeat("[", protocol.MaxJSONDepth+1) + strings.Repeat("]", protocol.MaxJSONDepth+1))
	longErr := protocol.Errorf(protocol.CodeInternal, "%s", strings.Repeat("m", limit))
	for _, c := range []struct {
		method        string
		payload       json.RawMessage
		perr          *protocol.Error
		retry, mutate bool
	}{
		{"node.fs.list", big, nil, true, false},
		{"node.fs.read", deep, nil, true, false},
		{"node.fs.stat", json.RawMessage(`{"a":`), nil, true, false},
		{"node.host.info", nil, longErr, true, false},
		{"node.fs.write", big, nil, false, true},
		{"node.fs.move", deep, nil, false, true},
		{"node.process.run", nil, longErr, false, true},
		{"node.fs.write", nil, protocol.Errorf(protocol.CodeInternal, "%s", strings.Repeat("m", limit)).WithRetry(true, false), true, false},
	} {
		var r protocol.InvokeResult
		if err := json.Unmarshal(encodeResult("i", c.method, c.payload, c.perr, limit), &r); err != nil {
			t.Fatal(err)
		}
		if r.Error == nil || r.Error.Details == nil || r.Error.Details.RetrySafe == nil || r.Error.Details.MutationMayHaveApplied == nil {
			t.Errorf("%s: error %+v has no outcome flags", c.method, r.Error)
			continue
		}
		if *r.Error.Details.RetrySafe != c.retry || *r.Error.Details.MutationMayHaveApplied != c.mutate {
			t.Errorf("%s: retrySafe %v mutationMayHaveApplied %v, want %v %v", c.method,
				*r.Error.Details.RetrySafe, *r.Error.Details.MutationMayHaveApplied, c.retry, c.mutate)
		}
	}
}
