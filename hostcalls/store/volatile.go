package store

import (
	"sort"
	"strings"
	"sync"
	"time"
)

// Budgets of one module's volatile namespace (docs/ABI.md, "The module's
// store"): keys, and bytes of keys plus values.
const (
	DefaultVolatileMaxKeys  = 10000
	DefaultVolatileMaxBytes = 16 << 20
)

// volatile holds every module's volatile namespace: in-memory maps with
// the durable namespace's semantics (revisions, create, compare-and-swap,
// scan), lost when the Store is dropped (the node process stops). One
// mutex guards them all: every operation is a map access or, for a scan,
// one pass over one module's keys.
type volatile struct {
	mu       sync.Mutex
	maxKeys  int
	maxBytes int
	now      func() time.Time
	mods     map[string]*volNS
}

// volNS is one module's volatile namespace.
type volNS struct {
	entries map[string]*volEntry
	bytes   int    // len(key)+len(value) of every entry
	seq     uint64 // last revision given out; never reused
}

type volEntry struct {
	value []byte
	rev   uint64
	exp   int64 // Unix ms from which the entry is gone; 0 never
}

func newVolatile(maxKeys, maxBytes int, now func() time.Time) *volatile {
	return &volatile{maxKeys: maxKeys, maxBytes: maxBytes, now: now, mods: map[string]*volNS{}}
}

func (v *volatile) ns(family string) *volNS {
	n := v.mods[family]
	if n == nil {
		n = &volNS{entries: map[string]*volEntry{}}
		v.mods[family] = n
	}
	return n
}

func (n *volNS) remove(key string, e *volEntry) {
	n.bytes -= len(key) + len(e.value)
	delete(n.entries, key)
}

// live returns the entry of key unless it is absent or expired (an
// expired entry is removed).
func (n *volNS) live(key string, nowMs int64) *volEntry {
	e := n.entries[key]
	if e != nil && e.exp != 0 && e.exp <= nowMs {
		n.remove(key, e)
		return nil
	}
	return e
}

// sweep removes every expired entry.
func (n *volNS) sweep(nowMs int64) {
	for k, e := range n.entries {
		if e.exp != 0 && e.exp <= nowMs {
			n.remove(k, e)
		}
	}
}

// volFull says which budget a write would exceed ("" none).
func (v *volatile) full(n *volNS, key string, cur *volEntry, value []byte) string {
	bytes := n.bytes + len(key) + len(value)
	keys := len(n.entries)
	if cur != nil {
		bytes -= len(key) + len(cur.value)
	} else {
		keys++
	}
	switch {
	case keys > v.maxKeys:
		return "keys"
	case bytes > v.maxBytes:
		return "bytes"
	}
	return ""
}

// write applies op (as Tx.apply does for the durable namespace) with the
// expiry exp. full names the budget that refused it.
func (v *volatile) write(family string, op casOp, exp int64) (res casResult, full string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	nowMs := v.now().UnixMilli()
	n := v.ns(family)
	cur := n.live(op.key, nowMs)
	if cur != nil {
		res.rev, res.existed = cur.rev, true
	}
	if op.check && res.rev != op.expected {
		return res, ""
	}
	if op.value == nil {
		if cur != nil {
			n.remove(op.key, cur)
		}
		res.swapped, res.rev = true, 0
		return res, ""
	}
	if v.full(n, op.key, cur, op.value) != "" {
		n.sweep(nowMs) // expired entries still count until swept
		if full = v.full(n, op.key, cur, op.value); full != "" {
			res.full = true
			return res, full
		}
	}
	if cur != nil {
		n.remove(op.key, cur)
	}
	n.seq++
	value := append([]byte(nil), op.value...)
	n.entries[op.key] = &volEntry{value: value, rev: n.seq, exp: exp}
	n.bytes += len(op.key) + len(value)
	res.swapped, res.rev = true, n.seq
	return res, ""
}

// get reads one key; a nil entry when absent or expired.
func (v *volatile) get(family, key string) (volEntry, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := v.mods[family]
	if n == nil {
		return volEntry{}, false
	}
	e := n.live(key, v.now().UnixMilli())
	if e == nil {
		return volEntry{}, false
	}
	return volEntry{value: append([]byte(nil), e.value...), rev: e.rev, exp: e.exp}, true
}

// scan collects the live entries with prefix after after, in byte order,
// within lim.
func (v *volatile) scan(family, prefix, after string, lim scanLimits) *scanned {
	sc := &scanned{keys: []string{}, limits: lim}
	v.mu.Lock()
	defer v.mu.Unlock()
	n := v.mods[family]
	if n == nil {
		return sc
	}
	nowMs := v.now().UnixMilli()
	var keys []string
	for k, e := range n.entries {
		if strings.HasPrefix(k, prefix) && k > after && (e.exp == 0 || e.exp > nowMs) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		e := n.entries[k]
		if !sc.add(k, e.value, e.rev, e.exp) {
			break
		}
	}
	return sc
}
