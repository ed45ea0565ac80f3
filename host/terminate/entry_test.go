package terminate_test

import (
	"context"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"lemon/host/terminate"
)

// leb appends v as an unsigned LEB128.
func leb(dst []byte, v uint32) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

// module assembles a binary from (id, contents) sections; each code
// body is given without its size prefix.
func module(secs ...any) []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	for i := 0; i < len(secs); i += 2 {
		id := secs[i].(int)
		var body []byte
		if bodies, ok := secs[i+1].([]string); ok {
			body = leb(nil, uint32(len(bodies)))
			for _, b := range bodies {
				body = leb(body, uint32(len(b)))
				body = append(body, b...)
			}
		} else {
			body = []byte(secs[i+1].(string))
		}
		out = append(out, byte(id))
		out = leb(out, uint32(len(body)))
		out = append(out, body...)
	}
	return out
}

// bodySizes returns the sizes of the code section's function bodies.
func bodySizes(t *testing.T, wasm []byte) []uint32 {
	t.Helper()
	pos := 8
	u32 := func() uint32 {
		var v uint32
		for shift := 0; ; shift += 7 {
			c := wasm[pos]
			pos++
			v |= uint32(c&0x7F) << shift
			if c&0x80 == 0 {
				return v
			}
		}
	}
	for pos < len(wasm) {
		id := wasm[pos]
		pos++
		n := int(u32())
		if id != 10 {
			pos += n
			continue
		}
		var sizes []uint32
		for c := u32(); c > 0; c-- {
			s := u32()
			sizes = append(sizes, s)
			pos += int(s)
		}
		return sizes
	}
	t.Fatal("no code section")
	return nil
}

const (
	types = "\x02\x60\x01\x7f\x00\x60\x00\x00" // 0: (i32) -> (), 1: () -> ()
	// tree calls callee (a function index) twice with n-1 if n != 0.
	treeHead = "\x00\x20\x00\x04\x40"
	treeTail = "\x0b\x0b"
	runBody  = "\x00\x41\x3c\x10\x00\x0b" // f(60)
)

// mutualRecursion is f(n) = if n { g(n-1); g(n-1) }; g(n) = f(n); run() =
// f(60), with no loop: neither f nor g calls itself directly.
var mutualRecursion = module(
	1, types,
	3, "\x03\x00\x00\x01",
	7, "\x01\x03run\x00\x02",
	10, []string{
		treeHead + "\x20\x00\x41\x01\x6b\x10\x01" + "\x20\x00\x41\x01\x6b\x10\x01" + treeTail,
		"\x00\x20\x00\x10\x00\x0b",
		runBody,
	},
)

// indirectRecursion is f(n) = if n { table[0](n-1); table[0](n-1) } with
// table[0] = f; run() = f(60): f has no direct call edge at all.
var indirectRecursion = module(
	1, types,
	3, "\x02\x00\x01",
	4, "\x01\x70\x00\x01",
	7, "\x01\x03run\x00\x01",
	9, "\x01\x00\x41\x00\x0b\x01\x00",
	10, []string{
		treeHead + "\x20\x00\x41\x01\x6b\x41\x00\x11\x00\x00" + "\x20\x00\x41\x01\x6b\x41\x00\x11\x00\x00" + treeTail,
		runBody,
	},
)

func runUntilDeadline(t *testing.T, src []byte) {
	t.Helper()
	ctx := context.Background()
	wasm, err := terminate.Instrument(src)
	if err != nil {
		t.Fatal(err)
	}
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	defer r.Close(ctx)
	mod, err := r.Instantiate(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	g := mod.ExportedGlobal(terminate.StopExport).(api.MutableGlobal)
	c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	release := terminate.Arm(c, g)
	defer release()
	done := make(chan error, 1)
	go func() { _, err := mod.ExportedFunction("run").Call(c); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("run returned without a trap")
		}
	case <-time.After(5 * time.Second):
		g.Set(1) // best effort, so that the goroutine ends
		t.Fatalf("the recursion still runs 5s after its 200ms deadline")
	}
}

func TestMutualRecursionStops(t *testing.T)   { runUntilDeadline(t, mutualRecursion) }
func TestIndirectRecursionStops(t *testing.T) { runUntilDeadline(t, indirectRecursion) }

// TestEntryCheckOnlyInCycles: of a module with an import, a leaf, a
// caller of the leaf and the import, a self-recursive function, a pair
// of mutually recursive functions and a caller through call_indirect,
// exactly the last four bodies grow by the check at entry.
func TestEntryCheckOnlyInCycles(t *testing.T) {
	src := module(
		1, types,
		2, "\x01\x01m\x01h\x00\x01", // import m.h: () -> (), function 0
		3, "\x06\x00\x00\x00\x00\x00\x00",
		4, "\x01\x70\x00\x01",
		10, []string{
			"\x00\x0b", // 1 leaf
			"\x00\x20\x00\x10\x01\x10\x00\x20\x00\x10\x01\x0b", // 2 calls leaf, h, leaf
			"\x00\x20\x00\x04\x40\x20\x00\x10\x03\x0b\x0b",     // 3 calls itself
			"\x00\x20\x00\x10\x05\x0b",                         // 4 calls 5
			"\x00\x20\x00\x10\x04\x0b",                         // 5 calls 4
			"\x00\x20\x00\x41\x00\x11\x00\x00\x0b",             // 6 call_indirect
		},
	)
	wasm, err := terminate.Instrument(src)
	if err != nil {
		t.Fatal(err)
	}
	before, after := bodySizes(t, src), bodySizes(t, wasm)
	grown := make([]uint32, len(before))
	for i := range before {
		grown[i] = after[i] - before[i]
	}
	check := grown[2]
	if check == 0 {
		t.Fatalf("growth %v: the self-recursive function got no check", grown)
	}
	want := []uint32{0, 0, check, check, check, check}
	for i := range want {
		if grown[i] != want[i] {
			t.Fatalf("body growth %v, want %v (leaf and its caller unchanged)", grown, want)
		}
	}
	// The result still compiles.
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	if _, err := r.CompileModule(ctx, wasm); err != nil {
		t.Fatal(err)
	}
}
