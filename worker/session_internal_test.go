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
	json.Unmarshal(encodeResult("i1", json.RawMessage(at), nil, limit), &r)
	if r.Error != nil || string(r.Result) != at {
		t.Fatalf("at limit: error %v", r.Error)
	}
	r = protocol.InvokeResult{}
	json.Unmarshal(encodeResult("i1", json.RawMessage(`"`+fill+`a"`), nil, limit), &r)
	if r.Error == nil || r.Error.DomainCode() != protocol.DomainPayloadTooLarge || r.Result != nil {
		t.Fatalf("over limit: %+v", r)
	}
}

func TestEncodeResultJSONLimits(t *testing.T) {
	deep := strings.Repeat("[", protocol.MaxJSONDepth) + strings.Repeat("]", protocol.MaxJSONDepth)
	var r protocol.InvokeResult
	json.Unmarshal(encodeResult("i", json.RawMessage(deep), nil, 1<<20), &r)
	if r.Error != nil {
		t.Fatalf("depth %d refused: %v", protocol.MaxJSONDepth, r.Error)
	}
	tooDeep := "[" + deep + "]"
	r = protocol.InvokeResult{}
	json.Unmarshal(encodeResult("i", json.RawMessage(tooDeep), nil, 1<<20), &r)
	if r.Error == nil || r.Error.DomainCode() != protocol.DomainPayloadTooLarge {
		t.Fatalf("depth %d accepted", protocol.MaxJSONDepth+1)
	}
	items := "[" + strings.Repeat("1,", protocol.MaxJSONItems-1) + "1]"
	r = protocol.InvokeResult{}
	json.Unmarshal(encodeResult("i", json.RawMessage(items), nil, 1<<20), &r)
	if r.Error != nil {
		t.Fatalf("%d items refused", protocol.MaxJSONItems)
	}
	r = protocol.InvokeResult{}
	json.Unmarshal(encodeResult("i", json.RawMessage("[1,"+items[1:]), nil, 1<<20), &r)
	if r.Error == nil {
		t.Fatalf("%d items accepted", protocol.MaxJSONItems+1)
	}
	r = protocol.InvokeResult{}
	json.Unmarshal(encodeResult("i", json.RawMessage(`{"a":`), nil, 1<<20), &r)
	if r.Error == nil || r.Error.Code != protocol.CodeInternal {
		t.Fatal("invalid JSON accepted")
	}
}
