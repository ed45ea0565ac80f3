package abi_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"lemon/host/abi"
	"lemon/hostcalls"
	"lemon/protocol"
)

func TestInputRoundTrip(t *testing.T) {
	for _, in := range []abi.Input{
		{Method: "m", Invocation: hostcalls.Invocation{}},
		{Method: "node.fs.write", Params: json.RawMessage(`{"nodeId":"n1","path":"a"}`),
			Blobs: map[string]abi.Blob{"z": {ID: 2, Size: 7}, "dataBase64": {ID: 1, Size: 1 << 40}},
			Invocation: hostcalls.Invocation{InvokeID: "i1", NodeID: "n1", SessionGeneration: 1<<63 + 5,
				ExecutionContext: json.RawMessage(`{"runId":"i1"}`)},
			Resume: &abi.Resume{Handle: 7, State: json.RawMessage(`{"Step":7}`)}},
		{Method: "m", Resume: &abi.Resume{Handle: 1}},
	} {
		b := abi.AppendInput(nil, &in)
		if n := abi.InputSize(&in); n != len(b) {
			t.Fatalf("InputSize %d, envelope %d bytes", n, len(b))
		}
		var got abi.Input
		if err := abi.DecodeInput(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, in) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, in)
		}
		// Every truncation and one extra byte are malformed.
		for n := 0; n < len(b); n++ {
			if err := abi.DecodeInput(b[:n], &abi.Input{}); !errors.Is(err, abi.ErrMalformed) {
				t.Fatalf("truncated to %d: %v", n, err)
			}
		}
		if err := abi.DecodeInput(append(b, 0), &abi.Input{}); !errors.Is(err, abi.ErrMalformed) {
			t.Fatalf("extra byte: %v", err)
		}
	}
}

// TestDecodeInputReusesBlobs: a Blobs map left in the Input is emptied
// and refilled, not replaced; with no blobs it is left empty.
func TestDecodeInputReusesBlobs(t *testing.T) {
	blobs := map[string]abi.Blob{"old": {ID: 9}}
	in := abi.Input{Blobs: blobs}
	b := abi.AppendInput(nil, &abi.Input{Method: "m", Blobs: map[string]abi.Blob{"value": {ID: 1, Size: 32}}})
	if err := abi.DecodeInput(b, &in); err != nil {
		t.Fatal(err)
	}
	if len(blobs) != 1 || blobs["value"] != (abi.Blob{ID: 1, Size: 32}) {
		t.Fatalf("reused map holds %v", blobs)
	}
	in = abi.Input{Blobs: blobs}
	clear(blobs)
	if err := abi.DecodeInput(abi.AppendInput(nil, &abi.Input{Method: "m"}), &in); err != nil {
		t.Fatal(err)
	}
	if in.Blobs == nil || len(in.Blobs) != 0 {
		t.Fatalf("no blobs: %v", in.Blobs)
	}
}

func TestOutputRoundTrip(t *testing.T) {
	b, at := abi.AppendOK(nil, 0)
	b = append(b, `{"a":1}`...)
	b = abi.EndPayload(b, at, map[string]uint32{"dataBase64": 3})
	out, err := abi.DecodeOutput(b)
	if err != nil || !out.OK || string(out.Payload) != `{"a":1}` || out.Blobs["dataBase64"] != 3 || len(out.Blobs) != 1 {
		t.Fatalf("ok = %+v, %v", out, err)
	}
	e := protocol.InvalidParams("path", "path is required")
	out, err = abi.DecodeOutput(abi.AppendError(nil, e))
	if err != nil || out.OK || !reflect.DeepEqual(out.Error, e) {
		t.Fatalf("error = %+v, %v", out, err)
	}
	out, err = abi.DecodeOutput(abi.AppendSuspend(nil, 9, []byte(`{"s":1}`)))
	if err != nil || out.Suspend == nil || out.Suspend.Handle != 9 || string(out.Suspend.State) != `{"s":1}` {
		t.Fatalf("suspend = %+v, %v", out, err)
	}
	for _, bad := range [][]byte{nil, {3}, {abi.KindOK, 0, 0, 0}, append(abi.AppendSuspend(nil, 1, nil), 0)} {
		if _, err := abi.DecodeOutput(bad); !errors.Is(err, abi.ErrMalformed) {
			t.Fatalf("DecodeOutput(%v) = %v, want ErrMalformed", bad, err)
		}
	}
	// A repeated output-blob field is malformed.
	b, at = abi.AppendOK(nil, 0)
	b = abi.EndPayload(b, at, map[string]uint32{"a": 1})
	b[len(b)-4-1-4-4] = 2 // blob count (before str "a" and its id) 1 → 2
	b = append(b, 1, 0, 0, 0, 'a', 2, 0, 0, 0)
	if _, err := abi.DecodeOutput(b); !errors.Is(err, abi.ErrMalformed) {
		t.Fatalf("repeated field: %v", err)
	}
}

// TestDecodeInputLeavesNothingStale: decoding into an Input that still
// holds an earlier invocation (blobs, a resume) leaves none of it: an
// invocation without blobs has an empty map, one without a resume none.
func TestDecodeInputLeavesNothingStale(t *testing.T) {
	in := abi.Input{Blobs: map[string]abi.Blob{"value": {ID: 1, Size: 32}}, Resume: &abi.Resume{Handle: 7}}
	if err := abi.DecodeInput(abi.AppendInput(nil, &abi.Input{Method: "m"}), &in); err != nil {
		t.Fatal(err)
	}
	if len(in.Blobs) != 0 {
		t.Fatalf("stale blobs: %v", in.Blobs)
	}
	if in.Resume != nil {
		t.Fatalf("stale resume: %+v", in.Resume)
	}
}

// FuzzDecodeEnvelopes: hostile bytes (a guest's result, a truncated
// invocation) decode or fail with ErrMalformed, never panic; an input
// decoded into a reused Input holds nothing of the one before.
func FuzzDecodeEnvelopes(f *testing.F) {
	f.Add(abi.AppendInput(nil, &abi.Input{Method: "m", Params: []byte(`{}`), Blobs: map[string]abi.Blob{"v": {ID: 1, Size: 2}}, Resume: &abi.Resume{Handle: 3}}))
	b, at := abi.AppendOK(nil, 0)
	f.Add(abi.EndPayload(append(b, `{"a":1}`...), at, map[string]uint32{"d": 3}))
	f.Add(abi.AppendError(nil, protocol.InvalidParams("path", "path is required")))
	f.Add(abi.AppendSuspend(nil, 4, []byte(`{}`)))
	f.Fuzz(func(t *testing.T, in []byte) {
		_, _ = abi.DecodeOutput(in)
		reused := abi.Input{Blobs: map[string]abi.Blob{"stale": {ID: 9}}, Resume: &abi.Resume{Handle: 9}}
		if err := abi.DecodeInput(in, &reused); err != nil {
			return
		}
		var fresh abi.Input
		if err := abi.DecodeInput(in, &fresh); err != nil {
			t.Fatalf("decodes into a reused Input, not a fresh one: %v", err)
		}
		if len(reused.Blobs) != len(fresh.Blobs) || (reused.Resume == nil) != (fresh.Resume == nil) {
			t.Fatalf("reused Input %+v, fresh %+v", reused, fresh)
		}
		for k, v := range fresh.Blobs {
			if reused.Blobs[k] != v {
				t.Fatalf("blob %q: reused %v, fresh %v", k, reused.Blobs[k], v)
			}
		}
	})
}
