package hostcalls_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"lemon/host/abi/wire"
	"lemon/hostcalls"
	"lemon/hostcalls/contract"
	"lemon/protocol"
)

// TestDefineDecodesAndEncodesTheContractTypes: a Define'd entry decodes
// args strictly into the contract's args type, hands fn the decoded
// value, encodes fn's result in the binary layout (ResultJSON gives its
// JSON back), and passes fn's error through.
func TestDefineDecodesAndEncodesTheContractTypes(t *testing.T) {
	var got contract.StoreListArgs
	hc := hostcalls.Define(contract.StoreList, hostcalls.CapRead, hostcalls.AuditRead,
		func(_ context.Context, _ hostcalls.Call, a contract.StoreListArgs) (contract.StoreListResult, error) {
			got = a
			if a.Prefix == "fail" {
				return contract.StoreListResult{}, protocol.InvalidParams("prefix", "no")
			}
			return contract.StoreListResult{Keys: []string{"a", "b"}, More: true}, nil
		}, hostcalls.ErrorSpec{Code: protocol.CodeInvalidParams, When: "w"})
	if hc.Name != "store.list" || hc.Spec.Args != reflect.TypeFor[contract.StoreListArgs]() ||
		hc.Spec.Result != reflect.TypeFor[contract.StoreListResult]() ||
		!reflect.DeepEqual(hc.Params, []string{"prefix", "after", "limit", "volatile"}) || len(hc.Errors) != 2 || hc.Errors[0] != hostcalls.ErrInvalidArgs {
		t.Fatalf("entry %+v", hc)
	}
	out, err := hc.Func(context.Background(), nil, []byte(`{"prefix":"p","after":"x","limit":7}`))
	var res contract.StoreListResult
	if err != nil || wire.UnmarshalBinary(out, &res) != nil || !reflect.DeepEqual(res, contract.StoreListResult{Keys: []string{"a", "b"}, More: true}) ||
		got != (contract.StoreListArgs{Prefix: "p", After: "x", Limit: 7}) {
		t.Fatalf("call = %x, %v; args %+v", out, err, got)
	}
	if js, err := hc.ResultJSON(out); err != nil || string(js) != `{"keys":["a","b"],"more":true}` {
		t.Fatalf("ResultJSON = %s, %v", js, err)
	}
	if _, err := hc.ResultJSON(out[:len(out)-1]); err == nil {
		t.Fatal("ResultJSON of a truncated result succeeded")
	}
	for args, field := range map[string]string{`{"prefix":"p","extra":1}`: "extra", `{"limit":"7"}`: "limit"} {
		_, err := hc.Func(context.Background(), nil, []byte(args))
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeInvalidParams || pe.Details == nil || pe.Details.Field != field {
			t.Fatalf("args %s: %v, want INVALID_PARAMS naming %s", args, err, field)
		}
	}
	if _, err := hc.Func(context.Background(), nil, []byte(`{"prefix":"fail"}`)); err == nil || err.Error() != "INVALID_PARAMS: no" {
		t.Fatalf("fn error = %v", err)
	}
	// Empty args: the guest sends {}; null and nothing decode the same.
	none := hostcalls.Define(contract.SysinfoSnapshotCall, hostcalls.CapNone, hostcalls.AuditRead,
		func(context.Context, hostcalls.Call, contract.Empty) (contract.SysinfoFigures, error) {
			return contract.SysinfoFigures{CPUCount: 7}, nil
		})
	for _, args := range []string{`{}`, ``, `null`} {
		out, err := none.Func(context.Background(), nil, []byte(args))
		var r contract.SysinfoFigures
		if err != nil || wire.UnmarshalBinary(out, &r) != nil || r.CPUCount != 7 {
			t.Fatalf("args %q: %x, %v", args, out, err)
		}
	}
	if _, err := none.Func(context.Background(), nil, []byte(`{"x":1}`)); err == nil {
		t.Fatal("unknown field accepted for a call without args")
	}
	// A result type without a binary layout (any) is refused when the
	// table is built; such a call uses DefineRaw (config.get does).
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("Define accepted a result holding any")
			}
		}()
		hostcalls.Define(contract.ConfigGetCall, hostcalls.CapNone, hostcalls.AuditRead,
			func(context.Context, hostcalls.Call, contract.Empty) (contract.Settings, error) {
				return contract.Settings{}, nil
			})
	}()
	if raw := hostcalls.DefineRaw(contract.ConfigGetCall.Spec(), hostcalls.CapNone, hostcalls.AuditRead, nil); raw.ResultJSON != nil {
		t.Fatal("DefineRaw entry has a ResultJSON")
	}
}

func TestJSONFields(t *testing.T) {
	if got := hostcalls.JSONFields(reflect.TypeFor[protocol.FSReadCall]()); !reflect.DeepEqual(got,
		[]string{"path", "dataBase64", "offset", "length", "size", "mime", "eof", "blob"}) {
		t.Fatalf("embedded fields: %v", got)
	}
	if got := hostcalls.JSONFields(reflect.TypeFor[contract.Empty]()); got == nil || len(got) != 0 {
		t.Fatalf("Empty: %#v", got)
	}
}

// BenchmarkDefine measures what a Define'd entry adds around its handler:
// the strict decode into the contract args type and the binary encode
// of the result (go test -run '^$' -bench Define ./hostcalls).
func BenchmarkDefine(b *testing.B) {
	empty := hostcalls.Define(contract.SysinfoSnapshotCall, hostcalls.CapHostInfo, hostcalls.AuditMeta,
		func(context.Context, hostcalls.Call, contract.Empty) (contract.SysinfoFigures, error) {
			return contract.SysinfoFigures{Hostname: "h", GOOS: "linux", CPUCount: 2}, nil
		})
	stat := hostcalls.Define(contract.FSOpen, hostcalls.CapRead, hostcalls.AuditMeta,
		func(context.Context, hostcalls.Call, contract.FSOpenArgs) (contract.FSOpenResult, error) {
			return contract.FSOpenResult{Handle: 1, Path: "/a/b", Stat: contract.FSRawStat{Mode: 0o100644, Size: 1}}, nil
		})
	for _, c := range []struct {
		name string
		fn   hostcalls.Func
		args string
	}{{"empty", empty.Func, `{}`}, {"stat", stat.Func, `{"path":"/a/b"}`}} {
		b.Run(c.name, func(b *testing.B) {
			args := []byte(c.args)
			for b.Loop() {
				if _, err := c.fn(context.Background(), nil, args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
