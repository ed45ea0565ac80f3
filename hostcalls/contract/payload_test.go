package contract_test

import (
	"reflect"
	"sort"
	"testing"

	"lemon/hostcalls/contract"
)

// payloadShapeAllowlist names the host calls whose args or result still
// hold a lemon/protocol type while other branches of issue 11 move them
// (docs/HOSTCALLS.md). Empty it once they are merged: every host call is
// then a primitive with contract types only.
var payloadShapeAllowlist = map[string]bool{
	// fs read side (i-fsread): replaced by handle primitives.
	"fs.list": true, "fs.stat": true, "fs.read": true,
}

// protocolTypes returns the named lemon/protocol types reachable from t
// (fields, elements, pointers, map keys and values; embedded fields
// included).
func protocolTypes(t reflect.Type, seen map[reflect.Type]bool, out map[string]bool) {
	if seen[t] {
		return
	}
	seen[t] = true
	if t.PkgPath() == "lemon/protocol" {
		out[t.String()] = true
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		protocolTypes(t.Elem(), seen, out)
	case reflect.Map:
		protocolTypes(t.Key(), seen, out)
		protocolTypes(t.Elem(), seen, out)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			protocolTypes(t.Field(i).Type, seen, out)
		}
	}
}

// TestNoPayloadShapes: no host call's args or result holds a type of
// lemon/protocol (a spec payload shape); host calls are primitives with
// their own raw contract types (docs/HOSTCALLS.md). The allowlist only
// shrinks: an entry whose call is clean (or gone) fails too.
func TestNoPayloadShapes(t *testing.T) {
	clean := map[string]bool{}
	for _, s := range contract.Specs() {
		found := map[string]bool{}
		protocolTypes(s.Args, map[reflect.Type]bool{}, found)
		protocolTypes(s.Result, map[reflect.Type]bool{}, found)
		if len(found) == 0 {
			clean[s.Name] = true
			continue
		}
		if !payloadShapeAllowlist[s.Name] {
			var names []string
			for n := range found {
				names = append(names, n)
			}
			sort.Strings(names)
			t.Errorf("%s: args %v / result %v hold protocol types %v", s.Name, s.Args, s.Result, names)
		}
	}
	for name := range payloadShapeAllowlist {
		if _, ok := contract.Lookup(name); !ok || clean[name] {
			t.Errorf("payloadShapeAllowlist names %s, which is clean or gone: remove it", name)
		}
	}
}
