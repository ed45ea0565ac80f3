package protocol

import (
	"encoding/json"
	"strconv"
)

// Frame codec: reading and writing the frames of frames.go without
// walking large raw values more than once (see rawjson.go).
//
// The Decode functions take the members of a frame or payload already
// split by SplitObject from valid JSON (a frame that passed
// CheckJSONLimits) and give exactly the result and the error outcome of
// json.Unmarshal into the struct (see decodeMembers), except that
// json.RawMessage fields alias the input. The Append functions write
// exactly the bytes json.Marshal writes for the struct, provided every raw
// value is valid JSON; a raw value that needs compaction or escaping goes
// through encoding/json, whose error they return.

// DecodeEnvelope reads type, id, method and event.
func DecodeEnvelope(ms []Member) (Envelope, error) {
	var e Envelope
	err := decodeMembers(ms, []binding{{"type", &e.Type}, {"id", &e.ID}, {"method", &e.Method}, {"event", &e.Event}})
	return e, err
}

// DecodeRequest reads a req frame.
func DecodeRequest(ms []Member) (Request, error) {
	var r Request
	err := decodeMembers(ms, []binding{{"type", &r.Type}, {"id", &r.ID}, {"method", &r.Method}, {"params", &r.Params},
		{"executionContext", &r.ExecutionContext}})
	return r, err
}

// DecodeResponse reads a res frame.
func DecodeResponse(ms []Member) (Response, error) {
	var r Response
	err := decodeMembers(ms, []binding{{"type", &r.Type}, {"id", &r.ID}, {"ok", &r.OK},
		{"payload", &r.Payload}, {"error", &r.Error}})
	return r, err
}

// DecodeEvent reads an event frame.
func DecodeEvent(ms []Member) (Event, error) {
	var e Event
	err := decodeMembers(ms, []binding{{"type", &e.Type}, {"event", &e.Event}, {"seq", &e.Seq}, {"payload", &e.Payload}})
	return e, err
}

// ParseInvokeRequest reads the payload of node.invoke.request as
// json.Unmarshal into InvokeRequest would (Args and ExecutionContext alias
// payload). payload must be valid JSON; one that is not an object is an
// error.
func ParseInvokeRequest(payload []byte) (InvokeRequest, error) {
	var r InvokeRequest
	ms, err := SplitObject(payload)
	if err != nil {
		return r, err
	}
	err = decodeMembers(ms, []binding{{"invokeId", &r.InvokeID}, {"nodeId", &r.NodeID}, {"method", &r.Method},
		{"args", &r.Args}, {"timeoutMs", &r.TimeoutMs}, {"sessionGeneration", &r.SessionGeneration},
		{"executionContext", &r.ExecutionContext}})
	return r, err
}

// LookupMember returns the value encoding/json would decode into a struct
// field named name: that of the last member whose key matches name exactly
// or case-insensitively (bytes.EqualFold). ok is false when none matches.
func LookupMember(ms []Member, name string) (value []byte, ok bool) {
	bs := []binding{{name: name}}
	for _, m := range ms {
		if matchBinding(m.Key, bs) != nil {
			value, ok = m.Value, true
		}
	}
	return value, ok
}

// frameOverhead is room for a frame's fixed fields around its raw value.
const frameOverhead = 96

// AppendRequest appends the req frame json.Marshal(Request{...}) writes:
// {"type":"req","id":ID,"method":M,"params":P}, params omitted when empty.
func AppendRequest(dst []byte, id, method string, params json.RawMessage) ([]byte, error) {
	dst = grow(dst, len(params)+len(id)+len(method)+frameOverhead)
	dst = append(dst, `{"type":"req","id":`...)
	dst = AppendString(dst, id)
	dst = append(dst, `,"method":`...)
	dst = AppendString(dst, method)
	if len(params) > 0 {
		var err error
		dst = append(dst, `,"params":`...)
		if dst, err = AppendRaw(dst, params); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// AppendOKResponse appends the frame json.Marshal(OKResponse(id, payload))
// writes: {"type":"res","id":ID,"ok":true,"payload":P}, payload omitted
// when empty.
func AppendOKResponse(dst []byte, id string, payload json.RawMessage) ([]byte, error) {
	dst = grow(dst, len(payload)+len(id)+frameOverhead)
	dst = append(dst, `{"type":"res","id":`...)
	dst = AppendString(dst, id)
	dst = append(dst, `,"ok":true`...)
	if len(payload) > 0 {
		var err error
		dst = append(dst, `,"payload":`...)
		if dst, err = AppendRaw(dst, payload); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// AppendEvent appends the frame json.Marshal(Event{...}) writes:
// {"type":"event","event":E,"seq":N,"payload":P}, payload omitted when
// empty.
func AppendEvent(dst []byte, event string, seq uint64, payload json.RawMessage) ([]byte, error) {
	dst = grow(dst, len(payload)+len(event)+frameOverhead)
	dst = append(dst, `{"type":"event","event":`...)
	dst = AppendString(dst, event)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, seq, 10)
	if len(payload) > 0 {
		var err error
		dst = append(dst, `,"payload":`...)
		if dst, err = AppendRaw(dst, payload); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// AppendInvokeRequest appends the payload json.Marshal(r) writes for
// node.invoke.request.
func AppendInvokeRequest(dst []byte, r *InvokeRequest) ([]byte, error) {
	dst = grow(dst, len(r.Args)+len(r.ExecutionContext)+len(r.InvokeID)+len(r.NodeID)+len(r.Method)+2*frameOverhead)
	dst = append(dst, `{"invokeId":`...)
	dst = AppendString(dst, r.InvokeID)
	dst = append(dst, `,"nodeId":`...)
	dst = AppendString(dst, r.NodeID)
	dst = append(dst, `,"method":`...)
	dst = AppendString(dst, r.Method)
	dst = append(dst, `,"args":`...)
	var err error
	if dst, err = AppendRaw(dst, r.Args); err != nil {
		return dst, err
	}
	dst = append(dst, `,"timeoutMs":`...)
	dst = strconv.AppendInt(dst, r.TimeoutMs, 10)
	if r.SessionGeneration != 0 {
		dst = append(dst, `,"sessionGeneration":`...)
		dst = strconv.AppendUint(dst, r.SessionGeneration, 10)
	}
	if len(r.ExecutionContext) > 0 {
		dst = append(dst, `,"executionContext":`...)
		if dst, err = AppendRaw(dst, r.ExecutionContext); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// AppendInvokeResult appends the params json.Marshal(InvokeResult{InvokeID:
// invokeID, Result: result}) writes: {"invokeId":ID,"result":R}, result
// omitted when empty.
func AppendInvokeResult(dst []byte, invokeID string, result json.RawMessage) ([]byte, error) {
	dst = grow(dst, len(result)+len(invokeID)+frameOverhead)
	dst = append(dst, `{"invokeId":`...)
	dst = AppendString(dst, invokeID)
	if len(result) > 0 {
		var err error
		dst = append(dst, `,"result":`...)
		if dst, err = AppendRaw(dst, result); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// DecodeInvokeResult decodes node.invoke.result params with the decision
// DecodeParams(params, &InvokeResult{}) makes, for params taken from a
// frame that passed CheckJSONLimits and ValidJSONText (as every frame the
// controller reads does). A success result, params of exactly the keys
// invokeId (a plain ASCII string) and result, each once, is read by
// splitting: the result value is not scanned again and aliases params.
// Anything else (an error result, other keys, escapes) takes DecodeParams.
func DecodeInvokeResult(params json.RawMessage) (InvokeResult, *Error) {
	if r, ok := fastInvokeResult(params); ok {
		return r, nil
	}
	var r InvokeResult
	e := DecodeParams(params, &r)
	return r, e
}

func fastInvokeResult(params []byte) (InvokeResult, bool) {
	var r InvokeResult
	ms, err := SplitObject(params)
	if err != nil || len(ms) != 2 {
		return r, false
	}
	var haveID, haveResult bool
	for _, m := range ms {
		switch {
		case m.Is("invokeId") && !haveID:
			s, ok := plainString(m.Value)
			if !ok {
				return r, false
			}
			r.InvokeID, haveID = s, true
		case m.Is("result") && !haveResult:
			r.Result, haveResult = m.Value, true
		default:
			return r, false
		}
	}
	return r, true
}
