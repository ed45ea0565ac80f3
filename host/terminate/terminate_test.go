package terminate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"lemon/host/hosttest"
	"lemon/host/terminate"
)

// tiny is a hand-assembled module:
//
//	(global $g (mut i32) (i32.const 7))            ;; only with globals
//	(func (export "count") (param $n i32) (result i32) (local $i i32)
//	  loop  i += 1; br_if 0 (i < n)  end  local.get $i)
//	(func (export "spin") loop br 0 end)
func tiny(withGlobal bool) []byte {
	b := []byte("\x00asm\x01\x00\x00\x00")
	sec := func(id byte, body ...byte) {
		b = append(b, id, byte(len(body)))
		b = append(b, body...)
	}
	sec(1, 2, 0x60, 1, 0x7F, 1, 0x7F, 0x60, 0, 0)
	sec(3, 2, 0, 1)
	if withGlobal {
		sec(6, 1, 0x7F, 1, 0x41, 7, 0x0B)
	}
	exports := []byte{2, 5, 'c', 'o', 'u', 'n', 't', 0, 0, 4, 's', 'p', 'i', 'n', 0, 1}
	if withGlobal {
		exports[0] = 3
		exports = append(exports, 1, 'g', 3, 0)
	}
	sec(7, exports...)
	count := []byte{1, 1, 0x7F,
		0x03, 0x40,
		0x20, 1, 0x41, 1, 0x6A, 0x21, 1,
		0x20, 1, 0x20, 0, 0x49, 0x0D, 0,
		0x0B,
		0x20, 1,
		0x0B}
	spin := []byte{0, 0x03, 0x40, 0x0C, 0, 0x0B, 0x0B}
	code := []byte{2, byte(len(count))}
	code = append(code, count...)
	code = append(code, byte(len(spin)))
	code = append(code, spin...)
	sec(10, code...)
	// A name section (custom) and a stale debug section.
	sec(0, append([]byte{4}, "name"...)...)
	sec(0, append([]byte{11}, ".debug_info"...)...)
	return b
}

// debugSection is tiny's trailing .debug_info section, which the runtime
// itself refuses (empty DWARF).
var debugSection = append([]byte{0, 12, 11}, ".debug_info"...)

func TestTinyLoopRunsAndStopsAtDeadline(t *testing.T) {
	for _, withGlobal := range []bool{false, true} {
		out, err := terminate.Instrument(tiny(withGlobal))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(out, []byte(".debug_info")) || !bytes.Contains(out, []byte("name")) {
			t.Fatalf("custom sections: want name kept, .debug_info dropped")
		}
		ctx := context.Background()
		r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
		defer r.Close(ctx)
		mod, err := r.Instantiate(ctx, out)
		if err != nil {
			t.Fatalf("instrumented module does not instantiate: %v", err)
		}
		res, err := mod.ExportedFunction("count").Call(ctx, 100)
		if err != nil || res[0] != 100 {
			t.Fatalf("count(100) = %v, %v; want 100", res, err)
		}
		if withGlobal {
			if g := mod.ExportedGlobal("g"); g == nil || g.Get() != 7 {
				t.Fatalf("the module's own global moved")
			}
		}
		stop := mod.ExportedGlobal(terminate.StopExport)
		if stop == nil || stop.Get() != 0 {
			t.Fatalf("no %s global exported at 0", terminate.StopExport)
		}
		flag, ok := stop.(terminate.Flag)
		if !ok {
			t.Fatalf("%s is not mutable", terminate.StopExport)
		}
		dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		release := terminate.Arm(dctx, flag)
		_, err = mod.ExportedFunction("spin").Call(dctx)
		fired := release()
		cancel()
		if err == nil || !strings.Contains(err.Error(), "unreachable") || !fired {
			t.Fatalf("spin: err %v fired %v; want an unreachable trap after the deadline", err, fired)
		}
		if stop.Get() != 1 {
			t.Fatalf("stop flag = %d, want 1", stop.Get())
		}
	}
}

// TestSpinningGuestYieldsToGC: a guest looping forever must not stall a
// stop-the-world (compiled wasm cannot be preempted; the check yields every
// YieldEvery iterations), or runtime.GC below, and the timer ending the
// deadline, would wait for ever.
func TestSpinningGuestYieldsToGC(t *testing.T) {
	out, err := terminate.Instrument(bytes.TrimSuffix(tiny(false), debugSection))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	defer r.Close(ctx)
	var mods []api.Module
	for i := 0; i < runtime.GOMAXPROCS(0); i++ {
		mod, err := r.InstantiateModule(ctx, mustCompile(t, r, out), wazero.NewModuleConfig().WithName(fmt.Sprint("m", i)))
		if err != nil {
			t.Fatal(err)
		}
		mods = append(mods, mod)
	}
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	errs := make(chan error, len(mods))
	for _, mod := range mods {
		go func() {
			release := terminate.Arm(dctx, mod.ExportedGlobal(terminate.StopExport).(api.MutableGlobal))
			_, err := mod.ExportedFunction("spin").Call(dctx)
			release()
			errs <- err
		}()
	}
	// Every P is now running a spinning guest.
	for i := 0; i < 20; i++ {
		runtime.GC()
	}
	for range mods {
		if err := <-errs; err == nil || !strings.Contains(err.Error(), "unreachable") {
			t.Fatalf("spin: %v, want an unreachable trap", err)
		}
	}
}

func mustCompile(t *testing.T, r wazero.Runtime, wasm []byte) wazero.CompiledModule {
	c, err := r.CompileModule(context.Background(), wasm)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestArmReleasedBeforeDeadlineLeavesFlag(t *testing.T) {
	var f flag
	ctx, cancel := context.WithCancel(context.Background())
	release := terminate.Arm(ctx, &f)
	if release() {
		t.Fatal("release reported fired before the context ended")
	}
	cancel()
	if f != 0 {
		t.Fatalf("flag set after release: %d", f)
	}
	if terminate.Arm(ctx, &f)() != true || f != 1 {
		t.Fatalf("an ended context must set the flag at once")
	}
	if terminate.Arm(context.Background(), nil)() {
		t.Fatal("nil flag fired")
	}
}

type flag uint64

func (f *flag) Set(v uint64) { *f = flag(v) }

func TestRefusals(t *testing.T) {
	base := tiny(false)
	codeAt := bytes.Index(base, []byte{0x0A})
	for _, tc := range []struct {
		name string
		wasm []byte
		want string
	}{
		{"bad magic", []byte("\x00asx\x01\x00\x00\x00"), "bad magic"},
		{"truncated section", base[:len(base)-3], "section 0 is truncated"},
		{"truncated code section", base[:codeAt+10], "section 10 is truncated"},
		{"unknown opcode", bytes.Replace(base, []byte{0x0C, 0, 0x0B}, []byte{0x27, 0, 0x0B}, 1), "unknown opcode 0x27"},
		{"unknown 0xFC opcode", bytes.Replace(base, []byte{0x0C, 0, 0x0B}, []byte{0xFC, 18, 0x0B}, 1), "unknown opcode 0xFC 18"},
		{"count past section", []byte("\x00asm\x01\x00\x00\x00\x04\x0b\xf7\xf7\xf700000000"), "claims more entries"},
		{"type count past section", []byte("\x00asm\x01\x00\x00\x00\x01\x09\x02\x60\xff\xff\xff\x7f\x60\x00\x00"), "claims 268435455 value types"},
		{"body without end", bytes.Replace(base, []byte{0x0C, 0, 0x0B, 0x0B}, []byte{0x0C, 0, 0x0B, 0x01}, 1), "does not end with end"},
		{"export taken", bytes.Replace(base, []byte("\x04spin"), []byte("\x0alemon_stop"), 1), "already exports"},
		{"export taken (start)", bytes.Replace(base, []byte("\x04spin"), []byte("\x0blemon_start"), 1), "already exports"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.HasPrefix(tc.name, "export taken") {
				// Fix the export section's size for the longer name.
				i := bytes.Index(tc.wasm, []byte{7, 16})
				tc.wasm[i+1] = byte(16 + len(tc.wasm) - len(base))
			}
			_, err := terminate.Instrument(tc.wasm)
			var te *terminate.Error
			if err == nil || !errors.As(err, &te) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a *terminate.Error containing %q", err, tc.want)
			}
			if strings.HasPrefix(tc.name, "export taken") && !errors.Is(err, terminate.ErrExportTaken) {
				t.Fatalf("err = %v, want ErrExportTaken", err)
			}
		})
	}
}

// withLocals is a module of one function declaring n i32 locals.
func withLocals(n uint32) []byte {
	body := append([]byte{1}, appendLEB(nil, n)...)
	body = append(body, 0x7F, 0x0B)
	code := append([]byte{1}, appendLEB(nil, uint32(len(body)))...)
	code = append(code, body...)
	b := []byte("\x00asm\x01\x00\x00\x00\x01\x04\x01\x60\x00\x00\x03\x02\x01\x00\x0a")
	b = append(b, appendLEB(nil, uint32(len(code)))...)
	return append(b, code...)
}

func appendLEB(dst []byte, v uint32) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

func TestMaxLocals(t *testing.T) {
	out, err := terminate.Instrument(withLocals(terminate.MaxLocals))
	if err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	if _, err := r.CompileModule(ctx, out); err != nil {
		t.Fatalf("at the limit, instrumented: %v", err)
	}
	if _, err := terminate.Instrument(withLocals(terminate.MaxLocals + 1)); err == nil || !strings.Contains(err.Error(), "more than 65536 locals") {
		t.Fatalf("one past the limit: %v", err)
	}
}

func TestUnknownOpcodeOffset(t *testing.T) {
	base := tiny(false)
	i := bytes.Index(base, []byte{0x0C, 0, 0x0B})
	bad := append([]byte(nil), base...)
	bad[i] = 0x27
	_, err := terminate.Instrument(bad)
	var te *terminate.Error
	if !errors.As(err, &te) || te.Offset != i {
		t.Fatalf("err = %v, want offset %d", err, i)
	}
}

// TestModulesInstrumentAndCompile instruments every first-party module and
// every test module; each must compile and keep its exports.
func TestModulesInstrumentAndCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the test modules")
	}
	mods := map[string][]byte{}
	set := filepath.Join(hosttest.RepoRoot(), "host/moduleset/defaultset/set")
	files, _ := filepath.Glob(filepath.Join(set, "*.wasm"))
	if len(files) == 0 {
		t.Fatalf("no modules in %s: run ./build.sh", set)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		mods[filepath.Base(f)] = b
	}
	dirs, _ := filepath.Glob(filepath.Join(hosttest.RepoRoot(), "host/testdata/*"))
	for _, d := range dirs {
		mods["testdata/"+filepath.Base(d)] = hosttest.Build(t, "host/testdata/"+filepath.Base(d))
	}
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	defer r.Close(ctx)
	for name, wasm := range mods {
		out, err := terminate.Instrument(wasm)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		loops := bytes.Count(out, []byte{0x41, 0x00, 0x40, 0x00, 0x1A}) // the yield
		if len(out) <= len(wasm) || loops == 0 {
			t.Fatalf("%s: no checks inserted (%d → %d bytes)", name, len(wasm), len(out))
		}
		c, err := r.CompileModule(ctx, out)
		if err != nil {
			t.Fatalf("%s: instrumented module does not compile: %v", name, err)
		}
		orig, err := r.CompileModule(ctx, wasm)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.ExportedFunctions()) != len(orig.ExportedFunctions()) {
			t.Fatalf("%s: exports changed", name)
		}
		c.Close(ctx)
		orig.Close(ctx)
		t.Logf("%s: %d → %d bytes", name, len(wasm), len(out))
	}
}

// bigLEB reports whether b holds three continuation bytes in a row (a LEB
// of 2^21 or more).
func bigLEB(b []byte) bool {
	run := 0
	for _, c := range b {
		if c&0x80 == 0 {
			run = 0
		} else if run++; run >= 3 {
			return true
		}
	}
	return false
}

func FuzzInstrument(f *testing.F) {
	f.Add(tiny(false))
	f.Add(bytes.TrimSuffix(tiny(false), debugSection))
	f.Add(bytes.TrimSuffix(tiny(true), debugSection))
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	f.Fuzz(func(t *testing.T, wasm []byte) {
		out, err := terminate.Instrument(wasm)
		if err != nil {
			var te *terminate.Error
			if !errors.As(err, &te) {
				t.Fatalf("error is not a *terminate.Error: %v", err)
			}
			return
		}
		if bigLEB(wasm) {
			// wazero sizes slices by counts the input claims (element
			// vectors, locals...) before reading them; a 4-byte LEB count
			// of 2^21 or more can exhaust memory in its decoder, which is
			// not what this target tests.
			return
		}
		c, err := r.CompileModule(ctx, wasm)
		if err != nil {
			return
		}
		c.Close(ctx)
		c2, err := r.CompileModule(ctx, out)
		if err != nil {
			t.Fatalf("input compiles but the instrumented module does not: %v", err)
		}
		c2.Close(ctx)
	})
}

// BenchmarkLoop100 runs the tiny module's 100-iteration loop: as built
// without checks, instrumented (a global.get and a branch per iteration),
// and as built under wazero's WithCloseOnContextDone (a trampoline call per
// iteration), the figure docs/RATIONALE.md "Deadline checks" quotes.
func BenchmarkLoop100(b *testing.B) {
	plain := bytes.TrimSuffix(tiny(false), debugSection)
	inst, err := terminate.Instrument(plain)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name      string
		wasm      []byte
		closeDone bool
	}{{"plain", plain, false}, {"instrumented", inst, false}, {"closeOnContextDone", plain, true}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(bc.closeDone))
			defer r.Close(ctx)
			mod, err := r.Instantiate(ctx, bc.wasm)
			if err != nil {
				b.Fatal(err)
			}
			fn := mod.ExportedFunction("count")
			stack := []uint64{100}
			for i := 0; i < b.N; i++ {
				stack[0] = 100
				if err := fn.CallWithStack(ctx, stack); err != nil || stack[0] != 100 {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInstrument rewrites the first-party fs module (load-time cost).
func BenchmarkInstrument(b *testing.B) {
	wasm, err := os.ReadFile(filepath.Join(hosttest.RepoRoot(), "host/moduleset/defaultset/set/fs.wasm"))
	if err != nil {
		b.Skip("no module set: run ./build.sh")
	}
	b.SetBytes(int64(len(wasm)))
	for i := 0; i < b.N; i++ {
		if _, err := terminate.Instrument(wasm); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRefusesGlobalsPastTheModules: code may name only the module's own
// globals. An index past them would be invalid in the original binary and
// names the stop flag (or the fuel counter) in the rewritten one, which a
// module could then clear to stay unstoppable. At the module's last global
// the rewrite passes; one past it is refused.
func TestRefusesGlobalsPastTheModules(t *testing.T) {
	spin := []byte{0x0C, 0, 0x0B, 0x0B} // br 0; end; end: the spin body
	for _, tc := range []struct {
		name       string
		withGlobal bool
		op, index  byte
		want       string // "" passes
	}{
		{"get without globals", false, 0x23, 0, "global index 0 out of range (the module has 0 globals)"},
		{"set without globals", false, 0x24, 0, "global index 0 out of range"},
		{"get of its own global", true, 0x23, 0, ""},
		{"set of its own global", true, 0x24, 0, ""},
		{"get of the stop flag", true, 0x23, 1, "global index 1 out of range (the module has 1 globals)"},
		{"set of the stop flag", true, 0x24, 1, "global index 1 out of range"},
		{"set of the fuel counter", true, 0x24, 2, "global index 2 out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wasm := tiny(tc.withGlobal)
			if !bytes.Contains(wasm, spin) {
				t.Fatal("tiny has no spin body")
			}
			wasm = bytes.Replace(wasm, spin, []byte{tc.op, tc.index, 0x0B, 0x0B}, 1)
			_, err := terminate.Instrument(wasm)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Instrument: %v", err)
				}
				return
			}
			var te *terminate.Error
			if err == nil || !errors.As(err, &te) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a *terminate.Error containing %q", err, tc.want)
			}
		})
	}
}
