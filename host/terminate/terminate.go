// Package terminate makes a wasm module stoppable without the runtime's
// per-loop exit-code check (docs/ABI.md, "Instances"; docs/RATIONALE.md,
// "Deadlines").
//
// Instrument rewrites a module binary: it appends two mutable i32
// globals, a stop flag exported as StopExport and a private fuel counter,
// and inserts at the head of every `loop` body and at the entry of every
// function body that may take part in a call cycle (entryChecks) a
// decrement of the fuel; every YieldEvery decrements the
// guest yields to the Go runtime (a memory.grow 0, which wazero's compiler
// runs in Go) and traps (unreachable) if the stop flag is set (loopCheck).
// The check at function entry covers recursion without any loop (a call
// tree of 2^60 calls at depth 60 never reaches the stack limit); a
// function that can be in no call cycle runs a bounded number of steps
// between two checks without it. The host
// sets the flag when an invocation's context ends (Arm).
//
// Instrument also removes the start section and exports its function as
// StartExport, so that the host runs it after instantiation, armed, like
// any other call (docs/ABI.md, "Instances").
package terminate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

// StopExport is the export name of the stop global Instrument adds. A module
// that already exports this name is refused.
const StopExport = "lemon_stop"

// StartExport is the export name Instrument gives the module's start
// function, whose start section it removes: the runtime would run it
// during instantiation, before the stop flag can be armed. The host calls
// it after instantiation under a deadline. A module that already exports
// this name is refused.
const StartExport = "lemon_start"

// Version identifies the rewrite Instrument applies; a cache of compiled
// code keyed on the original bytes must include it. Bump it whenever the
// inserted code changes.
const Version = 3

// Error is a module Instrument refuses: malformed (truncated section,
// bad LEB), an opcode it does not know, or the reserved export taken.
// Offset is the byte offset in the input where the problem was found.
type Error struct {
	Offset int
	Msg    string
	Err    error // ErrExportTaken, or nil
}

func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	return fmt.Sprintf("terminate: at offset %d: %s", e.Offset, e.Msg)
}

// ErrExportTaken is wrapped by the Error returned for a module that
// already exports StopExport or StartExport.
var ErrExportTaken = errors.New("export names " + StopExport + " and " + StartExport + " are reserved")

// Flag is the stop global of one instance (api.MutableGlobal satisfies it).
type Flag interface{ Set(v uint64) }

// Arm sets flag to 1 once ctx is done, until the returned release is
// called. release reports whether the flag may have been set (ctx ended
// before release): the instance may then trap in a loop and must be
// discarded. A nil flag or a context that is never done costs nothing.
func Arm(ctx context.Context, flag Flag) (release func() (fired bool)) {
	if flag == nil || ctx.Done() == nil {
		return notFired
	}
	if ctx.Err() != nil {
		flag.Set(1)
		return fired
	}
	stop := context.AfterFunc(ctx, func() { flag.Set(1) })
	return func() bool { return !stop() }
}

func notFired() bool { return false }
func fired() bool    { return true }

// MaxLocals is the most locals one function may declare (params not
// counted); Instrument refuses more, before the runtime allocates by the
// declared count. Go's wasm backend declares a few dozen.
const MaxLocals = 1 << 16

const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secCode      = 10
	maxSectionID = 13
)

// rank is a known section's position in the binary order (the tag
// section, 13, sits between memory and global).
var rank = [maxSectionID + 1]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

type section struct {
	id   byte
	off  int // offset of the contents in the input
	body []byte
}

// Instrument returns wasm with the stop global and the loop and function
// entry checks added, and the start section turned into the StartExport
// export (see the package doc). Function, global, table and memory indices are
// unchanged; custom sections are kept as they are except ".debug_*" ones,
// whose code offsets the rewrite makes stale, which are dropped. It refuses
// (with an *Error) a malformed binary, an opcode not in the MVP, sign
// extension, saturating conversion, bulk memory, reference types, multi
// value, SIMD (with relaxed SIMD), threads, tail calls or exception
// handling, and a module that already exports StopExport or StartExport.
// The result is
// not validated further: the runtime's compile does that.
func Instrument(wasm []byte) ([]byte, error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) {
		return nil, &Error{0, "not a wasm binary (bad magic)", nil}
	}
	if !bytes.Equal(wasm[4:8], []byte{1, 0, 0, 0}) {
		return nil, &Error{4, "unsupported wasm version", nil}
	}
	var secs []section
	r := reader{b: wasm, pos: 8}
	lastRank := 0
	for r.pos < len(wasm) {
		id := r.byte()
		n := r.u32()
		if r.err != nil {
			return nil, r.err
		}
		if n > uint32(len(wasm)-r.pos) {
			return nil, &Error{r.pos, fmt.Sprintf("section %d is truncated: size %d, %d bytes left", id, n, len(wasm)-r.pos), nil}
		}
		if id > maxSectionID || (id != secCustom && rank[id] == 0) {
			return nil, &Error{r.pos - 1, fmt.Sprintf("unknown section id %d", id), nil}
		}
		if id != secCustom {
			if rank[id] <= lastRank {
				return nil, &Error{r.pos, fmt.Sprintf("section %d out of order or repeated", id), nil}
			}
			lastRank = rank[id]
		}
		if id != secCustom && id != 8 && id != 12 {
			// Every entry of a vector section takes at least one byte; a
			// larger count is malformed, and refused before the runtime
			// sizes anything by it.
			vr := reader{b: wasm[r.pos : r.pos+int(n)], base: r.pos}
			if c := vr.u32(); vr.err != nil || c > n {
				return nil, &Error{r.pos, fmt.Sprintf("section %d claims more entries than its %d bytes hold", id, n), nil}
			}
		}
		secs = append(secs, section{id: id, off: r.pos, body: wasm[r.pos : r.pos+int(n)]})
		r.pos += int(n)
	}

	var importedGlobals, definedGlobals, importedFuncs uint32
	hasMemory := false
	var start *uint32 // the start function's index, if any
	for _, s := range secs {
		switch s.id {
		case secType:
			if err := checkTypes(s); err != nil {
				return nil, err
			}
		case secImport:
			n, mems, funcs, err := countImports(s)
			if err != nil {
				return nil, err
			}
			importedGlobals = n
			importedFuncs = funcs
			hasMemory = hasMemory || mems > 0
		case secMemory:
			sr := reader{b: s.body, base: s.off}
			hasMemory = hasMemory || sr.u32() > 0
		case secGlobal:
			sr := reader{b: s.body, base: s.off}
			definedGlobals = sr.u32()
			if sr.err != nil {
				return nil, sr.err
			}
		case secExport:
			if err := checkExports(s); err != nil {
				return nil, err
			}
		case secStart:
			sr := reader{b: s.body, base: s.off}
			idx := sr.u32()
			if sr.err == nil && sr.pos != len(sr.b) {
				sr.fail(0, "start section has trailing bytes")
			}
			if sr.err != nil {
				return nil, sr.err
			}
			start = &idx
		}
	}
	stopIdx := importedGlobals + definedGlobals
	if stopIdx < importedGlobals {
		return nil, &Error{0, "too many globals", nil}
	}
	if stopIdx+1 < stopIdx {
		return nil, &Error{0, "too many globals", nil}
	}
	check := loopCheck(stopIdx, stopIdx+1)

	out := make([]byte, 0, len(wasm)+len(wasm)/8+64)
	out = append(out, wasm[:8]...)
	haveGlobal, haveExport, haveMemory := false, false, hasMemory
	emit := func(id byte, body []byte) {
		out = append(out, id)
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	// insertMissing emits a new global or export section before the
	// first section that must follow it.
	insertMissing := func(beforeRank int) {
		if !haveMemory && beforeRank > rank[secMemory] {
			// A module without memory gets an empty one, for the
			// memory.grow 0 the check yields through.
			emit(secMemory, []byte{1, 0, 0})
			haveMemory = true
		}
		if !haveGlobal && beforeRank > rank[secGlobal] {
			emit(secGlobal, appendGlobal(nil, 0, nil))
			haveGlobal = true
		}
		if !haveExport && beforeRank > rank[secExport] {
			emit(secExport, appendExport(nil, 0, nil, stopIdx, start))
			haveExport = true
		}
	}
	for _, s := range secs {
		if s.id != secCustom {
			insertMissing(rank[s.id])
		}
		switch s.id {
		case secCustom:
			name, err := customName(s)
			if err != nil {
				return nil, err
			}
			if len(name) >= 7 && name[:7] == ".debug_" {
				continue
			}
			emit(s.id, s.body)
		case secMemory:
			if !hasMemory { // a memory section of no memories
				emit(s.id, []byte{1, 0, 0})
			} else {
				emit(s.id, s.body)
			}
			haveMemory = true
		case secGlobal:
			sr := reader{b: s.body, base: s.off}
			sr.u32()
			emit(s.id, appendGlobal(nil, definedGlobals, s.body[sr.pos:]))
			haveGlobal = true
		case secExport:
			sr := reader{b: s.body, base: s.off}
			n := sr.u32()
			emit(s.id, appendExport(nil, n, s.body[sr.pos:], stopIdx, start))
			haveExport = true
		case secStart:
			// Dropped: exported as StartExport instead (appendExport).
		case secCode:
			entry, err := entryChecks(s, stopIdx, importedFuncs)
			if err != nil {
				return nil, err
			}
			body, err := instrumentCode(s, check, stopIdx, entry)
			if err != nil {
				return nil, err
			}
			emit(s.id, body)
		default:
			emit(s.id, s.body)
		}
	}
	insertMissing(rank[len(rank)-1] + 1)
	return out, nil
}

// YieldEvery is how many loop iterations an instance runs between two
// yields to the Go runtime (see loopCheck).
const YieldEvery = 4096

// loopCheck is the code inserted at each loop header and at the entry of
// each function body entryChecks marks (after its locals):
//
//	global.get $fuel; i32.const -1; i32.add; global.set $fuel
//	global.get $fuel; i32.eqz
//	if
//	  i32.const YieldEvery; global.set $fuel
//	  i32.const 0; memory.grow 0; drop
//	  global.get $stop; if; unreachable; end
//	end
//
// Compiled wasm cannot be preempted by the Go runtime: a guest that never
// left it would stall every stop-the-world (the garbage collector) and
// with it the timer that ends its own deadline. memory.grow is a call
// into Go in wazero's compiler, so every YieldEvery iterations the guest
// reaches a point where the runtime can stop it, and checks the stop flag.
func loopCheck(stopIdx, fuelIdx uint32) []byte {
	var c []byte
	get := func(i uint32) { c = appendU32(append(c, 0x23), i) }
	set := func(i uint32) { c = appendU32(append(c, 0x24), i) }
	get(fuelIdx)
	c = append(c, 0x41, 0x7F, 0x6A)
	set(fuelIdx)
	get(fuelIdx)
	c = append(c, 0x45, 0x04, 0x40, 0x41)
	c = appendS32(c, YieldEvery)
	set(fuelIdx)
	c = append(c, 0x41, 0x00, 0x40, 0x00, 0x1A)
	get(stopIdx)
	c = append(c, 0x04, 0x40, 0x00, 0x0B)
	return append(c, 0x0B)
}

func appendS32(dst []byte, v int32) []byte {
	for {
		b := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && b&0x40 == 0) || (v == -1 && b&0x40 != 0) {
			return append(dst, b)
		}
		dst = append(dst, b|0x80)
	}
}

// appendGlobal writes a global section body: count+2, the existing
// entries, then the stop global (mutable i32 = 0) and the fuel global
// (mutable i32 = YieldEvery).
func appendGlobal(dst []byte, n uint32, entries []byte) []byte {
	dst = appendU32(dst, n+2)
	dst = append(dst, entries...)
	dst = append(dst, 0x7F, 0x01, 0x41, 0x00, 0x0B, 0x7F, 0x01, 0x41)
	dst = appendS32(dst, YieldEvery)
	return append(dst, 0x0B)
}

// appendExport writes an export section body: the existing entries, then
// StopExport naming global stopIdx and, if start is not nil, StartExport
// naming function *start.
func appendExport(dst []byte, n uint32, entries []byte, stopIdx uint32, start *uint32) []byte {
	added := uint32(1)
	if start != nil {
		added++
	}
	dst = appendU32(dst, n+added)
	dst = append(dst, entries...)
	dst = appendU32(dst, uint32(len(StopExport)))
	dst = append(dst, StopExport...)
	dst = append(dst, 0x03)
	dst = appendU32(dst, stopIdx)
	if start != nil {
		dst = appendU32(dst, uint32(len(StartExport)))
		dst = append(dst, StartExport...)
		dst = append(dst, 0x00)
		dst = appendU32(dst, *start)
	}
	return dst
}

func customName(s section) (string, error) {
	r := reader{b: s.body, base: s.off}
	name := r.name()
	return name, r.err
}

// countImports returns the numbers of imported globals, memories and
// functions.
func countImports(s section) (globals, memories, funcs uint32, err error) {
	r := reader{b: s.body, base: s.off}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.name()
		r.name()
		kind := r.byte()
		switch kind {
		case 0x00: // func: type index
			r.u32()
			funcs++
		case 0x01: // table: reftype, limits
			r.valType()
			r.limits()
		case 0x02: // memory: limits
			r.limits()
			memories++
		case 0x03: // global: valtype, mutability
			r.valType()
			r.byte()
			globals++
		case 0x04: // tag: attribute, type index
			r.byte()
			r.u32()
		default:
			r.fail(-1, fmt.Sprintf("unknown import kind 0x%02x", kind))
		}
	}
	if r.err == nil && r.pos != len(r.b) {
		r.fail(0, "import section has trailing bytes")
	}
	return globals, memories, funcs, r.err
}

// checkTypes reads the type section so that no parameter or result count
// exceeds the bytes left (the runtime allocates by it).
func checkTypes(s section) error {
	r := reader{b: s.body, base: s.off}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		if form := r.byte(); form != 0x60 && r.err == nil {
			r.fail(-1, fmt.Sprintf("unsupported type form 0x%02x", form))
		}
		for vec := 0; vec < 2 && r.err == nil; vec++ {
			m := r.u32()
			if r.err == nil && int64(m) > int64(len(r.b)-r.pos) {
				r.fail(0, fmt.Sprintf("type %d claims %d value types, more than the bytes left", i, m))
			}
			for j := uint32(0); j < m && r.err == nil; j++ {
				r.valType()
			}
		}
	}
	if r.err == nil && r.pos != len(r.b) {
		r.fail(0, "type section has trailing bytes")
	}
	return r.err
}

func checkExports(s section) error {
	r := reader{b: s.body, base: s.off}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		at := r.pos
		name := r.name()
		r.byte()
		r.u32()
		if r.err == nil && (name == StopExport || name == StartExport) {
			return &Error{s.off + at, fmt.Sprintf("module already exports %q (reserved)", name), ErrExportTaken}
		}
	}
	if r.err == nil && r.pos != len(r.b) {
		r.fail(0, "export section has trailing bytes")
	}
	return r.err
}

// instrumentCode rewrites the code section: each body gets the check after
// its locals and after every loop's block type, and a new size.
func instrumentCode(s section, check []byte, globals uint32, entry []bool) ([]byte, error) {
	r := reader{b: s.body, base: s.off}
	n := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	out := make([]byte, 0, len(s.body)+len(s.body)/8)
	out = appendU32(out, n)
	var fn []byte
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		if r.err != nil {
			return nil, r.err
		}
		if size > uint32(len(r.b)-r.pos) {
			return nil, &Error{s.off + r.pos, fmt.Sprintf("function body %d is truncated: size %d, %d bytes left", i, size, len(r.b)-r.pos), nil}
		}
		body := reader{b: r.b[r.pos : r.pos+int(size)], base: s.off + r.pos, globals: globals}
		r.pos += int(size)
		var err error
		fn, err = instrumentBody(fn[:0], &body, check, entry[i])
		if err != nil {
			return nil, err
		}
		out = appendU32(out, uint32(len(fn)))
		out = append(out, fn...)
	}
	if r.pos != len(r.b) {
		return nil, &Error{s.off + r.pos, "code section has trailing bytes", nil}
	}
	return out, nil
}

func instrumentBody(dst []byte, r *reader, check []byte, entry bool) ([]byte, error) {
	groups := r.u32()
	var locals uint64
	for i := uint32(0); i < groups && r.err == nil; i++ {
		locals += uint64(r.u32())
		if locals > MaxLocals {
			r.fail(0, fmt.Sprintf("function declares more than %d locals", MaxLocals))
		}
		r.valType()
	}
	if r.err != nil {
		return nil, r.err
	}
	// The check at entry bounds recursion without loops (docs/RATIONALE.md,
	// "Deadlines").
	dst = append(dst, r.b[:r.pos]...)
	if entry {
		dst = append(dst, check...)
	}
	copied := r.pos
	for r.pos < len(r.b) && r.err == nil {
		if r.instr() {
			dst = append(dst, r.b[copied:r.pos]...)
			dst = append(dst, check...)
			copied = r.pos
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) == 0 || r.b[len(r.b)-1] != 0x0B {
		return nil, &Error{r.base + len(r.b), "function body does not end with end", nil}
	}
	return append(dst, r.b[copied:]...), nil
}

// entryChecks reports, for each function body of the code section s,
// whether it gets the check at entry: whether it may take part in a call
// cycle. Without a loop, an execution runs unboundedly only by calling
// unboundedly often, hence (the module being finite) around some cycle of
// calls. Over the direct call graph (call and return_call between defined
// functions; imported functions are host code), a function is marked if
// it is in a strongly connected component of more than one function or
// calls itself; and every function containing an indirect call
// (call_indirect, return_call_indirect, call_ref, return_call_ref) is
// marked, since a cycle through an indirect edge passes through its
// caller. Every cycle then contains a marked function, so every unbounded
// execution passes a check at least once per turn around it. Exceptions
// transfer control only outwards and make no cycle of their own.
func entryChecks(s section, globals, importedFuncs uint32) ([]bool, error) {
	r := reader{b: s.body, base: s.off}
	n := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	if int64(n) > int64(len(r.b)) {
		return nil, &Error{s.off, "code section claims more bodies than its bytes hold", nil}
	}
	mark := make([]bool, n)
	edges := make([][]uint32, n) // callee indices among defined functions
	var calls []uint32
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		if r.err != nil {
			return nil, r.err
		}
		if size > uint32(len(r.b)-r.pos) {
			return nil, &Error{s.off + r.pos, fmt.Sprintf("function body %d is truncated: size %d, %d bytes left", i, size, len(r.b)-r.pos), nil}
		}
		calls = calls[:0]
		body := reader{b: r.b[r.pos : r.pos+int(size)], base: s.off + r.pos, globals: globals, calls: &calls}
		r.pos += int(size)
		groups := body.u32()
		for g := uint32(0); g < groups && body.err == nil; g++ {
			body.u32()
			body.valType()
		}
		for body.pos < len(body.b) && body.err == nil {
			body.instr()
		}
		if body.err != nil {
			return nil, body.err
		}
		mark[i] = body.indirect
		for _, f := range calls {
			// An index past the defined functions is invalid and refused
			// by the runtime's validation.
			if f >= importedFuncs && f-importedFuncs < n {
				edges[i] = append(edges[i], f-importedFuncs)
			}
		}
	}
	markCycles(edges, mark)
	return mark, nil
}

// markCycles sets mark[v] for every v in a strongly connected component
// of more than one vertex or with a self-edge (Tarjan's algorithm, with
// an explicit stack: a module's call chains may be deep).
func markCycles(edges [][]uint32, mark []bool) {
	const unvisited = -1
	n := len(edges)
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = unvisited
	}
	var stack []uint32
	type frame struct {
		v    uint32
		next int // next edge of v to follow
	}
	var work []frame
	counter := 0
	for root := 0; root < n; root++ {
		if index[root] != unvisited {
			continue
		}
		work = append(work[:0], frame{v: uint32(root)})
		index[root], low[root] = counter, counter
		counter++
		stack = append(stack, uint32(root))
		onStack[root] = true
		for len(work) > 0 {
			top := &work[len(work)-1]
			v := top.v
			if top.next < len(edges[v]) {
				w := edges[v][top.next]
				top.next++
				if w == v {
					mark[v] = true
				}
				if index[w] == unvisited {
					index[w], low[w] = counter, counter
					counter++
					stack = append(stack, w)
					onStack[w] = true
					work = append(work, frame{v: w})
				} else if onStack[w] && index[w] < low[v] {
					low[v] = index[w]
				}
				continue
			}
			work = work[:len(work)-1]
			if len(work) > 0 {
				if p := work[len(work)-1].v; low[v] < low[p] {
					low[p] = low[v]
				}
			}
			if low[v] == index[v] {
				j := len(stack) - 1
				for stack[j] != v {
					j--
				}
				if len(stack)-j > 1 {
					for _, w := range stack[j:] {
						mark[w] = true
					}
				}
				for _, w := range stack[j:] {
					onStack[w] = false
				}
				stack = stack[:j]
			}
		}
	}
}
