package controller

import (
	"encoding/json"
	"testing"

	"github.com/gorilla/websocket"

	"lemon/protocol"
)

// TestRawFramesForwardedAsMarshalled: the controller appends params and
// results to the frames it forwards instead of re-encoding them, and the
// bytes are still exactly what encoding/json wrote before: whitespace
// compacted away, <, > and & escaped, U+2028 escaped, everything else
// (escapes, key order, repeated keys of unchecked values) as sent.
func TestRawFramesForwardedAsMarshalled(t *testing.T) {
	s := startServer(t, testConfig())
	n := connectNode(t, s.url, nodeToken, protocol.NodeAdvertise{}, silentHandler)
	op := connectOperator(t, s.url, adminToken)
	nodeID := nodeIDOf("worker-1")

	params := "{ \"nodeId\" : \"" + nodeID + "\",\n\t\"value\" : { \"h\" : \"<a&b>\", \"l\":\"\u2028\", \"e\":\"\\u0041\\/\", \"d\":[ 1 , 2.5e3 ] } }"
	ch := make(chan frame, 1)
	op.mu.Lock()
	op.waiters["raw1"] = ch
	op.mu.Unlock()
	op.writeRaw(websocket.TextMessage, []byte(`{"type":"req","id":"raw1","method":"`+mEcho+`","params":`+params+`}`))

	var req protocol.InvokeRequest
	select {
	case req = <-n.requests:
	case <-timeAfter():
		t.Fatal("no invoke request")
	}
	wantArgs, err := json.Marshal(json.RawMessage(params))
	if err != nil {
		t.Fatal(err)
	}
	if string(req.Args) != string(wantArgs) {
		t.Fatalf("args forwarded as\n%s\nwant\n%s", req.Args, wantArgs)
	}

	result := "{ \"path\" : \"/x\", \"html\":\"</script>\", \"n\":[ ], \"s\" : \"a b\" }"
	n.writeRaw(websocket.TextMessage, []byte(`{"type":"req","id":"n1","method":"node.invoke.result","params":{"invokeId":"`+
		req.InvokeID+`","result":`+result+`}}`))
	f := op.await(ch)
	if !f.OK {
		t.Fatalf("call failed: %s", f.raw)
	}
	wantFrame, _ := json.Marshal(protocol.OKResponse("raw1", json.RawMessage(result)))
	if string(f.raw) != string(wantFrame) {
		t.Fatalf("response frame\n%s\nwant\n%s", f.raw, wantFrame)
	}
}
