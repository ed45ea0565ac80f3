// Package hostcalls declares the shape of a host call: the only way a guest
// module reaches a privileged effect. Each family (fs, spawn, vault,
// sysinfo, store) lives in its own subpackage and exports one table of
// HostCall values; the host registers every entry as a wasm import of
// module "lemon" named Name, and every call passes the gate (capability,
// rate limit, deadline, telemetry) before Func runs. See docs/ABI.md.
package hostcalls

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"lemon/host/abi/wire"
	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// Capabilities a host call may require. A node's ceiling (worker policy and
// --capabilities) and a request's executionContext intersect with a
// module's declared capabilities; a host call runs only if its capability
// survives the intersection.
const (
	CapHostInfo = "hostinfo" // read host metadata
	CapRead     = "read"     // read files and directory listings
	CapWrite    = "write"    // create, change, move and delete files
	CapExec     = "exec"     // start and control native processes
	CapSecrets  = "secrets"  // write-only vault
)

// CapNone marks a host call that needs no capability: its effect stays
// inside the invocation (reading the invocation's own blobs, writing a
// bounded guest log record, reading the module's own settings). A module
// still lists the call in its manifest's HostCalls, but declares no
// capability for it, and no ceiling or execution context removes it. It
// is not a capability a module or ceiling names (docs/PLUGINS.md,
// "Logging, panics, blobs and settings").
const CapNone = "none"

// AllCapabilities lists every capability a host call requires, in a
// stable order. Capabilities are open (docs/POLICY.md, "Capabilities"): a
// module may declare names of its own besides these (e.g. "kv"), which
// only its methods require.
var AllCapabilities = []string{CapHostInfo, CapRead, CapWrite, CapExec, CapSecrets}

// CapAll in a ceiling means no restriction: every capability, built-in
// or declared by a module. It is not a capability name itself.
const CapAll = "all"

// Bounds on capability names and lists (docs/POLICY.md, "Capabilities").
const (
	// CapabilityPattern is what every capability name matches: a lower-case
	// letter, then up to 31 lower-case letters, digits or underscores.
	CapabilityPattern = `^[a-z][a-z0-9_]{0,31}$`
	// MaxModuleCapabilities is the most capabilities one module may declare.
	MaxModuleCapabilities = 16
	// MaxCeilingCapabilities is the most names a node ceiling may list (the
	// controller accepts at most this many advertised capabilities).
	MaxCeilingCapabilities = 64
)

var capabilityRE = regexp.MustCompile(CapabilityPattern)

// CheckCapability reports whether name is a well-formed capability name
// ("all" is not one). The error quotes the name only when it is short and
// printable, so it is safe in any message.
func CheckCapability(name string) error {
	if name == CapAll {
		return fmt.Errorf("capability %q is reserved (it means every capability)", name)
	}
	if name == CapNone {
		return fmt.Errorf("capability %q is reserved (it marks host calls that need no capability)", name)
	}
	if !capabilityRE.MatchString(name) {
		if len(name) > 64 || !printableASCII(name) {
			return fmt.Errorf("malformed capability name (want %s)", CapabilityPattern)
		}
		return fmt.Errorf("malformed capability name %q (want %s)", name, CapabilityPattern)
	}
	return nil
}

// CheckCeiling validates a node ceiling: "all" alone, or at most
// MaxCeilingCapabilities well-formed names.
func CheckCeiling(names []string) error {
	if len(names) > MaxCeilingCapabilities {
		return fmt.Errorf("at most %d capabilities in a ceiling, got %d", MaxCeilingCapabilities, len(names))
	}
	for _, c := range names {
		if c == CapAll {
			continue
		}
		if err := CheckCapability(c); err != nil {
			return err
		}
	}
	return nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// AuditClass says what kind of effect a host call has; it is recorded in
// the content-free audit event.
type AuditClass string

const (
	AuditMeta     AuditClass = "meta"     // no effect on node state (host info, stat)
	AuditRead     AuditClass = "read"     // reads node state
	AuditMutation AuditClass = "mutation" // changes node state; declares the call an effect (Effect)
	// AuditBookkeeping: reads or writes only the calling module's own
	// store namespace, its bookkeeping (receipts, preview tokens, caches);
	// not an effect a caller sees (docs/POLICY.md, "The module's own store").
	AuditBookkeeping AuditClass = "bookkeeping"
)

// Effect reports whether the call is declared as an effect on node state
// (Audit is AuditMutation). Once such a call has succeeded in an
// invocation, the gate no longer rate-limits that invocation's non-effect
// host calls, refuses a further effect with mutationMayHaveApplied:true,
// and every error the invocation ends with says mutationMayHaveApplied:
// true (docs/POLICY.md, "Rate limits").
func (h *HostCall) Effect() bool { return h.Audit == AuditMutation }

// Func implements a host call. args is the JSON the guest passed; the
// returned bytes are handed back to the guest: the binary layout of the
// contract's result type for a Define'd call (docs/ABI.md, "Host-call
// results"), the call's own format for a DefineRaw one. A returned error should
// be a *protocol.Error with a safe message; any other error reaches the
// guest as INTERNAL_ERROR with a generic message.
type Func func(ctx context.Context, call Call, args []byte) ([]byte, error)

// HostCall is one entry of a family's table. First-party tables build
// their entries with Define, from the call's lemon/hostcalls/contract
// description, so host and guest share its argument and result types.
type HostCall struct {
	// Name is the import name, "family.operation" (e.g. "fs.open").
	Name string
	// Params names the JSON fields of args, for docs and tests (Define
	// derives them from the contract's args type).
	Params []string
	// Capability the call requires (one of the Cap constants).
	Capability string
	// Audit is the effect class recorded in telemetry.
	Audit AuditClass
	// Func does the work.
	Func Func
	// SecretBlobs lets the call read secret blobs (vault value blobs) with
	// Call.Blob. For every other host call the gate hides them: Blob
	// answers false, and BlobSecret says why (docs/SECRETS.md).
	SecretBlobs bool

	// Spec is the contract description the entry was defined from (Args
	// and Result types); zero for an entry not built with Define.
	Spec contract.Spec
	// Errors are the errors Func itself can return, beyond the gate's
	// (docs/HOSTCALLS.md lists both).
	Errors []ErrorSpec
	// ResultJSON turns a successful result of Func into JSON (json.Marshal
	// of the contract's result type) for host-side tools and tests: a
	// Define'd call answers in the binary layout of docs/ABI.md,
	// "Host-call results". Its error is the binary decoder's
	// (wire.ErrMalformed). nil for a DefineRaw entry, whose Func answers
	// in its own raw format.
	ResultJSON func(result []byte) ([]byte, error)
}

// JSONFunc returns h's Func with a successful result turned into JSON by
// ResultJSON (unchanged for a DefineRaw entry), for host-side tools and
// tests that read results as JSON. A result ResultJSON cannot decode is
// an INTERNAL_ERROR.
func (h HostCall) JSONFunc() Func {
	if h.ResultJSON == nil {
		return h.Func
	}
	fn, toJSON := h.Func, h.ResultJSON
	return func(ctx context.Context, call Call, args []byte) ([]byte, error) {
		out, err := fn(ctx, call, args)
		if err != nil {
			return nil, err
		}
		js, err := toJSON(out)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInternal, "malformed binary result")
		}
		return js, nil
	}
}

// ReadsSecretBlobs returns h with SecretBlobs set: the call may read the
// invocation's secret blobs (vault.set stores a secret value).
func (h HostCall) ReadsSecretBlobs() HostCall {
	h.SecretBlobs = true
	return h
}

// ErrorSpec declares one error a host call can return: protocol error
// Code, Domain code ("" for none), and When it happens.
type ErrorSpec struct {
	Code   string
	Domain string
	When   string
}

// Err declares the error e (as the host call constructs it, so its code
// is the one it really carries) with the condition when.
func Err(e *protocol.Error, when string) ErrorSpec {
	s := ErrorSpec{Code: e.Code, When: when}
	if e.Details != nil {
		s.Domain = e.Details.Code
	}
	return s
}

// GateErrors are the errors any host call can return before its Func
// runs: from the gate (host/gate.go: capability, rate limits, deadline)
// and from the import itself (argument bounds). docs/HOSTCALLS.md lists
// them once for all calls.
var GateErrors = []ErrorSpec{
	{Code: protocol.CodeForbidden, Domain: protocol.DomainCapabilityDenied,
		When: "the call's capability is not in the effective capabilities (manifest ∩ node ceiling ∩ executionContext ∩ the served method's capability and uses)"},
	{Code: protocol.CodeForbidden, Domain: protocol.DomainWorkspaceReadOnly,
		When: "an effect (mutation) call under an execution context whose workspace is read_only"},
	{Code: protocol.CodeForbidden, Domain: protocol.DomainReadMethodEffect,
		When: "an effect (mutation) call made while serving a read-class method"},
	{Code: protocol.CodeRateLimited, Domain: protocol.DomainRateLimited,
		When: "a worker-policy rate rule for the module and call is exhausted (retrySafe:true before the request's first effect; after it, mutationMayHaveApplied:true)"},
	{Code: protocol.CodeTimeout, When: "the request deadline passed before the call"},
	{Code: protocol.CodeInvalidParams, When: "args are longer than 1 MiB"},
	{Code: protocol.CodeInvalidRequest, When: "args lie outside the module's memory"},
	{Code: protocol.CodeInternal, When: "the call failed in a way it does not describe (generic message)"},
}

// ErrInvalidArgs is the error every Define'd call returns for args that do
// not decode strictly into its contract args type.
var ErrInvalidArgs = ErrorSpec{Code: protocol.CodeInvalidParams,
	When: "args are not a JSON object of the contract's fields and types (unknown fields included)"}

// Define builds a table entry from the contract description c: the
// entry's Func decodes args strictly into A (protocol.DecodeParams's
// result and errors, an INVALID_PARAMS error naming the field, through
// the ABI codec lemon/host/abi/wire), calls fn, and encodes its R in the
// binary layout of host-call results (wire.AppendBinary; docs/ABI.md,
// "Host-call results"); ResultJSON turns such a result back into
// json.Marshal's JSON of R. An error from fn is returned as is (the gate
// turns a non-*protocol.Error into INTERNAL_ERROR) and travels as the JSON
// protocol error object. errs are the errors fn can return;
// ErrInvalidArgs is added first. Define panics when R has no binary
// layout (wire.CheckBinary: an interface, any, a custom marshaler): a
// table is static, and such a call must use DefineRaw.
func Define[A, R any](c contract.Call[A, R], capability string, audit AuditClass,
	fn func(ctx context.Context, call Call, args A) (R, error), errs ...ErrorSpec) HostCall {
	if err := wire.CheckBinary(reflect.TypeFor[R]()); err != nil {
		panic(fmt.Sprintf("hostcalls.Define(%s): result has no binary layout: %v", c.Name(), err))
	}
	return HostCall{
		Name: c.Name(), Params: JSONFields(reflect.TypeFor[A]()), Capability: capability, Audit: audit,
		Spec: c.Spec(), Errors: append([]ErrorSpec{ErrInvalidArgs}, errs...),
		Func: func(ctx context.Context, call Call, args []byte) ([]byte, error) {
			var a A
			// {} decodes to the zero A whatever A is (the common args of
			// calls that take none); skip the strict decoder for it.
			if len(args) != 2 || args[0] != '{' || args[1] != '}' {
				if perr := wire.DecodeParams(args, &a); perr != nil {
					return nil, perr
				}
			}
			r, err := fn(ctx, call, a)
			if err != nil {
				return nil, err
			}
			// One buffer the size of most results (fs.open's is about
			// 150 bytes) instead of growing from nothing.
			b, err := wire.AppendBinary(make([]byte, 0, 256), r)
			if err != nil {
				return nil, protocol.Errorf(protocol.CodeInternal, "internal error")
			}
			return b, nil
		},
		ResultJSON: func(b []byte) ([]byte, error) {
			var r R
			if err := wire.UnmarshalBinary(b, &r); err != nil {
				return nil, err
			}
			return wire.Marshal(r)
		},
	}
}

// DefineRaw builds a table entry from the contract description c like
// Define, for a call whose Func decodes its own args (strictly, as Define
// would) or answers with something other than JSON (blob.read returns the
// bytes themselves). errs are the errors fn can return; ErrInvalidArgs is
// added first.
func DefineRaw(c contract.Spec, capability string, audit AuditClass, fn Func, errs ...ErrorSpec) HostCall {
	return HostCall{Name: c.Name, Params: JSONFields(c.Args), Capability: capability, Audit: audit,
		Spec: c, Errors: append([]ErrorSpec{ErrInvalidArgs}, errs...), Func: fn}
}

// JSONFields returns the JSON field names of struct type t in order
// (fields of embedded structs inline, "-" skipped); never nil.
func JSONFields(t reflect.Type) []string {
	out := []string{}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return out
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" || !f.IsExported() {
			continue
		}
		if f.Anonymous && tag == "" {
			out = append(out, JSONFields(f.Type)...)
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		out = append(out, tag)
	}
	return out
}

// BlobKeeper is implemented by the host's Call: the secrecy of a blob and
// a way to forget one. Families that hand blob bytes to a guest refuse a
// blob for which BlobSecret is true; a Call that does not implement
// BlobKeeper offers no blob to such families.
type BlobKeeper interface {
	// BlobSecret reports whether blob id exists and is secret: an input
	// blob of a method declared secret (abi.BlobSpec.Secret) or of a
	// method needing capability "secrets".
	BlobSecret(id uint32) bool
	// DropBlob forgets blob id (freeing its bytes before the invocation
	// ends) and reports whether it existed.
	DropBlob(id uint32) bool
}

// Call is what a host call sees of the invocation that made it.
type Call interface {
	// Module is the calling module's family (the store namespace).
	Module() string
	// Method is the spec method being served (e.g. "node.fs.read").
	Method() string
	// Invocation describes the request being served.
	Invocation() Invocation
	// Blob returns an invocation blob by id: input blobs decoded by the
	// host before the guest ran, or blobs made by earlier host calls.
	Blob(id uint32) ([]byte, bool)
	// PutBlob stores bytes as a new invocation blob and returns its id. The
	// guest can name it in later host calls or in its result.
	PutBlob(b []byte) uint32
	// Await registers an operation the guest may suspend on (docs/ABI.md: a
	// long wait must not pin an instance). done closes when it completes.
	Await(done <-chan struct{}) uint32
}

// Invocation is the routing context of one request.
type Invocation struct {
	InvokeID          string          `json:"invokeId"`
	NodeID            string          `json:"nodeId"`
	SessionGeneration uint64          `json:"sessionGeneration"`
	ExecutionContext  json.RawMessage `json:"executionContext,omitempty"`
	// MaxResultBytes is the largest success payload, in bytes of JSON, the
	// node's connection can deliver for this request (from the negotiated
	// maxPayload; protocol.InvokeRequest.MaxResultBytes). 0 means unknown:
	// use ResultRoom. Host calls that return base64 bytes (process output,
	// file chunks) size them with protocol.Base64Budget from it. Not sent
	// to the guest.
	MaxResultBytes int `json:"-"`
	// Authority is what the node enforces of the request's execution
	// context once it has parsed, checked and bound it (host.Invoke;
	// docs/POLICY.md, "Node enforcement"). Not sent to the guest. The zero
	// value (no context) leaves the node's own policy alone.
	Authority Authority `json:"-"`
}

// Authority is the node-side view of a request's execution context, as
// the host calls enforce it (docs/POLICY.md, "Node enforcement"). Every
// field only narrows the node's own policy.
type Authority struct {
	// Principal is the context's principal: the operator entry the request
	// acts for ("" without a context). Process runs record it; the audit
	// records it per host call.
	Principal string
	// Workspace is the canonical absolute workspace root bound on this
	// node; "" means the node's allowed roots. With a workspace, fs host
	// calls and process cwds resolve through a view whose only root is it.
	Workspace string
	// ReadOnly is workspace mode read_only: every effect host call is
	// refused at the gate.
	ReadOnly bool
	// MaxFileBytes bounds the size of a file an fs write leaves, in bytes;
	// 0 means no bound beyond the node's.
	MaxFileBytes int64
	// MaxTimeoutMs bounds a process run's timeoutMs; 0 means no bound
	// beyond the node's.
	MaxTimeoutMs int64
	// MaxOutputBytes bounds a process run's maxOutputBytes; 0 means no
	// bound beyond the node's.
	MaxOutputBytes int64
	// Commands is the context's command allow list when Restricted: only
	// these commands may run (intersected with the node's policy); a bare
	// name allows only that bare argv[0]. Blocked adds blocked commands.
	Commands   []string
	Restricted bool
	Blocked    []string
	// Sandbox asks for a sandboxed run: no_new_privs, and a cgroup of the
	// run's own, or the run is refused.
	Sandbox bool
}

// ResultRoom returns MaxResultBytes, or protocol.DefaultMaxPayload when it
// is unknown (a host driven directly, as in tests and conformance runs).
func (i Invocation) ResultRoom() int {
	if i.MaxResultBytes > 0 {
		return i.MaxResultBytes
	}
	return protocol.DefaultMaxPayload
}

// Table is a family's list of host calls.
type Table []HostCall
