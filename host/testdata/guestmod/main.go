//go:build wasip1

// Command guestmod exercises the guest host calls (log.write, blob.*,
// config.get) from a real guest, through the SDK wrappers, for the tests
// of lemon/hostcalls/guest.
package main

import (
	"crypto/sha256"
	"encoding/hex"

	"lemon/hostcalls/contract"
	"lemon/hostcalls/guestcall"
	"lemon/plugins/sdk"
	"lemon/plugins/sdk/blob"
	"lemon/plugins/sdk/config"
	"lemon/plugins/sdk/log"
	"lemon/protocol"
)

//go:wasmimport lemon fs.read
func fsRead(ptr, size uint32) uint64

//go:wasmimport lemon fs.write_at
func fsWrite(ptr, size uint32) uint64

func main() {}

func init() {
	calls := append(append(append([]string{"fs.read", "fs.write_at"}, log.HostCalls...), blob.HostCalls...), config.HostCalls...)
	data := map[string]sdk.BlobSpec{"dataBase64": {Encoding: "base64", MaxBytes: 2 << 20}}
	sdk.Serve(sdk.Manifest{
		Family: "guestmod", Version: "0.0.1",
		Capabilities: []string{"hostinfo", "read", "write", "secrets"},
		HostCalls:    calls,
		Methods: []sdk.MethodSpec{
			{Name: "guest.log", Version: 1, Capability: "hostinfo"},
			{Name: "guest.logmany", Version: 1, Capability: "hostinfo"},
			{Name: "guest.panic", Version: 1, Capability: "hostinfo"},
			{Name: "guest.read", Version: 1, Capability: "hostinfo", InputBlobs: data},
			{Name: "guest.sha256", Version: 1, Capability: "hostinfo", InputBlobs: data},
			{Name: "guest.hashtwice", Version: 1, Capability: "hostinfo", InputBlobs: data},
			{Name: "guest.secret", Version: 1, Capability: "hostinfo",
				InputBlobs: map[string]sdk.BlobSpec{"value": {Encoding: "string", MaxBytes: 1024, Secret: true}}},
			{Name: "guest.secretout", Version: 1, Capability: "hostinfo",
				InputBlobs: map[string]sdk.BlobSpec{"value": {Encoding: "string", MaxBytes: 1024, Secret: true}}},
			// Input blobs of a method needing "secrets" are secret without the flag.
			{Name: "guest.vaultlike", Version: 1, Capability: "secrets",
				InputBlobs: map[string]sdk.BlobSpec{"value": {Encoding: "string", MaxBytes: 1024}}},
			{Name: "guest.secretwrite", Version: 1, Capability: "write",
				InputBlobs: map[string]sdk.BlobSpec{"value": {Encoding: "string", MaxBytes: 1024, Secret: true}}},
			{Name: "guest.config", Version: 1, Capability: "hostinfo"},
			{Name: "guest.checksum", Version: 1, Capability: "read"},
		},
	}, map[string]sdk.Handler{
		"guest.log":         logOne,
		"guest.logmany":     logMany,
		"guest.panic":       panicNow,
		"guest.read":        read,
		"guest.sha256":      sum,
		"guest.hashtwice":   hashTwice,
		"guest.secret":      secret,
		"guest.secretout":   secretOut,
		"guest.secretwrite": secretWrite,
		"guest.vaultlike":   secret,
		"guest.config":      settings,
		"guest.checksum":    checksum,
	})
}

// logOne: {level, message, sdk} — sdk true goes through log.Write (which
// truncates), false sends the message as given.
func logOne(req *sdk.Request) (*sdk.Result, error) {
	var p struct {
		NodeID  string `json:"nodeId"` // as lemon plugin run sends it
		Level   string `json:"level"`
		Message string `json:"message"`
		SDK     bool   `json:"sdk"`
	}
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	if p.SDK {
		ok, err := log.Write(p.Level, p.Message)
		if err != nil {
			return nil, err
		}
		return &sdk.Result{Payload: map[string]bool{"logged": ok}}, nil
	}
	var out guestcall.LogResult
	if err := sdk.CallJSON(rawLogWrite, guestcall.LogArgs{Level: p.Level, Message: p.Message}, &out); err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: out}, nil
}

func logMany(req *sdk.Request) (*sdk.Result, error) {
	var p struct {
		Count int `json:"count"`
	}
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	logged := 0
	for range p.Count {
		if ok, _ := log.Write(guestcall.LevelInfo, "tick"); ok {
			logged++
		}
	}
	return &sdk.Result{Payload: map[string]int{"logged": logged}}, nil
}

func panicNow(req *sdk.Request) (*sdk.Result, error) {
	var p struct {
		NodeID  string `json:"nodeId"` // as lemon plugin run sends it
		Message string `json:"message"`
	}
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	panic(p.Message)
}

func read(req *sdk.Request) (*sdk.Result, error) {
	var p struct {
		Offset int64 `json:"offset"`
		Length int64 `json:"length"`
		All    bool  `json:"all"`
	}
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	b := req.Blobs["dataBase64"]
	var got []byte
	var err error
	if p.All {
		got, err = blob.ReadAll(b.ID, b.Size)
	} else {
		got, err = blob.Read(b.ID, p.Offset, p.Length)
	}
	if err != nil {
		return nil, err
	}
	// Guest-side JSON costs about 1 µs a byte: answer a digest computed in
	// the guest, not the bytes.
	d := sha256.Sum256(got)
	return &sdk.Result{Payload: map[string]any{"n": len(got), "sha256": hex.EncodeToString(d[:])}}, nil
}

func sum(req *sdk.Request) (*sdk.Result, error) {
	d, err := blob.SHA256(req.Blobs["dataBase64"].ID)
	if err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: d}, nil
}

func hashTwice(req *sdk.Request) (*sdk.Result, error) {
	var h blob.Hash
	id := req.Blobs["dataBase64"].ID
	if err := h.Write(id, false); err != nil {
		return nil, err
	}
	if err := h.Write(id, true); err != nil {
		return nil, err
	}
	d, err := h.Sum()
	if err != nil {
		return nil, err
	}
	// The blob was freed by the second write.
	_, again := blob.SHA256(id)
	return &sdk.Result{Payload: map[string]any{"digest": d, "afterFree": codeOf(again)}}, nil
}

func codeOf(err error) string {
	if err == nil {
		return ""
	}
	if pe, ok := err.(*protocol.Error); ok {
		return pe.Code
	}
	return "?"
}

// secret tries every way the guest could get at a secret input blob's
// bytes and reports the error code of each.
func secret(req *sdk.Request) (*sdk.Result, error) {
	id := req.Blobs["value"].ID
	_, rerr := blob.Read(id, 0, 16)
	_, serr := blob.SHA256(id)
	var h blob.Hash
	herr := h.Write(id, false)
	_, aerr := blob.ReadAll(id, req.Blobs["value"].Size)
	return &sdk.Result{Payload: map[string]string{
		"read": codeOf(rerr), "sha256": codeOf(serr), "hash": codeOf(herr), "readAll": codeOf(aerr),
	}}, nil
}

func secretOut(req *sdk.Request) (*sdk.Result, error) {
	return &sdk.Result{Payload: map[string]any{}, Blobs: map[string]uint32{"value": req.Blobs["value"].ID}}, nil
}

// secretWrite tries to land a secret blob in a file (which fs.read could
// then bring into the guest) and reports fs.write_at's error code.
func secretWrite(req *sdk.Request) (*sdk.Result, error) {
	var p struct {
		Path string `json:"path"`
	}
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	err := sdk.Call(fsWrite, contract.FSWriteAtArgs{Path: p.Path, Blob: req.Blobs["value"].ID, Expect: contract.FSExpect{Absent: true}}, nil)
	return &sdk.Result{Payload: map[string]string{"write": codeOf(err)}}, nil
}

func settings(req *sdk.Request) (*sdk.Result, error) {
	s, err := config.Get()
	if err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: map[string]any{"settings": s}}, nil
}

// checksum is node.checksum.sha256's logic: fs.read chunk by chunk into
// blobs, each fed to a host-side hash and freed.
func checksum(req *sdk.Request) (*sdk.Result, error) {
	var p struct {
		Path string `json:"path"`
	}
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	var h blob.Hash
	var off int64
	chunks := 0
	for {
		var r contract.FSReadResult
		if err := sdk.Call(fsRead, map[string]any{"path": p.Path, "offset": off, "length": protocol.FSMaxReadLength}, &r); err != nil {
			return nil, err
		}
		if err := h.Write(r.Blob, true); err != nil {
			return nil, err
		}
		chunks++
		off += r.Length
		if r.EOF || r.Length == 0 {
			break
		}
	}
	d, err := h.Sum()
	if err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: map[string]any{"sha256": d.SHA256, "size": d.Size, "chunks": chunks}}, nil
}
