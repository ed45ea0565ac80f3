package client

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"lemon/protocol"
)

// oldDecodeFrame is how the reader decoded frames before the fast path:
// json.Unmarshal into Envelope, then into Response or Event.
func oldDecodeFrame(data []byte) (kind string, res protocol.Response, ev protocol.Event, ok bool) {
	var env protocol.Envelope
	if json.Unmarshal(data, &env) != nil {
		return "", res, ev, false
	}
	switch env.Type {
	case protocol.FrameRes:
		ok = json.Unmarshal(data, &res) == nil
	case protocol.FrameEvent:
		ok = json.Unmarshal(data, &ev) == nil
	}
	return env.Type, res, ev, ok
}

// delivered is what the reader does with a decoded frame: hand a response
// to its caller or an event to OnEvent; every other frame is dropped.
func delivered(kind string, res protocol.Response, ev protocol.Event, ok bool) any {
	switch {
	case ok && kind == protocol.FrameRes:
		return res
	case ok && kind == protocol.FrameEvent:
		return ev
	}
	return nil
}

func TestDecodeFrameMatchesUnmarshal(t *testing.T) {
	deep := strings.Repeat("[", 40) + strings.Repeat("]", 40)
	for _, in := range []string{
		`{"type":"res","id":"r2","ok":true,"payload":{"path":"/x","dataBase64":"YWJj"}}`,
		`{"type":"res","id":"r2","ok":false,"error":{"code":"NOT_FOUND","message":"m","details":{"code":"not_found"}}}`,
		`{"type":"res","ID":"r2","Ok":true,"payload":1,"payload":2}`,
		`{"type":"res","id":"r2","ok":"true"}`,
		`{"type":"res","id":"r2","method":5}`,
		`{"type":"event","event":"node.invoke.request","seq":3,"payload":{"invokeId":"i"}}`,
		`{"type":"event","event":"node.invoke.request","seq":-3}`,
		`{"type":"event","event":"e","seq":1,"id":["x"]}`,
		`{"type":"hello-ok","protocol":1}`,
		`{"type":"res","id":"r2","ok":true,"payload":` + deep + `}`,
		`{"type":"res","id":"r2","ok":true,"payload":1e400}`,
		`{"type":"res","id":"r2","ok":true,"x":1e400}`,
		`{"type":"res","id":"r\u0032","ok":true}`,
		`null`, `[]`, `"res"`, `{}`, `{"type":"res"`, ``,
	} {
		got := delivered(decodeFrame([]byte(in)))
		want := delivered(oldDecodeFrame([]byte(in)))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%.60s:\n got %+v\nwant %+v", in, got, want)
		}
	}
}

func TestRequestFrameMatchesMarshal(t *testing.T) {
	deep := strings.Repeat("[", 40) + strings.Repeat("]", 40)
	for _, params := range []string{
		``, `{}`, `{"nodeId":"n","dataBase64":"YWJj"}`, " {\"a\" : [1, 2]}\n", `{"h":"<&>"}`,
		`{"a":` + deep + `}`, `{"a":1e400}`, `{"a":1`, `{"a" 1}`, `nul`, `"s"`,
	} {
		raw := json.RawMessage(params)
		if params == "" {
			raw = nil
		}
		got, gerr := requestFrame("r7", "node.fs.write", raw, false)
		want, werr := json.Marshal(protocol.Request{Type: protocol.FrameReq, ID: "r7", Method: "node.fs.write", Params: raw})
		if (gerr != nil) != (werr != nil) || !bytes.Equal(got, want) && werr == nil {
			t.Errorf("%q:\n got %s %v\nwant %s %v", params, got, gerr, want, werr)
		}
	}
}
