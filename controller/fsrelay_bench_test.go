package controller

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"lemon/protocol"
)

// relayChunk is the data of one node.fs.write or node.fs.read in
// BenchmarkFSRelay: the largest a write may carry (protocol.FSMaxWriteBytes).
const relayChunk = protocol.FSMaxWriteBytes

// relayMaxPayload lets a 1 MiB chunk (1,398,104 bytes of base64) plus its
// envelope through the controller and the fake node.
const relayMaxPayload = 2 << 20

// BenchmarkFSRelay pushes 1 MiB node.fs.write and node.fs.read requests
// through a real controller to a fake node, one request in flight. The
// operator and the node are raw WebSockets that send prebuilt frames and
// read only the few bytes they need, so nearly all the work measured is the
// controller's: MB/s of file data, allocs and bytes allocated per request,
// and cpu-ms/MiB, the CPU time of the whole test process per MiB moved.
func BenchmarkFSRelay(b *testing.B) {
	data := make([]byte, relayChunk)
	rand.Read(data)
	b64 := base64.StdEncoding.EncodeToString(data)
	for _, op := range []string{"write", "read"} {
		b.Run(op, func(b *testing.B) {
			cfg := testConfig()
			cfg.MaxPayload = relayMaxPayload
			cfg.MaxBufferedBytes = 4 * relayMaxPayload
			s := startServer(b, cfg)
			var result []byte
			if op == "write" {
				result = []byte(`{"path":"/srv/big.bin","offset":0,"bytesWritten":1048576,"size":1048576,"mtimeMs":1700000000000}`)
			} else {
				result = []byte(`{"path":"/srv/big.bin","dataBase64":"` + b64 + `","offset":0,"length":1048576,"size":104857600,"mime":"application/octet-stream","eof":false}`)
			}
			stop := relayNode(b, s.url, result)
			defer stop()
			opWS := relayConnect(b, s.url, protocol.ConnectParams{Role: protocol.RoleOperator,
				Auth: protocol.ConnectAuth{Token: adminToken}, Client: protocol.ConnectClient{ID: "bench", Version: "1"}})
			nodeID := nodeIDOf("worker-1")
			frameFor := func(i int) []byte {
				id := "r" + strconv.Itoa(i)
				if op == "write" {
					return []byte(`{"type":"req","id":"` + id + `","method":"node.fs.write","params":{"nodeId":"` + nodeID +
						`","path":"big.bin","dataBase64":"` + b64 + `","offset":0,"truncate":false}}`)
				}
				return []byte(`{"type":"req","id":"` + id + `","method":"node.fs.read","params":{"nodeId":"` + nodeID +
					`","path":"big.bin","offset":0,"length":1048576}}`)
			}
			do := func(i int) {
				if err := opWS.WriteMessage(websocket.TextMessage, frameFor(i)); err != nil {
					b.Fatal(err)
				}
				_, res, err := opWS.ReadMessage()
				if err != nil {
					b.Fatal(err)
				}
				want := `{"type":"res","id":"r` + strconv.Itoa(i) + `","ok":true,"payload":{"path":"/srv/big.bin"`
				if !bytes.HasPrefix(res, []byte(want)) {
					b.Fatalf("response %.200s", res)
				}
			}
			do(0) // warm up
			b.SetBytes(relayChunk)
			b.ReportAllocs()
			cpu0 := processCPU()
			b.ResetTimer()
			i := 1
			for b.Loop() {
				do(i)
				i++
			}
			b.StopTimer()
			cpu := processCPU() - cpu0
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(i-1), "cpu-ms/MiB")
		})
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// relayConnect dials and connects a raw WebSocket and reads its hello-ok.
func relayConnect(b *testing.B, url string, p protocol.ConnectParams) *websocket.Conn {
	b.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ws.Close() })
	ws.SetReadLimit(relayMaxPayload + 64<<10)
	params, _ := json.Marshal(p)
	frame, _ := json.Marshal(protocol.Request{Type: protocol.FrameReq, ID: "c1", Method: protocol.MethodConnect, Params: params})
	if err := ws.WriteMessage(websocket.TextMessage, frame); err != nil {
		b.Fatal(err)
	}
	_, hello, err := ws.ReadMessage()
	if err != nil || !bytes.Contains(hello, []byte(`"hello-ok"`)) {
		b.Fatalf("connect: %v %.200s", err, hello)
	}
	return ws
}

// relayNode connects a node that answers every node.invoke.request with
// result, and the returned func disconnects it. It reads the invokeId with
// a byte search (the controller writes it first in the payload).
func relayNode(b *testing.B, url string, result []byte) func() {
	ws := relayConnect(b, url, protocol.ConnectParams{Role: protocol.RoleNode,
		Auth: protocol.ConnectAuth{Token: nodeToken}, Client: protocol.ConnectClient{ID: "bench-node", Version: "1"},
		Node: &protocol.NodeAdvertise{Methods: map[string]int{"node.fs.write": 1, "node.fs.read": 1}, MaxPayload: relayMaxPayload}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		marker := []byte(`"invokeId":"`)
		var buf []byte
		for n := 0; ; n++ {
			_, ev, err := ws.ReadMessage()
			if err != nil {
				return
			}
			i := bytes.Index(ev, marker)
			if i < 0 || !bytes.Contains(ev[:i], []byte(`"node.invoke.request"`)) {
				continue
			}
			id := ev[i+len(marker):]
			id = id[:bytes.IndexByte(id, '"')]
			buf = fmt.Appendf(buf[:0], `{"type":"req","id":"n%d","method":"node.invoke.result","params":{"invokeId":"%s","result":`, n, id)
			buf = append(buf, result...)
			buf = append(buf, "}}"...)
			if ws.WriteMessage(websocket.TextMessage, buf) != nil {
				return
			}
		}
	}()
	return func() { ws.Close(); <-done }
}
