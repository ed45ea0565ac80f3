package contract_test

import (
	"reflect"
	"sort"
	"testing"

	"lemon/hostcalls/contract"
)

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
// their own raw contract types (docs/HOSTCALLS.md). TestStdlibOnly checks
// the same from the other side: the package imports no lemon package.
func TestNoPayloadShapes(t *testing.T) {
	for _, s := range contract.Specs() {
		found := map[string]bool{}
		protocolTypes(s.Args, map[reflect.Type]bool{}, found)
		protocolTypes(s.Result, map[reflect.Type]bool{}, found)
		if len(found) == 0 {
			continue
		}
		var names []string
		for n := range found {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Errorf("%s: args %v / result %v hold protocol types %v", s.Name, s.Args, s.Result, names)
	}
}
