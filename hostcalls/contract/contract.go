// Package contract is the one description of every host call that both
// sides of the module ABI compile against: its import name and the Go
// types of its JSON arguments and its result (binary, docs/ABI.md
// "Host-call results"; docs/HOSTCALLS.md, generated from it and the host
// tables). The host's tables (hostcalls/*/table.go) decode args into these
// types and encode results from them
// (hostcalls.Define); the guest SDK wrappers (plugins/sdk/fs, store,
// spawn, vault, sysinfo) send and read the same types, so no module keeps
// a hand-copied mirror of a host type.
//
// It depends on the standard library only, so it compiles for wasip1.
// It does not import lemon/protocol: host calls are primitives with raw
// shapes of their own, and the spec's payloads are shaped by the modules
// (docs/ABI.md; TestStdlibOnly and TestNoPayloadShapes keep it so).
package contract

import (
	"reflect"
	"sort"
)

// Call names one host call and, through its type parameters, the Go types
// of its JSON arguments (A) and its result (R, in the binary layout of
// docs/ABI.md, "Host-call results", for a hostcalls.Define'd call). The value is the import name
// of module "lemon" ("family.operation").
type Call[A, R any] struct{ name string }

// Name is the import name, e.g. "fs.open".
func (c Call[A, R]) Name() string { return c.name }

// Spec returns the type-erased description of c.
func (c Call[A, R]) Spec() Spec {
	return Spec{Name: c.name, Args: reflect.TypeFor[A](), Result: reflect.TypeFor[R]()}
}

// Spec is a host call's description without type parameters, for tables,
// docs and tests.
type Spec struct {
	Name   string
	Args   reflect.Type // a struct type; its JSON fields are the call's arguments
	Result reflect.Type // the type the result decodes into
	// Doc is one or more sentences on what the call does (docs/HOSTCALLS.md).
	Doc string
}

// Empty is the args of a call that takes none (the guest sends {}), and
// the result of a call that answers {}.
type Empty struct{}

// PayloadResult is the result of the "_payload" host calls: the id of an
// invocation blob holding a method's whole payload object, which the
// module returns unread as sdk.Result.PayloadBlob (docs/ABI.md). 0 never
// names a blob.
type PayloadResult struct {
	PayloadBlob uint32 `json:"payloadBlob" doc:"id of the blob holding the whole method payload"`
}

// Specs returns every host call of every family, sorted by name.
// Test-only calls (host tests' "test.*") are not part of the contract.
func Specs() []Spec {
	var out []Spec
	for _, f := range [][]Spec{fsSpecs(), fsMutSpecs(), fsXferSpecs(), storeSpecs(), spawnSpecs(), vaultSpecs(), sysinfoSpecs(), guestSpecs()} {
		out = append(out, f...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the spec of the host call named name.
func Lookup(name string) (Spec, bool) {
	for _, s := range Specs() {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}

func spec[A, R any](c Call[A, R], doc string) Spec {
	s := c.Spec()
	s.Doc = doc
	return s
}
