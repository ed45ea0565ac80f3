// Package sdk is the guest side of the module ABI (docs/ABI.md): what a
// team writing its own method family imports. A module declares a
// Manifest, registers one Handler per method with Serve from main's init,
// and reaches the node only through host calls, made with the typed
// wrappers of each family (plugins/sdk/fs, store, spawn, vault, sysinfo;
// docs/HOSTCALLS.md lists every call):
//
//	func init() {
//		sdk.Serve(manifest, map[string]sdk.Handler{"node.host.info": hostInfo})
//	}
//
//	func hostInfo(req *sdk.Request) (*sdk.Result, error) {
//		var p protocol.HostInfoParams
//		if err := req.Decode(&p); err != nil { // strict: unknown field → INVALID_PARAMS
//			return nil, err
//		}
//		figures, err := sysinfo.Snapshot()
//		if err != nil {
//			return nil, err
//		}
//		return &sdk.Result{Payload: shape.Payload(figures)}, nil
//	}
//
// Handlers return *protocol.Error values for failures; any other error
// becomes INTERNAL_ERROR with a generic message, so raw error text never
// leaves the module.
package sdk

import (
	"encoding/json"
	"fmt"

	"lemon/host/abi"
	"lemon/host/abi/wire"
	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// ABIVersion is the module ABI this package implements.
const ABIVersion = abi.Version

// ImportFunc is the signature of every host-call import:
// (argsPtr, argsLen) -> status<<32 | resultLen.
type ImportFunc func(ptr, size uint32) uint64

// Manifest declares a module (docs/ABI.md "Manifest").
type Manifest = abi.Manifest

// MethodSpec declares one method a module serves.
type MethodSpec = abi.MethodSpec

// BlobSpec declares a request field the host decodes into a blob before
// the guest runs.
type BlobSpec = abi.BlobSpec

// Blob is a handle to host-side bytes and their size in bytes.
type Blob = abi.Blob

// Resume is set when the host re-invokes a method after a Suspend.
type Resume = abi.Resume

// Request is one invocation. The SDK reuses the Request value and its
// Blobs map for the next invocation, so a handler must not keep a pointer
// to it or the map (Blobs may be empty rather than nil when there are no
// blobs); its strings and Params (which share the invocation's bytes,
// never reused) stay valid.
type Request abi.Input

// Suspend asks the host to wait for Handle (registered by a host call)
// without holding this instance, then invoke the method again with Resume.
// State comes back in Resume.State.
type Suspend struct {
	Handle uint32
	State  any
}

// Result is a handler's success. Blobs maps top-level payload fields to
// blob ids the host encodes as base64 into the payload. A json.RawMessage
// Payload is taken as the payload's JSON and copied into the result
// before the invocation returns, so its buffer may be reused by the next
// invocation.
type Result struct {
	Payload any
	// PayloadBlob, when non-zero, is a blob (returned by a host call) that
	// holds the whole payload object; Payload is then ignored. Use it to
	// pass a large host result through without decoding it in the guest.
	PayloadBlob uint32
	Blobs       map[string]uint32
	Suspend     *Suspend
}

// Handler serves one method.
type Handler func(req *Request) (*Result, error)

var (
	manifest Manifest
	handlers map[string]Handler
)

// Serve declares the module. Call it once, from init.
func Serve(m Manifest, hs map[string]Handler) {
	m.ABI = abi.Version
	manifest = m
	handlers = hs
}

// Call makes a host call served by hostcalls.Define: args is encoded as
// JSON (nil sends {}), and the result, in the binary layout of
// docs/ABI.md ("Host-call results"), is decoded into out, a pointer to
// the call's contract result type (lemon/hostcalls/contract), or nil to
// ignore it. Both go through the ABI codec (lemon/host/abi/wire: a plan
// built once per type, no reflection per call; docs/ABI.md, "Codec").
// Decoded strings and byte slices share the result's bytes. A host error
// comes back as *protocol.Error; a result that does not decode into out
// is INTERNAL_ERROR "host call returned malformed data". For a call whose
// result is JSON (the guest family, served by hostcalls.DefineRaw) use
// CallJSON.
func Call(fn ImportFunc, args any, out any) error {
	if out == nil {
		// The result is not needed: it is left pending, never copied
		// into the guest (the next call replaces it).
		_, err := callArgsDiscard(fn, args, true)
		return err
	}
	res, err := callArgs(fn, args)
	if err != nil {
		return err
	}
	if err := wire.UnmarshalBinary(res, out); err != nil {
		return protocol.Errorf(protocol.CodeInternal, "host call returned malformed data")
	}
	return nil
}

// CallJSON makes a host call whose result is JSON rather than binary:
// the guest family's log.write, blob.sha256, blob.hash_update,
// blob.hash_sum, blob.free and config.get (served by hostcalls.DefineRaw,
// docs/ABI.md "Guest host calls"), or a host's own test calls. args is
// encoded as JSON (nil sends {}); the JSON result is decoded into out
// (which may be nil) as json.Unmarshal would. A host error comes back as
// *protocol.Error.
func CallJSON(fn ImportFunc, args any, out any) error {
	res, err := callArgs(fn, args)
	if err != nil || out == nil || len(res) == 0 {
		return err
	}
	if err := wire.Unmarshal(res, out); err != nil {
		return protocol.Errorf(protocol.CodeInternal, "host call returned malformed data")
	}
	return nil
}

// callArgs encodes args (nil: {}) and makes the call.
func callArgs(fn ImportFunc, args any) ([]byte, error) { return callArgsDiscard(fn, args, false) }

// callArgsDiscard is callArgs; with discard a success's result is not
// read (nil is returned for it), an error's always is.
func callArgsDiscard(fn ImportFunc, args any, discard bool) ([]byte, error) {
	in := emptyArgs
	if _, empty := args.(contract.Empty); args != nil && !empty {
		var err error
		if in, err = wire.Append(argsBuf[:0], args); err != nil {
			return nil, fmt.Errorf("sdk: marshal host-call args: %w", err)
		}
		argsBuf = in[:0]
	}
	status, res := callImportDiscard(fn, in, discard)
	if status != 0 {
		return nil, hostError(res)
	}
	return res, nil
}

// emptyArgs are the args of a call given none; argsBuf is reused for the
// args of every host call (the host copies them before the call returns).
var (
	emptyArgs = []byte("{}")
	argsBuf   []byte
)

// hostError decodes a host call's error object.
func hostError(res []byte) error {
	var pe protocol.Error
	if err := wire.Unmarshal(res, &pe); err != nil || pe.Code == "" {
		return protocol.Errorf(protocol.CodeInternal, "host call failed")
	}
	return &pe
}

// Invoke makes the host call c through its import fn with args and
// returns its decoded result (Call). It is what the family wrappers are
// built on: c fixes the shapes (lemon/hostcalls/contract), so a wrapper
// cannot send or read another type than the host's table decodes and
// encodes. A host error comes back as *protocol.Error.
func Invoke[A, R any](fn ImportFunc, c contract.Call[A, R], args A) (R, error) {
	var out R
	err := Call(fn, args, &out)
	return out, err
}

// InvokeJSON is Invoke for a call whose result is JSON (CallJSON): the
// guest family's calls served by hostcalls.DefineRaw.
func InvokeJSON[A, R any](fn ImportFunc, c contract.Call[A, R], args A) (R, error) {
	var out R
	err := CallJSON(fn, args, &out)
	return out, err
}

// Decode strictly decodes the request params into v, a pointer to the
// method's params struct: the result and the errors (INVALID_PARAMS
// naming the field) of protocol.DecodeParams, through the ABI codec.
func (r *Request) Decode(v any) error {
	if err := wire.DecodeParams(r.Params, v); err != nil {
		return err
	}
	return nil
}

func describe() []byte {
	b, _ := json.Marshal(manifest)
	return b
}

// resultBuf holds the last result envelope; the host copies it before the
// next invocation.
var resultBuf []byte

// req is the Request of the running invocation: one per instance (an
// instance serves one invocation at a time), so serving one allocates no
// Request. A handler must not keep it after it returns.
var req Request

func invoke(in []byte) []byte {
	// The Blobs map is reused: DecodeInput empties and refills it.
	req = Request{Blobs: req.Blobs}
	if err := abi.DecodeInput(in, (*abi.Input)(&req)); err != nil {
		return fail(protocol.Errorf(protocol.CodeInvalidRequest, "malformed invocation"))
	}
	h, ok := handlers[req.Method]
	if !ok {
		return fail(protocol.Errorf(protocol.CodeMethodNotFound, "method not served by this module"))
	}
	res, err := h(&req)
	if err != nil {
		return fail(protocol.AsError(err))
	}
	if res == nil {
		res = &Result{Payload: struct{}{}}
	}
	b := resultBuf[:0]
	if res.Suspend != nil {
		var state []byte
		if res.Suspend.State != nil {
			if state, err = wire.Marshal(res.Suspend.State); err != nil {
				return fail(protocol.Errorf(protocol.CodeInternal, "module produced an unencodable result"))
			}
		}
		b = abi.AppendSuspend(b, res.Suspend.Handle, state)
	} else {
		b, at := abi.AppendOK(b, res.PayloadBlob)
		if res.PayloadBlob == 0 {
			// A json.RawMessage payload goes as is: the host compacts and
			// checks every payload (docs/ABI.md, "Result").
			if raw, ok := res.Payload.(json.RawMessage); ok && raw != nil {
				b = append(b, raw...)
			} else if res.Payload == nil {
				// no payload: the host answers {}
			} else if b, err = wire.Append(b, res.Payload); err != nil {
				return fail(protocol.Errorf(protocol.CodeInternal, "module produced an unencodable result"))
			}
		}
		b = abi.EndPayload(b, at, res.Blobs)
		resultBuf = b
		return b
	}
	resultBuf = b
	return b
}

func fail(e *protocol.Error) []byte {
	resultBuf = abi.AppendError(resultBuf[:0], e)
	return resultBuf
}
