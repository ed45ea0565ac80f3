//go:build wasip1

// Command testmod is a module for the host's own tests: it echoes blobs,
// traps on request, suspends on a host-side awaitable, and makes host
// calls that the tests rate-limit or deny.
package main

import (
	"encoding/json"

	"lemon/plugins/sdk"
	"lemon/protocol"
)

//go:wasmimport lemon test.ping
func testPing(ptr, size uint32) uint64

//go:wasmimport lemon test.start
func testStart(ptr, size uint32) uint64

//go:wasmimport lemon test.blob
func testBlob(ptr, size uint32) uint64

//go:wasmimport lemon test.write
func testWrite(ptr, size uint32) uint64

func init() {
	sdk.Serve(sdk.Manifest{
		Family: "testmod", Version: "0.0.1",
		Capabilities: []string{"hostinfo", "write"},
		HostCalls:    []string{"test.ping", "test.start", "test.write", "test.blob"},
		Methods: []sdk.MethodSpec{
			{Name: "test.ping", Version: 1, Capability: "hostinfo"},
			{Name: "test.echo", Version: 1, Capability: "hostinfo",
				InputBlobs: map[string]sdk.BlobSpec{"dataBase64": {Encoding: "base64", MaxBytes: 16}}},
			{Name: "test.trap", Version: 1, Capability: "hostinfo"},
			{Name: "test.wait", Version: 1, Capability: "hostinfo"},
			{Name: "test.write", Version: 1, Capability: "write"},
			{Name: "test.spin", Version: 1, Capability: "hostinfo"},
			{Name: "test.relay", Version: 1, Capability: "hostinfo"},
			{Name: "test.relayblob", Version: 1, Capability: "hostinfo"},
			{Name: "test.writeping", Version: 1, Capability: "write", Uses: []string{"hostinfo"}},
			{Name: "test.writefail", Version: 1, Capability: "write"},
			{Name: "test.writewrite", Version: 1, Capability: "write"},
			{Name: "test.small", Version: 1, Capability: "hostinfo", Retry: protocol.RetryRead},
			{Name: "test.nop", Version: 1, Capability: "hostinfo", Retry: protocol.RetryRead},
		},
	}, map[string]sdk.Handler{
		"test.ping":       ping,
		"test.echo":       echo,
		"test.trap":       trap,
		"test.wait":       wait,
		"test.write":      write,
		"test.spin":       spin,
		"test.relay":      relay,
		"test.relayblob":  relayBlob,
		"test.writeping":  writePing,
		"test.writefail":  writeFail,
		"test.writewrite": writeWrite,
		"test.small":      small,
		"test.nop":        func(*sdk.Request) (*sdk.Result, error) { return &sdk.Result{}, nil },
	})
}

func ping(req *sdk.Request) (*sdk.Result, error) {
	var out json.RawMessage
	if err := sdk.CallJSON(testPing, map[string]string{"method": req.Method}, &out); err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: out}, nil
}

func echo(req *sdk.Request) (*sdk.Result, error) {
	b, ok := req.Blobs["dataBase64"]
	if !ok {
		return nil, protocol.InvalidParams("dataBase64", "dataBase64 is required")
	}
	return &sdk.Result{
		Payload: map[string]any{"size": b.Size, "params": req.Params, "dataBase64": nil},
		Blobs:   map[string]uint32{"dataBase64": b.ID},
	}, nil
}

var sink []byte

func trap(req *sdk.Request) (*sdk.Result, error) {
	var p *struct{ X int }
	sink = append(sink, byte(p.X)) // nil dereference: the instance traps
	return nil, nil
}

func wait(req *sdk.Request) (*sdk.Result, error) {
	if req.Resume != nil {
		var st struct{ Step int }
		_ = json.Unmarshal(req.Resume.State, &st)
		return &sdk.Result{Payload: map[string]any{"resumed": true, "handle": req.Resume.Handle, "step": st.Step}}, nil
	}
	var h struct {
		Handle uint32 `json:"handle"`
	}
	if err := sdk.CallJSON(testStart, nil, &h); err != nil {
		return nil, err
	}
	return &sdk.Result{Suspend: &sdk.Suspend{Handle: h.Handle, State: map[string]int{"Step": 7}}}, nil
}

func write(req *sdk.Request) (*sdk.Result, error) {
	if err := sdk.CallJSON(testWrite, nil, nil); err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: map[string]bool{"written": true}}, nil
}

func spin(req *sdk.Request) (*sdk.Result, error) {
	for i := 0; ; i++ {
		sink = append(sink[:0], byte(i))
	}
}

func main() {}

// relay passes its params through a host call and back, to measure the
// cost of JSON crossing the boundary.
func relay(req *sdk.Request) (*sdk.Result, error) {
	var out json.RawMessage
	if err := sdk.CallJSON(testPing, req.Params, &out); err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: out}, nil
}

// relayBlob has the host keep its params as a blob and returns that blob
// as the whole payload: the JSON never enters the guest twice.
func relayBlob(req *sdk.Request) (*sdk.Result, error) {
	var out struct {
		Blob uint32 `json:"blob"`
	}
	if err := sdk.CallJSON(testBlob, req.Params, &out); err != nil {
		return nil, err
	}
	return &sdk.Result{PayloadBlob: out.Blob}, nil
}

// writePing makes an effect (test.write), then a second host call, as
// node.process.run does (spawn.start, then spawn.wait).
func writePing(req *sdk.Request) (*sdk.Result, error) {
	if err := sdk.CallJSON(testWrite, nil, nil); err != nil {
		return nil, err
	}
	var out json.RawMessage
	if err := sdk.CallJSON(testPing, map[string]string{"method": req.Method}, &out); err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: out}, nil
}

// writeWrite makes two effects, one after the other.
func writeWrite(req *sdk.Request) (*sdk.Result, error) {
	for range 2 {
		if err := sdk.CallJSON(testWrite, nil, nil); err != nil {
			return nil, err
		}
	}
	return &sdk.Result{Payload: json.RawMessage(`{}`)}, nil
}

// writeFail makes an effect, then fails with an error that claims nothing
// happened.
func writeFail(req *sdk.Request) (*sdk.Result, error) {
	if err := sdk.CallJSON(testWrite, nil, nil); err != nil {
		return nil, err
	}
	return nil, protocol.Errorf(protocol.CodeInvalidParams, "failed after the write").WithRetry(true, false)
}

// smallParams and smallResult are the shapes of test.small, an echo of
// small params: the fixed cost of the ABI (BenchmarkRatioEcho).
type smallParams struct {
	NodeID string `json:"nodeId"`
	Path   string `json:"path"`
	Limit  int    `json:"limit,omitempty"`
	Follow bool   `json:"follow,omitempty"`
}

type smallResult struct {
	NodeID   string `json:"nodeId"`
	Path     string `json:"path"`
	Limit    int    `json:"limit"`
	Follow   bool   `json:"follow"`
	InvokeID string `json:"invokeId"`
}

// small decodes its params strictly and echoes them with the invokeId.
func small(req *sdk.Request) (*sdk.Result, error) {
	var p smallParams
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	return &sdk.Result{Payload: smallResult{NodeID: p.NodeID, Path: p.Path, Limit: p.Limit, Follow: p.Follow,
		InvokeID: req.Invocation.InvokeID}}, nil
}
