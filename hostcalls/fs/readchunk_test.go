package fs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"lemon/protocol"
)

// Issue 9 item 3a, fs part: over a connection of maxPayload 65536 a
// node.fs.read with the default length (1048576) returns a shorter chunk
// whose payload fits, instead of a result too large to deliver; so does
// a path that JSON-escapes to six times its length.
func TestReadChunkFitsSessionRoom(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789"), 10000) // 100000 bytes
	odd := strings.Repeat("<", 200) + ".bin"
	e := newEnv(t, []node{{path: "root/big.bin", file: string(big)}, {path: "root/" + odd, file: string(big)}}, "root")
	const room = 65536 - 131 // a 65536-byte frame less the node.invoke.result envelope
	for _, name := range []string{"big.bin", odd} {
		call := newCall()
		call.maxResult = room
		out, perr := e.call("fs.read", map[string]any{"path": name, "offset": 0, "length": protocol.FSMaxReadLength}, call)
		if perr != nil {
			t.Fatalf("%s: %v", name[len(name)-7:], perr)
		}
		var r protocol.FSReadCall
		json.Unmarshal(out, &r)
		data, _ := call.Blob(r.Blob)
		want := ReadChunkFor(room, e.abs("root/"+name))
		if r.Length != int64(want) || len(data) != want || r.EOF || r.Size != int64(len(big)) || !bytes.Equal(data, big[:want]) {
			t.Fatalf("%s: length %d (%d bytes) eof %v size %d, want a %d-byte chunk", name[len(name)-7:], r.Length, len(data), r.EOF, r.Size, want)
		}
		// The payload the fs module returns, with the longest media type
		// the module could name, fits the room with the relay's share.
		res := r.FSReadResult
		res.DataBase64 = base64.StdEncoding.EncodeToString(data)
		res.Mime = strings.Repeat("m", 128)
		b, _ := json.Marshal(res)
		if len(b)+protocol.RelayReserve > room {
			t.Fatalf("%s: payload %d bytes + relay reserve exceed the room of %d", name[len(name)-7:], len(b), room)
		}
	}
	// Without a known room (a host driven directly) the chunk is as asked.
	call := newCall()
	out, perr := e.call("fs.read", map[string]any{"path": "big.bin", "offset": 0, "length": protocol.FSMaxReadLength}, call)
	if perr != nil {
		t.Fatal(perr)
	}
	var r protocol.FSReadCall
	json.Unmarshal(out, &r)
	if r.Length != int64(len(big)) || !r.EOF {
		t.Fatalf("no room given: length %d eof %v, want the whole file", r.Length, r.EOF)
	}
}
