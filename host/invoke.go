package host

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero/sys"

	"lemon/host/abi"
	"lemon/host/abi/wire"
	"lemon/hostcalls"
	"lemon/protocol"
)

// MaxSuspensions bounds how often one request may suspend.
const MaxSuspensions = 16

// invocation is the host-side state of one request: blobs, awaitables and
// the pending host-call result. It implements hostcalls.Call.
type invocation struct {
	mod    *Module
	method string
	info   hostcalls.Invocation
	caps   map[string]bool
	// readOnly: the context's workspace is read_only, so every effect
	// host call is refused; readOnlyMethod: the served method is
	// read-class, so it may make no effect host call (docs/POLICY.md,
	// "Node enforcement").
	readOnly, readOnlyMethod bool

	// outcome is marked once an effect of this invocation has succeeded
	// (the request's own InvokeOutcome when the session gave one).
	outcome *protocol.InvokeOutcome

	mu       sync.Mutex
	blobs    map[uint32][]byte
	secret   map[uint32]bool // secret input blobs (hostcalls.BlobKeeper)
	nextBlob uint32
	awaits   map[uint32]<-chan struct{}
	nextWait uint32
	pending  []byte
	scoped   map[any]io.Closer // hostcalls.Scoper values, closed when the invocation ends
}

var (
	_ hostcalls.Call       = (*invocation)(nil)
	_ hostcalls.BlobKeeper = (*invocation)(nil)
)

type invocationKey struct{}

func invocationFrom(ctx context.Context) *invocation {
	inv, _ := ctx.Value(invocationKey{}).(*invocation)
	return inv
}

func (inv *invocation) Module() string                   { return inv.mod.family }
func (inv *invocation) Method() string                   { return inv.method }
func (inv *invocation) Invocation() hostcalls.Invocation { return inv.info }

// Principal is the execution context's principal of the request being
// served ("" without a context): hostcalls.Invocation.Authority.Principal.
func (inv *invocation) Principal() string { return inv.info.Authority.Principal }

func (inv *invocation) Blob(id uint32) ([]byte, bool) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	b, ok := inv.blobs[id]
	return b, ok
}

func (inv *invocation) PutBlob(b []byte) uint32 {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.nextBlob++
	if inv.blobs == nil {
		inv.blobs = map[uint32][]byte{} // most invocations make no blob
	}
	inv.blobs[inv.nextBlob] = b
	return inv.nextBlob
}

// putSecretBlob stores an input blob whose bytes are a secret.
func (inv *invocation) putSecretBlob(b []byte) uint32 {
	id := inv.PutBlob(b)
	inv.mu.Lock()
	if inv.secret == nil {
		inv.secret = map[uint32]bool{}
	}
	inv.secret[id] = true
	inv.mu.Unlock()
	return id
}

// BlobSecret reports whether blob id is a secret input blob.
func (inv *invocation) BlobSecret(id uint32) bool {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.secret[id]
}

// DropBlob forgets blob id.
func (inv *invocation) DropBlob(id uint32) bool {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	_, ok := inv.blobs[id]
	delete(inv.blobs, id)
	delete(inv.secret, id)
	return ok
}

// gatedCall is what a host call's Func sees of the invocation: secret
// blobs are hidden from Blob unless the host call is declared to consume
// them (hostcalls.HostCall.SecretBlobs), so no path (fs.write, spawn
// stdin, blob.read) carries a secret's bytes back into a guest.
type gatedCall struct {
	*invocation
	secrets bool
}

func (c gatedCall) Blob(id uint32) ([]byte, bool) {
	if !c.secrets && c.BlobSecret(id) {
		return nil, false
	}
	return c.invocation.Blob(id)
}

func (inv *invocation) Await(done <-chan struct{}) uint32 {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.nextWait++
	if inv.awaits == nil {
		inv.awaits = map[uint32]<-chan struct{}{}
	}
	inv.awaits[inv.nextWait] = done
	return inv.nextWait
}

func (inv *invocation) markApplied()  { inv.outcome.MarkApplied() }
func (inv *invocation) applied() bool { return inv.outcome.Applied() }

func (inv *invocation) setPending(b []byte) {
	inv.mu.Lock()
	inv.pending = b
	inv.mu.Unlock()
}

func (inv *invocation) takePending() []byte {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	p := inv.pending
	inv.pending = nil
	return p
}

// Invoke runs one node method (worker.Dispatcher). ctx carries the broker
// deadline; its cancellation (node.invoke.cancel, disconnect) stops the
// module. Errors are protocol errors with safe messages. Once a host call
// declared as an effect (hostcalls.HostCall.Effect) has succeeded, the
// invocation is marked applied (req.Outcome, when given) and any error it
// ends with carries retrySafe:false, mutationMayHaveApplied:true.
// req.MaxResultBytes reaches host calls as Invocation.MaxResultBytes.
func (h *Host) Invoke(ctx context.Context, req protocol.InvokeRequest) (json.RawMessage, *protocol.Error) {
	if req.Outcome == nil {
		req.Outcome = &protocol.InvokeOutcome{}
	}
	payload, perr := h.invoke(ctx, req)
	if perr != nil && req.Outcome.Applied() {
		perr = protocol.AfterEffect(perr)
	}
	h.gate.metrics.invocations.WithLabelValues(h.methodLabel(req.Method), invocationOutcome(perr)).Inc()
	return payload, perr
}

func (h *Host) invoke(ctx context.Context, req protocol.InvokeRequest) (json.RawMessage, *protocol.Error) {
	h.mu.RLock()
	mod, ok := h.methods[req.Method]
	h.mu.RUnlock()
	if !ok {
		if perr, refused := h.NotServed(req.Method); refused {
			return nil, perr
		}
		return nil, protocol.Errorf(protocol.CodeMethodNotFound, "method not served by this node")
	}
	spec := mod.methodSpecs[req.Method]
	bound, perr := bindContext(&req, spec)
	if perr != nil {
		return nil, perr
	}
	inv := &invocation{
		mod: mod, method: req.Method,
		info: hostcalls.Invocation{InvokeID: req.InvokeID, NodeID: req.NodeID,
			SessionGeneration: req.SessionGeneration, ExecutionContext: req.ExecutionContext,
			MaxResultBytes: req.MaxResultBytes, Authority: bound.auth},
		outcome:        req.Outcome,
		readOnly:       bound.auth.ReadOnly,
		readOnlyMethod: spec.Retry == protocol.RetryRead,
		caps:           mod.effectiveCaps(req.Method, bound),
	}
	defer inv.closeScoped()
	if perr := h.gate.admitMethod(inv, spec.Capability); perr != nil {
		return nil, perr
	}
	params, blobs, perr := inv.decodeInputBlobs(req.Args, spec.InputBlobs)
	if perr != nil {
		return nil, perr
	}
	in := abi.Input{Method: req.Method, Params: params, Blobs: blobs, Invocation: inv.info}
	ctx = context.WithValue(ctx, invocationKey{}, inv)
	for suspensions := 0; ; suspensions++ {
		out, perr := h.runOnce(ctx, mod, &in)
		if perr != nil {
			return nil, perr
		}
		if out.Suspend == nil {
			if !out.OK {
				if out.Error == nil || out.Error.Code == "" {
					return nil, protocol.Errorf(protocol.CodeInternal, "module failed without an error")
				}
				return nil, out.Error
			}
			return inv.finishPayload(out)
		}
		if suspensions >= MaxSuspensions {
			return nil, protocol.Errorf(protocol.CodeInternal, "module suspended too often")
		}
		inv.mu.Lock()
		done, ok := inv.awaits[out.Suspend.Handle]
		delete(inv.awaits, out.Suspend.Handle)
		inv.mu.Unlock()
		if !ok {
			return nil, protocol.Errorf(protocol.CodeInternal, "module suspended on an unknown handle")
		}
		select {
		case <-done:
		case <-ctx.Done():
			// The module gets one more run to record the outcome (e.g.
			// a process receipt) under a short grace context.
			gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), graceAfterDeadline)
			in.Resume = &abi.Resume{Handle: out.Suspend.Handle, State: out.Suspend.State}
			<-done
			out2, perr := h.runOnce(gctx, mod, &in)
			cancel()
			if perr == nil && out2.Suspend == nil && out2.OK {
				return inv.finishPayload(out2)
			}
			if perr == nil && out2.Suspend == nil && out2.Error != nil {
				return nil, out2.Error
			}
			return nil, protocol.Errorf(protocol.CodeTimeout, "request deadline passed")
		}
		in.Resume = &abi.Resume{Handle: out.Suspend.Handle, State: out.Suspend.State}
	}
}

// graceAfterDeadline is how long a resumed module may run after the
// request deadline to record an outcome.
const graceAfterDeadline = 5e9

// runOnce runs the module once on a pooled instance.
func (h *Host) runOnce(ctx context.Context, mod *Module, in *abi.Input) (*abi.Output, *protocol.Error) {
	input := abi.AppendInput(make([]byte, 0, abi.InputSize(in)), in)
	inst, err := mod.pool.get(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, protocol.Errorf(protocol.CodeTimeout, "request deadline passed while waiting for a module instance")
		}
		return nil, protocol.DomainError(protocol.CodeInternal, protocol.DomainModuleTrapped, "module could not be started")
	}
	raw, err := inst.call(ctx, input)
	if err != nil {
		mod.pool.drop(ctx, inst)
		if ctx.Err() != nil {
			return nil, protocol.Errorf(protocol.CodeTimeout, "request deadline passed")
		}
		var exit *sys.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded {
			return nil, protocol.Errorf(protocol.CodeTimeout, "request deadline passed")
		}
		h.logTrap(ctx, mod, in, inst)
		return nil, protocol.DomainError(protocol.CodeInternal, protocol.DomainModuleTrapped, "module trapped")
	}
	mod.pool.put(ctx, inst)
	out, err := abi.DecodeOutput(raw)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "module returned a malformed result")
	}
	return out, nil
}

// decodeInputBlobs moves the declared blob fields out of params into
// host-side blobs, enforcing each field's encoding and byte limit. It
// splits the params object without decoding its values, so a 1 MiB blob
// costs one base64 decode and no JSON scan. A field given more than once
// or spelled in another case is refused.
func (inv *invocation) decodeInputBlobs(args json.RawMessage, specs map[string]abi.BlobSpec) (json.RawMessage, map[string]abi.Blob, *protocol.Error) {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	if len(specs) == 0 {
		return args, nil, nil
	}
	members, err := protocol.SplitObject(args)
	if err != nil {
		return nil, nil, protocol.InvalidParams("", "params must be a JSON object")
	}
	raws := map[string][]byte{}
	kept := members[:0:0]
	seen := make(map[string]bool, len(members))
	for _, m := range members {
		k := m.Name()
		// Refuse what would let bytes slip past the host or be read
		// differently by the module: a repeated key, and a case variant
		// of a blob field (encoding/json matches struct fields without
		// regard to case).
		if seen[k] {
			f := safeFieldName(k)
			return nil, nil, protocol.InvalidParams(f, "field "+f+" is given more than once")
		}
		seen[k] = true
		if _, isBlob := specs[k]; isBlob {
			raws[k] = m.Value
			continue
		}
		for field := range specs {
			if strings.EqualFold(k, field) {
				return nil, nil, protocol.InvalidParams(field, "field "+field+" must be spelled exactly")
			}
		}
		kept = append(kept, m)
	}
	blobs := map[string]abi.Blob{}
	for field, raw := range raws {
		spec := specs[field]
		s, ok := protocol.StringContent(raw)
		if !ok {
			return nil, nil, protocol.InvalidParams(field, field+" must be a string")
		}
		var b []byte
		switch spec.Encoding {
		case "base64":
			if base64.StdEncoding.DecodedLen(len(s)) > spec.MaxBytes+2 {
				return nil, nil, protocol.InvalidParams(field, field+" decodes to more than the allowed bytes")
			}
			if bytes.IndexByte(s, '\r') >= 0 || bytes.IndexByte(s, '\n') >= 0 { // the decoder skips CR and LF even when strict
				return nil, nil, protocol.InvalidParams(field, field+" is not valid standard base64")
			}
			b = make([]byte, base64.StdEncoding.DecodedLen(len(s)))
			n, err := base64.StdEncoding.Strict().Decode(b, s)
			if err != nil {
				return nil, nil, protocol.InvalidParams(field, field+" is not valid standard base64")
			}
			b = b[:n]
		default:
			// Invalid UTF-8 and lone surrogate escapes would decode to
			// U+FFFD: bytes other than those sent.
			if !protocol.ValidJSONText(raw) {
				return nil, nil, protocol.InvalidParams(field, field+" must be valid UTF-8 without unpaired surrogate escapes")
			}
			b = append([]byte(nil), s...)
		}
		if len(b) > spec.MaxBytes {
			return nil, nil, protocol.InvalidParams(field, field+" decodes to more than the allowed bytes")
		}
		id := uint32(0)
		// Secret: declared so, or an input of a method needing secrets, or
		// of any node.secrets.* method whatever its module declares (a
		// replacement secrets module cannot opt out).
		if spec.Secret || inv.mod.methodSpecs[inv.method].Capability == hostcalls.CapSecrets ||
			strings.HasPrefix(inv.method, "node.secrets.") {
			id = inv.putSecretBlob(b)
		} else {
			id = inv.PutBlob(b)
		}
		blobs[field] = abi.Blob{ID: id, Size: len(b)}
	}
	return protocol.AppendObject(nil, kept), blobs, nil
}

// finishPayload builds the response payload: the payload blob or the
// inline payload, with output blobs encoded into it.
func (inv *invocation) finishPayload(out *abi.Output) (json.RawMessage, *protocol.Error) {
	payload := out.Payload
	if len(payload) > 0 {
		// The guest's payload JSON is compacted and checked here, as
		// json.Marshal would have in the guest (docs/ABI.md, "Result").
		var ok bool
		if payload, ok = wire.AppendCompact(make([]byte, 0, len(payload)), payload); !ok {
			return nil, protocol.Errorf(protocol.CodeInternal, "module returned a malformed payload")
		}
	}
	if out.PayloadBlob != 0 {
		b, ok := inv.Blob(out.PayloadBlob)
		if inv.BlobSecret(out.PayloadBlob) {
			return nil, errSecretOutput
		}
		trimmed := bytes.TrimSpace(b)
		if !ok || len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
			return nil, protocol.Errorf(protocol.CodeInternal, "module returned an invalid payload blob")
		}
		payload = trimmed
	}
	return inv.encodeOutputBlobs(payload, out.Blobs)
}

// encodeOutputBlobs sets each named top-level payload field to the
// standard base64 of its blob, splicing the encoding into the payload
// bytes rather than re-marshalling them.
func (inv *invocation) encodeOutputBlobs(payload json.RawMessage, blobs map[string]uint32) (json.RawMessage, *protocol.Error) {
	if len(payload) == 0 {
		payload = json.RawMessage("{}")
	}
	if len(blobs) == 0 {
		return payload, nil
	}
	members, err := protocol.SplitObject(payload)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "module returned blobs with a non-object payload")
	}
	kept := members[:0:0]
	for _, m := range members {
		if _, isBlob := blobs[m.Name()]; !isBlob {
			kept = append(kept, m)
		}
	}
	fields := make([]string, 0, len(blobs))
	extra := 0
	for field, id := range blobs {
		b, ok := inv.Blob(id)
		if !ok {
			return nil, protocol.Errorf(protocol.CodeInternal, "module referenced an unknown blob")
		}
		if inv.BlobSecret(id) {
			return nil, errSecretOutput
		}
		fields = append(fields, field)
		extra += base64.StdEncoding.EncodedLen(len(b)) + len(field) + 8
	}
	sort.Strings(fields)
	for _, field := range fields {
		b, _ := inv.Blob(blobs[field])
		key, _ := json.Marshal(field)
		enc := make([]byte, base64.StdEncoding.EncodedLen(len(b))+2)
		enc[0] = '"'
		base64.StdEncoding.Encode(enc[1:], b)
		enc[len(enc)-1] = '"'
		kept = append(kept, protocol.Member{Key: key, Value: enc})
	}
	return protocol.AppendObject(nil, kept), nil
}

// errSecretOutput refuses a result that would hand a secret input blob
// back to the caller.
var errSecretOutput = protocol.Errorf(protocol.CodeInternal, "module returned a secret blob")

// safeFieldName returns k when it looks like a field name, else "?": a
// key is request content and only an identifier may be echoed.
func safeFieldName(k string) string {
	if len(k) == 0 || len(k) > 64 {
		return "?"
	}
	for _, c := range k {
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return "?"
		}
	}
	return k
}
