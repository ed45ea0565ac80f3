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
	"regexp"

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
)

// Effect reports whether the call is declared as an effect on node state
// (Audit is AuditMutation). Once such a call has succeeded in an
// invocation, the gate no longer rate-limits that invocation's non-effect
// host calls, refuses a further effect with mutationMayHaveApplied:true,
// and every error the invocation ends with says mutationMayHaveApplied:
// true (docs/POLICY.md, "Rate limits").
func (h *HostCall) Effect() bool { return h.Audit == AuditMutation }

// Func implements a host call. args is the JSON the guest passed; the
// returned bytes are JSON handed back to the guest. A returned error should
// be a *protocol.Error with a safe message; any other error reaches the
// guest as INTERNAL_ERROR with a generic message.
type Func func(ctx context.Context, call Call, args []byte) ([]byte, error)

// HostCall is one entry of a family's table.
type HostCall struct {
	// Name is the import name, "family.operation" (e.g. "fs.stat").
	Name string
	// Params names the JSON fields of args, for docs and tests.
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
