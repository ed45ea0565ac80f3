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
	json.Unmarshal(encodeResult("i1", protocol.PureRead("node.fs.list"), json.RawMessage(at), nil, limit, false), &r)
	if r.Error != nil || string(r.Result) != at {
		t.Fatalf("at limit: error %v", r.Error)
	}
	r = protocol.InvokeResult{}
	json.Unmarshal(encodeResult("i1", protocol.PureRead("node.fs.list"), json.RawMessage(`"`+fill+`a"`), nil, limit, false), &r)
	if r.Error == nil || r.Error.DomainCode() != protocol.DomainPayloadTooLarge || r.Result != nil {
		t.Fatalf("over limit: %+v", r)
	}
}

func TestEncodeResultJSONLimits(t *testing.T) {
	deep := strings.Repeat("[", protocol.MaxJSONDepth) + strings.Repeat("]", protocol.MaxJSONDepth)
	var r protocol.InvokeResult
	json.Unmarshal(encodeResult("i", protocol.PureRead("node.fs.list"), json.RawMessage(deep), nil, 1<<20, false), &r)
	if r.Error != nil {
		t.Fatalf("depth %d refused: %v", protocol.MaxJSONDepth, r.Error)
	}
	tooDeep := "[" + deep + "]"
	r = protocol.InvokeResult{}
	json.Unmarshal(encodeResult("i", protocol.PureRead("node.fs.list"), json.RawMessage(tooDeep), nil, 1<<20, false), &r)
	if r.Error == nil || r.Error.DomainCode() != protocol.DomainPayloadTooLarge {
		t.Fatalf("depth %d accepted", protocol.MaxJSONDepth+1)
	}
	items := "[" + strings.Repeat("1,", protocol.MaxJSONItems-1) + "1]"
	r = protocol.InvokeResult{}
	json.Unmarshal(encodeResult("i", protocol.PureRead("node.fs.list"), json.RawMessage(items), nil, 1<<20, false), &r)
	if r.Error != nil {
		t.Fatalf("%d items refused", protocol.MaxJSONItems)
	}
	r = protocol.InvokeResult{}
	json.Unmarshal(encodeResult("i", protocol.PureRead("node.fs.list"), json.RawMessage("[1,"+items[1:]), nil, 1<<20, false), &r)
	if r.Error == nil {
		t.Fatalf("%d items accepted", protocol.MaxJSONItems+1)
	}
	r = protocol.InvokeResult{}
	json.Unmarshal(encodeResult("i", protocol.PureRead("node.fs.list"), json.RawMessage(`{"a":`), nil, 1<<20, false), &r)
	if r.Error == nil || r.Error.Code != protocol.CodeInternal {
		t.Fatal("invalid JSON accepted")
	}
}

// maxResultBytes is the exact payload room of a result frame: a payload of
// that many bytes fits the limit, one more does not.
func TestMaxResultBytesBoundary(t *testing.T) {
	const limit = 65536
	for _, id := range []string{"i1", "inv-" + strings.Repeat("x", 200), "q\"\\"} {
		room := maxResultBytes(id, limit)
		at := `"` + strings.Repeat("a", room-2) + `"`
		var r protocol.InvokeResult
		json.Unmarshal(encodeResult(id, protocol.PureRead("node.fs.read"), json.RawMessage(at), nil, limit, false), &r)
		if r.Error != nil || len(r.Result) != room {
			t.Fatalf("id %q: a payload of maxResultBytes = %d refused: %v", id, room, r.Error)
		}
		r = protocol.InvokeResult{}
		json.Unmarshal(encodeResult(id, protocol.PureRead("node.fs.read"), json.RawMessage(`"a`+at[1:]), nil, limit, false), &r)
		if r.Error == nil || r.Error.DomainCode() != protocol.DomainPayloadTooLarge {
			t.Fatalf("id %q: a payload of %d bytes accepted", id, room+1)
		}
	}
}

// Every error framed after an effect says so: one made here from an
// undeliverable result, and one the dispatcher returned with flags that
// claim nothing happened. Without an effect the flags are left alone.
func TestEncodeResultAfterEffect(t *testing.T) {
	const limit = 4096
	big := json.RawMessage(`"` + strings.Repeat("a", limit) + `"`)
	limited := protocol.DomainError(protocol.CodeRateLimited, protocol.DomainRateLimited, "limit").WithRetry(true, false)
	flags := func(b json.RawMessage) (code string, retrySafe, mayHaveApplied bool) {
		t.Helper()
		var r protocol.InvokeResult
		if err := json.Unmarshal(b, &r); err != nil || r.Error == nil || r.Error.Details == nil ||
			r.Error.Details.RetrySafe == nil || r.Error.Details.MutationMayHaveApplied == nil {
			t.Fatalf("no error with flags: %s", b)
		}
		return r.Error.DomainCode(), *r.Error.Details.RetrySafe, *r.Error.Details.MutationMayHaveApplied
	}
	for _, c := range []struct {
		name            string
		method          string
		payload         json.RawMessage
		perr            *protocol.Error
		applied         bool
		code            string
		retry, applied2 bool
	}{
		{"too large after an effect", "node.process.run", big, nil, true, protocol.DomainPayloadTooLarge, false, true},
		{"too large without an effect, a read", "node.fs.read", big, nil, false, protocol.DomainPayloadTooLarge, true, false},
		{"dispatcher error after an effect", "node.process.run", nil, limited, true, protocol.DomainRateLimited, false, true},
		{"dispatcher error without an effect", "node.process.run", nil, limited, false, protocol.DomainRateLimited, true, false},
	} {
		code, retry, applied := flags(encodeResult("i1", protocol.PureRead(c.method), c.payload, c.perr, limit, c.applied))
		if code != c.code || retry != c.retry || applied != c.applied2 {
			t.Errorf("%s: %s retrySafe %v mutationMayHaveApplied %v, want %s %v %v",
				c.name, code, retry, applied, c.code, c.retry, c.applied2)
		}
	}
	if !*limited.Details.RetrySafe {
		t.Fatal("encodeResult modified the dispatcher's error")
	}
}

// A result that cannot be delivered says what happened to its work: a
// read without an effect may be retried and changed nothing, while after
// an effect the flags say so and the call must not be retried blindly.
func TestUndeliverableResultFlags(t *testing.T) {
	const limit = 4096
	big := json.RawMessage(`"` + strings.Repeat("a", limit) + `"`)
	deep := json.RawMessage(strings.Repeat("[", protocol.MaxJSONDepth+1) + strings.Repeat("]", protocol.MaxJSONDepth+1))
	longErr := protocol.Errorf(protocol.CodeInternal, "%s", strings.Repeat("m", limit))
	for _, c := range []struct {
		method        string
		payload       json.RawMessage
		perr          *protocol.Error
		applied       bool
		retry, mutate bool
	}{
		{"node.fs.list", big, nil, false, true, false},
		{"node.fs.read", deep, nil, false, true, false},
		{"node.fs.stat", json.RawMessage(`{"a":`), nil, false, true, false},
		{"node.host.info", nil, longErr, false, true, false},
		{"node.fs.write", big, nil, true, false, true},
		{"node.fs.move", deep, nil, true, false, true},
		{"node.process.run", nil, longErr, true, false, true},
		{"node.process.run", big, nil, false, false, false},
		{"node.fs.write", nil, protocol.Errorf(protocol.CodeInternal, "%s", strings.Repeat("m", limit)).WithRetry(true, false), false, true, false},
	} {
		var r protocol.InvokeResult
		if err := json.Unmarshal(encodeResult("i", protocol.PureRead(c.method), c.payload, c.perr, limit, c.applied), &r); err != nil {
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
