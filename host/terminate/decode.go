package terminate

import "fmt"

// reader decodes a slice of the input; base is the slice's offset in the
// input, for error offsets. The first error sticks: later reads return
// zero values.
type reader struct {
	b    []byte
	pos  int
	base int
	err  error
	// globals is the module's own global count (imported + defined):
	// code may name no global at or past it, which is where the rewrite
	// puts the stop flag and the fuel counter. Only set for code.
	globals uint32
	// calls, if not nil, collects the targets of call and return_call;
	// indirect is set by call_indirect, return_call_indirect, call_ref
	// and return_call_ref (scanCalls).
	calls    *[]uint32
	indirect bool
}

func (r *reader) fail(delta int, msg string) {
	if r.err == nil {
		r.err = &Error{r.base + r.pos + delta, msg, nil}
	}
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.b) {
		r.fail(0, "unexpected end of section")
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) skip(n int) {
	if r.err != nil {
		return
	}
	if n > len(r.b)-r.pos {
		r.fail(0, fmt.Sprintf("unexpected end of section (%d-byte immediate)", n))
		return
	}
	r.pos += n
}

// uleb reads an unsigned LEB128 of at most bits bits.
func (r *reader) uleb(bits uint) uint64 {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if shift >= bits {
			r.fail(-1, "LEB128 too long")
			return 0
		}
		v |= uint64(c&0x7F) << shift
		if c&0x80 == 0 {
			if bits < 64 && v>>bits != 0 {
				r.fail(-1, "LEB128 out of range")
				return 0
			}
			return v
		}
	}
}

// sleb reads a signed LEB128 of at most bits bits (value not needed).
func (r *reader) sleb(bits uint) int64 {
	var v int64
	shift := uint(0)
	for {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if shift >= bits {
			r.fail(-1, "LEB128 too long")
			return 0
		}
		v |= int64(c&0x7F) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v
		}
	}
}

func (r *reader) u32() uint32 { return uint32(r.uleb(32)) }

func (r *reader) name() string {
	n := r.u32()
	if r.err != nil {
		return ""
	}
	if int64(n) > int64(len(r.b)-r.pos) {
		r.fail(0, fmt.Sprintf("name of %d bytes is truncated", n))
		return ""
	}
	s := string(r.b[r.pos : r.pos+int(n)])
	r.pos += int(n)
	return s
}

// valType reads a value type: a number, vector or reference type byte, or
// (typed function references) 0x63/0x64 and a heap type.
func (r *reader) valType() {
	switch c := r.byte(); c {
	case 0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F:
	case 0x63, 0x64:
		r.sleb(33)
	default:
		if r.err == nil {
			r.fail(-1, fmt.Sprintf("unknown value type 0x%02x", c))
		}
	}
}

func (r *reader) limits() {
	flags := r.byte()
	if flags > 0x07 {
		r.fail(-1, fmt.Sprintf("unknown limits flags 0x%02x", flags))
		return
	}
	r.uleb(64)
	if flags&1 != 0 {
		r.uleb(64)
	}
}

// blockType reads an empty block type (0x40), a value type, or an s33 type
// index.
func (r *reader) blockType() {
	if r.err == nil && r.pos < len(r.b) {
		switch r.b[r.pos] {
		case 0x40, 0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F:
			r.pos++
			return
		case 0x63, 0x64:
			r.pos++
			r.sleb(33)
			return
		}
	}
	start := r.pos
	if v := r.sleb(33); v < 0 && r.err == nil {
		r.err = &Error{r.base + start, fmt.Sprintf("unknown block type 0x%02x", r.b[start]), nil}
	}
}

// memarg reads alignment and offset; alignment bit 6 (multiple memories)
// announces a memory index.
func (r *reader) memarg() {
	align := r.u32()
	if align&0x40 != 0 {
		r.u32()
	}
	r.uleb(64)
}

// instr decodes one instruction and reports whether it was a loop (r.pos
// is then just after its block type).
func (r *reader) instr() (isLoop bool) {
	at := r.pos
	op := r.byte()
	if r.err != nil {
		return false
	}
	switch {
	case op == 0x03: // loop bt
		r.blockType()
		return r.err == nil
	case op == 0x02, op == 0x04, op == 0x06: // block, if, try (legacy exceptions)
		r.blockType()
	case op == 0x00, op == 0x01, op == 0x05, op == 0x0A, op == 0x0B, op == 0x0F,
		op == 0x19, op == 0x1A, op == 0x1B:
		// unreachable nop else throw_ref end return catch_all drop select
	case op == 0x10, op == 0x12: // call, return_call
		if f := r.u32(); r.err == nil && r.calls != nil {
			*r.calls = append(*r.calls, f)
		}
	case op == 0x14, op == 0x15: // call_ref, return_call_ref
		r.u32()
		r.indirect = true
	case op == 0x07, op == 0x08, op == 0x09, op == 0x0C, op == 0x0D, op == 0x18:
		// catch throw rethrow br br_if delegate
		r.u32()
	case op == 0x0E: // br_table
		n := r.u32()
		for i := uint32(0); i <= n && r.err == nil; i++ {
			r.u32()
		}
	case op == 0x11, op == 0x13: // call_indirect, return_call_indirect: type, table
		r.u32()
		r.u32()
		r.indirect = true
	case op == 0x1C: // select t*
		n := r.u32()
		for i := uint32(0); i < n && r.err == nil; i++ {
			r.valType()
		}
	case op == 0x1F: // try_table bt catch*
		r.blockType()
		n := r.u32()
		for i := uint32(0); i < n && r.err == nil; i++ {
			switch k := r.byte(); k {
			case 0x00, 0x01: // catch, catch_ref: tag, label
				r.u32()
				r.u32()
			case 0x02, 0x03: // catch_all, catch_all_ref: label
				r.u32()
			default:
				r.fail(-1, fmt.Sprintf("unknown catch clause 0x%02x", k))
			}
		}
	case op == 0x23, op == 0x24: // global.get, global.set
		// An index past the module's own globals would be invalid in the
		// original binary and names the rewrite's stop flag or fuel
		// counter in the rewritten one: a module could clear its own stop.
		if i := r.u32(); r.err == nil && i >= r.globals {
			r.fail(0, fmt.Sprintf("global index %d out of range (the module has %d globals)", i, r.globals))
		}
	case op >= 0x20 && op <= 0x26: // local.*, table.get/set
		r.u32()
	case op >= 0x28 && op <= 0x3E: // loads and stores
		r.memarg()
	case op == 0x3F, op == 0x40: // memory.size, memory.grow: memory index
		r.u32()
	case op == 0x41:
		r.sleb(32)
	case op == 0x42:
		r.sleb(64)
	case op == 0x43:
		r.skip(4)
	case op == 0x44:
		r.skip(8)
	case op >= 0x45 && op <= 0xC4: // numeric, sign extension
	case op == 0xD0: // ref.null heaptype
		r.sleb(33)
	case op == 0xD1: // ref.is_null
	case op == 0xD2: // ref.func
		r.u32()
	case op == 0xFC:
		r.prefixFC(at)
	case op == 0xFD:
		r.prefixFD(at)
	case op == 0xFE:
		r.prefixFE(at)
	default:
		r.unknown(at, fmt.Sprintf("0x%02x", op))
	}
	return false
}

func (r *reader) unknown(at int, op string) {
	if r.err == nil {
		r.err = &Error{r.base + at, "unknown opcode " + op, nil}
	}
}

func (r *reader) prefixFC(at int) {
	sub := r.u32()
	switch {
	case sub <= 7: // saturating truncations
	case sub == 8: // memory.init data mem
		r.u32()
		r.u32()
	case sub == 9, sub == 11, sub == 13, sub >= 15 && sub <= 17:
		// data.drop, memory.fill, elem.drop, table.grow/size/fill
		r.u32()
	case sub == 10, sub == 12, sub == 14: // memory.copy, table.init, table.copy
		r.u32()
		r.u32()
	default:
		if r.err == nil {
			r.unknown(at, fmt.Sprintf("0xFC %d", sub))
		}
	}
}

func (r *reader) prefixFD(at int) {
	sub := r.u32()
	switch {
	case sub <= 11, sub == 92, sub == 93: // v128 loads and stores
		r.memarg()
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		r.skip(16)
	case sub >= 21 && sub <= 34: // extract/replace lane
		r.skip(1)
	case sub >= 84 && sub <= 91: // load/store lane
		r.memarg()
		r.skip(1)
	case sub <= 0x113:
		// Every other SIMD and relaxed SIMD opcode has no immediate; an
		// unassigned one is refused by the runtime's validation.
	default:
		if r.err == nil {
			r.unknown(at, fmt.Sprintf("0xFD %d", sub))
		}
	}
}

func (r *reader) prefixFE(at int) {
	sub := r.u32()
	switch {
	case sub <= 2, sub >= 0x10 && sub <= 0x4E: // notify, wait, atomic loads/stores/rmw
		r.memarg()
	case sub == 3: // atomic.fence
		r.skip(1)
	default:
		if r.err == nil {
			r.unknown(at, fmt.Sprintf("0xFE %d", sub))
		}
	}
}

// appendU32 appends v as an unsigned LEB128.
func appendU32(dst []byte, v uint32) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}
