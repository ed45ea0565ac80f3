package store

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"lemon/hostcalls"
	"lemon/protocol"
)

// both runs f for the durable and the volatile namespace.
func both(t *testing.T, f func(t *testing.T, vol bool)) {
	t.Run("durable", func(t *testing.T) { f(t, false) })
	t.Run("volatile", func(t *testing.T) { f(t, true) })
}

func num(m map[string]any, k string) uint64 {
	f, _ := m[k].(float64)
	return uint64(f)
}

func mustCall(t *testing.T, s *Store, module, name string, args map[string]any) map[string]any {
	t.Helper()
	m, e := call(t, s, module, name, args)
	if e != nil {
		t.Fatalf("%s %v: %v", name, args, e)
	}
	return m
}

func TestRevisionsAndCAS(t *testing.T) {
	both(t, func(t *testing.T, vol bool) {
		s := open(t, filepath.Join(t.TempDir(), "node.db"), 0)
		defer s.Close()
		c := func(name string, args map[string]any) map[string]any {
			args["volatile"] = vol
			return mustCall(t, s, "m", name, args)
		}
		r1 := num(c("store.put", map[string]any{"key": "a", "value": 1}), "revision")
		if r1 == 0 {
			t.Fatal("put gave revision 0")
		}
		if g := c("store.get", map[string]any{"key": "a"}); g["found"] != true || g["value"] != 1.0 || num(g, "revision") != r1 {
			t.Fatalf("get %v, want revision %d", g, r1)
		}
		r2 := num(c("store.put", map[string]any{"key": "a", "value": 2}), "revision")
		if r2 <= r1 {
			t.Fatalf("revision after a second put %d, first %d", r2, r1)
		}
		// A stale revision does not swap, and answers the current one.
		if m := c("store.cas", map[string]any{"key": "a", "expected": r1, "value": 3}); m["swapped"] != false || num(m, "revision") != r2 {
			t.Fatalf("stale cas %v", m)
		}
		if m := c("store.cas", map[string]any{"key": "a", "expected": 0, "value": 3}); m["swapped"] != false || num(m, "revision") != r2 {
			t.Fatalf("cas expecting absent on a present key %v", m)
		}
		m := c("store.cas", map[string]any{"key": "a", "expected": r2, "value": 3})
		r3 := num(m, "revision")
		if m["swapped"] != true || r3 <= r2 {
			t.Fatalf("cas %v", m)
		}
		if g := c("store.get", map[string]any{"key": "a"}); g["value"] != 3.0 || num(g, "revision") != r3 {
			t.Fatalf("get after cas %v", g)
		}
		// Delete by CAS, then the same key created again never gets an
		// old revision back (no ABA).
		if m := c("store.cas", map[string]any{"key": "a", "expected": r2, "delete": true}); m["swapped"] != false || num(m, "revision") != r3 {
			t.Fatalf("stale cas delete %v", m)
		}
		if m := c("store.cas", map[string]any{"key": "a", "expected": r3, "delete": true}); m["swapped"] != true || num(m, "revision") != 0 {
			t.Fatalf("cas delete %v", m)
		}
		if g := c("store.get", map[string]any{"key": "a"}); g["found"] != false || g["value"] != nil || g["revision"] != nil {
			t.Fatalf("get after cas delete %v", g)
		}
		if m := c("store.cas", map[string]any{"key": "a", "expected": 0, "delete": true}); m["swapped"] != true {
			t.Fatalf("cas delete of an absent key expecting absent %v", m)
		}
		m = c("store.cas", map[string]any{"key": "a", "expected": 0, "value": "new"})
		r4 := num(m, "revision")
		if m["swapped"] != true || r4 <= r3 {
			t.Fatalf("cas create %v (after revision %d)", m, r3)
		}
		r5 := num(c("store.create", map[string]any{"key": "b", "value": 1}), "revision")
		if r5 <= r4 {
			t.Fatalf("create revision %d after %d", r5, r4)
		}
		// Bad CAS input.
		for _, bad := range []struct {
			args  map[string]any
			field string
		}{
			{map[string]any{"key": "a", "expected": r4}, "value"},
			{map[string]any{"key": "a", "expected": r4, "delete": true, "value": 1}, "delete"},
			{map[string]any{"key": "", "expected": r4, "value": 1}, "key"},
			{map[string]any{"key": "a", "expected": -1, "value": 1}, "expected"},
		} {
			bad.args["volatile"] = vol
			if _, e := call(t, s, "m", "store.cas", bad.args); e == nil || e.Code != protocol.CodeInvalidParams || e.Details.Field != bad.field {
				t.Errorf("cas %v: %v, want INVALID_PARAMS %s", bad.args, e, bad.field)
			}
		}
		if g := c("store.get", map[string]any{"key": "a"}); g["value"] != "new" || num(g, "revision") != r4 {
			t.Fatalf("a refused cas changed the key: %v", g)
		}
	})
}

// Many goroutines race compare-and-swaps on one key: per revision exactly
// one wins, and a counter incremented by CAS retry loops loses no update.
func TestCASRaces(t *testing.T) {
	both(t, func(t *testing.T, vol bool) {
		s := open(t, filepath.Join(t.TempDir(), "node.db"), 0)
		defer s.Close()
		const workers, rounds = 16, 5
		rev := num(mustCall(t, s, "m", "store.put", map[string]any{"key": "k", "value": 0, "volatile": vol}), "revision")
		for r := 0; r < rounds; r++ {
			var wins atomic.Int32
			var newRev atomic.Uint64
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					m, e := call(t, s, "m", "store.cas", map[string]any{"key": "k", "expected": rev, "value": w, "volatile": vol})
					if e != nil {
						t.Error(e)
						return
					}
					if m["swapped"] == true {
						wins.Add(1)
						newRev.Store(num(m, "revision"))
					}
				}()
			}
			wg.Wait()
			if wins.Load() != 1 {
				t.Fatalf("round %d: %d winners", r, wins.Load())
			}
			g := mustCall(t, s, "m", "store.get", map[string]any{"key": "k", "volatile": vol})
			if num(g, "revision") != newRev.Load() || newRev.Load() <= rev {
				t.Fatalf("round %d: get %v, winner's revision %d, previous %d", r, g, newRev.Load(), rev)
			}
			rev = newRev.Load()
		}

		const incs = 4
		mustCall(t, s, "m", "store.put", map[string]any{"key": "n", "value": 0, "volatile": vol})
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < incs; {
					g, e := call(t, s, "m", "store.get", map[string]any{"key": "n", "volatile": vol})
					if e != nil {
						t.Error(e)
						return
					}
					m, e := call(t, s, "m", "store.cas", map[string]any{"key": "n", "expected": num(g, "revision"),
						"value": num(g, "value") + 1, "volatile": vol})
					if e != nil {
						t.Error(e)
						return
					}
					if m["swapped"] == true {
						i++
					}
				}
			}()
		}
		wg.Wait()
		if g := mustCall(t, s, "m", "store.get", map[string]any{"key": "n", "volatile": vol}); g["value"] != float64(workers*incs) {
			t.Fatalf("counter %v, want %d", g["value"], workers*incs)
		}
	})
}

func TestScan(t *testing.T) {
	both(t, func(t *testing.T, vol bool) {
		s := open(t, filepath.Join(t.TempDir(), "node.db"), 0)
		defer s.Close()
		revs := map[string]uint64{}
		for _, k := range []string{"p/c", "p/a", "q", "p/b"} {
			revs[k] = num(mustCall(t, s, "m", "store.put", map[string]any{"key": k, "value": "v-" + k, "volatile": vol}), "revision")
		}
		m := mustCall(t, s, "m", "store.scan", map[string]any{"prefix": "p/", "limit": 2, "volatile": vol})
		b, _ := json.Marshal(m)
		want := fmt.Sprintf(`{"entries":[{"key":"p/a","revision":%d,"value":"v-p/a"},{"key":"p/b","revision":%d,"value":"v-p/b"}],"more":true}`,
			revs["p/a"], revs["p/b"])
		if string(b) != want {
			t.Fatalf("scan page 1 %s\nwant %s", b, want)
		}
		m = mustCall(t, s, "m", "store.scan", map[string]any{"prefix": "p/", "after": "p/b", "volatile": vol})
		b, _ = json.Marshal(m)
		want = fmt.Sprintf(`{"entries":[{"key":"p/c","revision":%d,"value":"v-p/c"}],"more":false}`, revs["p/c"])
		if string(b) != want {
			t.Fatalf("scan page 2 %s\nwant %s", b, want)
		}
		m = mustCall(t, s, "m", "store.scan", map[string]any{"prefix": "z", "volatile": vol})
		if b, _ := json.Marshal(m); string(b) != `{"entries":[],"more":false}` {
			t.Fatalf("empty scan %s", b)
		}
	})
}

func TestScanBounds(t *testing.T) {
	both(t, func(t *testing.T, vol bool) {
		s := open(t, filepath.Join(t.TempDir(), "node.db"), 0)
		defer s.Close()
		for _, c := range []struct {
			args  map[string]any
			field string
		}{
			{map[string]any{"limit": 1000}, ""},
			{map[string]any{"limit": 1001}, "limit"},
			{map[string]any{"limit": -1}, "limit"},
			{map[string]any{"prefix": strings.Repeat("p", 512)}, ""},
			{map[string]any{"prefix": strings.Repeat("p", 513)}, "prefix"},
			{map[string]any{"after": strings.Repeat("p", 512)}, ""},
			{map[string]any{"after": strings.Repeat("p", 513)}, "prefix"},
		} {
			c.args["volatile"] = vol
			_, e := call(t, s, "m", "store.scan", c.args)
			if c.field == "" && e != nil || c.field != "" && (e == nil || e.Code != protocol.CodeInvalidParams || e.Details.Field != c.field) {
				t.Errorf("scan %v: %v, want field %q", c.args, e, c.field)
			}
		}
		// 1001 keys: limit 1000 returns 1000 and more; 0 means 100.
		for i := 0; i < 1001; i++ {
			mustCall(t, s, "m", "store.put", map[string]any{"key": fmt.Sprintf("n/%04d", i), "value": i, "volatile": vol})
		}
		m := mustCall(t, s, "m", "store.scan", map[string]any{"prefix": "n/", "limit": 1000, "volatile": vol})
		if es := m["entries"].([]any); len(es) != 1000 || m["more"] != true {
			t.Fatalf("limit 1000: %d entries, more %v", len(es), m["more"])
		}
		m = mustCall(t, s, "m", "store.scan", map[string]any{"prefix": "n/", "volatile": vol})
		if es := m["entries"].([]any); len(es) != 100 || m["more"] != true {
			t.Fatalf("default limit: %d entries, more %v", len(es), m["more"])
		}
		m = mustCall(t, s, "m", "store.scan", map[string]any{"prefix": "n/", "after": "n/0999", "limit": 1000, "volatile": vol})
		if es := m["entries"].([]any); len(es) != 1 || m["more"] != false {
			t.Fatalf("tail: %d entries, more %v", len(es), m["more"])
		}
		// Bytes: 16 entries of key (3 bytes) + value (65533 bytes of JSON)
		// are exactly MaxScanBytes and fit; one more byte does not.
		val := `"` + strings.Repeat("x", 65533-2) + `"`
		for i := 0; i < 16; i++ {
			mustCall(t, s, "m", "store.put", map[string]any{"key": fmt.Sprintf("b%02d", i), "value": json.RawMessage(val), "volatile": vol})
		}
		m = mustCall(t, s, "m", "store.scan", map[string]any{"prefix": "b", "limit": 1000, "volatile": vol})
		if es := m["entries"].([]any); len(es) != 16 || m["more"] != false {
			t.Fatalf("exactly %d bytes: %d entries, more %v", MaxScanBytes, len(es), m["more"])
		}
		mustCall(t, s, "m", "store.put", map[string]any{"key": "b99", "value": 1, "volatile": vol})
		m = mustCall(t, s, "m", "store.scan", map[string]any{"prefix": "b", "limit": 1000, "volatile": vol})
		if es := m["entries"].([]any); len(es) != 16 || m["more"] != true {
			t.Fatalf("one byte past %d: %d entries, more %v", MaxScanBytes, len(es), m["more"])
		}
		m = mustCall(t, s, "m", "store.scan", map[string]any{"prefix": "b", "after": "b15", "volatile": vol})
		if es := m["entries"].([]any); len(es) != 1 || m["more"] != false {
			t.Fatalf("next page: %v", m)
		}
		// store.list counts keys only: 1000 keys of 512 bytes fit.
		for i := 0; i < 1000; i++ {
			mustCall(t, s, "m", "store.put", map[string]any{"key": fmt.Sprintf("L%0511d", i), "value": 1, "volatile": vol})
		}
		m = mustCall(t, s, "m", "store.list", map[string]any{"prefix": "L", "limit": 1000, "volatile": vol})
		if ks := m["keys"].([]any); len(ks) != 1000 || m["more"] != false {
			t.Fatalf("list of 1000 long keys: %d, more %v", len(ks), m["more"])
		}
	})
}

func TestKeyAndValueLimitsBothNamespaces(t *testing.T) {
	both(t, func(t *testing.T, vol bool) {
		s := open(t, filepath.Join(t.TempDir(), "node.db"), 0)
		defer s.Close()
		big := `"` + strings.Repeat("v", MaxValueBytes-2) + `"` // 65536 bytes of JSON
		n := 0
		key := func(size int) string { // a fresh key of size bytes
			n++
			k := fmt.Sprintf("%d-", n)
			return k + strings.Repeat("k", size-len(k))
		}
		for _, name := range []string{"store.put", "store.create", "store.cas"} {
			for _, c := range []struct {
				key, value, field string
			}{
				{key(512), "1", ""},
				{key(513), "1", "key"},
				{"", "1", "key"},
				{"a\x00", "1", "key"},
				{key(8), big, ""},
				{key(8), big[:len(big)-1] + `v"`, "value"},
				{key(8), "", "value"},
			} {
				args := map[string]any{"key": c.key, "volatile": vol}
				if c.value != "" {
					args["value"] = json.RawMessage(c.value)
				}
				if name == "store.cas" {
					args["expected"] = 0
				}
				_, e := call(t, s, "m", name, args)
				if c.field == "" && e != nil || c.field != "" && (e == nil || e.Code != protocol.CodeInvalidParams || e.Details.Field != c.field) {
					t.Errorf("%s key %d bytes value %d bytes: %v, want field %q", name, len(c.key), len(c.value), e, c.field)
				}
			}
		}
		for _, name := range []string{"store.get", "store.delete"} {
			if _, e := call(t, s, "m", name, map[string]any{"key": key(512), "volatile": vol}); e != nil {
				t.Errorf("%s key 512: %v", name, e)
			}
			if _, e := call(t, s, "m", name, map[string]any{"key": key(513), "volatile": vol}); e == nil || e.Details.Field != "key" {
				t.Errorf("%s key 513: %v", name, e)
			}
		}
	})
}

func TestVolatileBudgetsAndIsolation(t *testing.T) {
	s, err := New(Config{Path: filepath.Join(t.TempDir(), "node.db"), VolatileMaxKeys: 3, VolatileMaxBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v := func(module, name string, args map[string]any) (map[string]any, *protocol.Error) {
		args["volatile"] = true
		return call(t, s, module, name, args)
	}
	// Keys: 3 fit, a 4th is refused, replacing one is not.
	for _, k := range []string{"a", "b", "c"} {
		if _, e := v("m", "store.put", map[string]any{"key": k, "value": 1}); e != nil {
			t.Fatal(e)
		}
	}
	if _, e := v("m", "store.put", map[string]any{"key": "d", "value": 1}); e == nil || e.Code != protocol.CodeUnavailable || e.DomainCode() != DomainStoreFull {
		t.Fatalf("4th key: %v", e)
	}
	if m, e := v("m", "store.cas", map[string]any{"key": "d", "expected": 0, "value": 1}); e == nil || e.DomainCode() != DomainStoreFull {
		t.Fatalf("4th key by cas: %v %v", m, e)
	}
	if _, e := v("m", "store.put", map[string]any{"key": "c", "value": 2}); e != nil {
		t.Fatalf("replace at the key budget: %v", e)
	}
	// Other modules and the durable namespace are separate: their own
	// budgets, their own keys.
	if _, e := v("other", "store.put", map[string]any{"key": "d", "value": 1}); e != nil {
		t.Fatalf("another module's volatile namespace: %v", e)
	}
	if m, _ := v("other", "store.get", map[string]any{"key": "a"}); m["found"] != false {
		t.Fatalf("module other reads m's key: %v", m)
	}
	if m, _ := call(t, s, "m", "store.get", map[string]any{"key": "a"}); m["found"] != false {
		t.Fatalf("durable namespace reads the volatile key: %v", m)
	}
	if m, _ := v("other", "store.scan", map[string]any{}); len(m["entries"].([]any)) != 1 {
		t.Fatalf("other's scan: %v", m)
	}
	mustCall(t, s, "m", "store.put", map[string]any{"key": "durable", "value": 1})
	if m, _ := v("m", "store.get", map[string]any{"key": "durable"}); m["found"] != false {
		t.Fatalf("volatile namespace reads the durable key: %v", m)
	}
	// Bytes: key + value bytes, at most 100. Free all, then fill to exactly 100.
	for _, k := range []string{"a", "b", "c"} {
		if m, _ := v("m", "store.delete", map[string]any{"key": k}); m["deleted"] != true {
			t.Fatalf("delete %s: %v", k, m)
		}
	}
	if m, _ := v("m", "store.delete", map[string]any{"key": "a"}); m["deleted"] != false {
		t.Fatalf("second delete: %v", m)
	}
	val := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`) }
	if _, e := v("m", "store.put", map[string]any{"key": "a", "value": val(49)}); e != nil { // 50
		t.Fatal(e)
	}
	if _, e := v("m", "store.put", map[string]any{"key": "b", "value": val(50)}); e == nil || e.DomainCode() != DomainStoreFull ||
		!strings.Contains(e.Message, "bytes") { // 101
		t.Fatalf("one byte past the byte budget: %v", e)
	}
	if _, e := v("m", "store.put", map[string]any{"key": "b", "value": val(49)}); e != nil { // 100
		t.Fatalf("at the byte budget: %v", e)
	}
	if _, e := v("m", "store.put", map[string]any{"key": "b", "value": val(50)}); e == nil || e.DomainCode() != DomainStoreFull {
		t.Fatalf("growing a value past the byte budget: %v", e)
	}
	if _, e := v("m", "store.put", map[string]any{"key": "b", "value": val(10)}); e != nil {
		t.Fatalf("shrinking a value: %v", e)
	}
	if g, _ := v("m", "store.get", map[string]any{"key": "b"}); string(mustJSON(g["value"])) != string(val(10)) {
		t.Fatalf("get b %v", g)
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

func TestVolatileExpiry(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s, err := New(Config{Path: filepath.Join(t.TempDir(), "node.db"), VolatileMaxKeys: 2, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	exp := int64(1_000_000 + 5000)
	m := mustCall(t, s, "m", "store.put", map[string]any{"key": "tok", "value": 1, "volatile": true, "expiresAtMs": exp})
	rev := num(m, "revision")
	if g := mustCall(t, s, "m", "store.get", map[string]any{"key": "tok", "volatile": true}); int64(g["expiresAtMs"].(float64)) != exp || num(g, "revision") != rev {
		t.Fatalf("get %v", g)
	}
	if sc := mustCall(t, s, "m", "store.scan", map[string]any{"volatile": true}); len(sc["entries"].([]any)) != 1 ||
		int64(sc["entries"].([]any)[0].(map[string]any)["expiresAtMs"].(float64)) != exp {
		t.Fatalf("scan %v", sc)
	}
	for _, c := range []struct {
		args map[string]any
	}{
		{map[string]any{"key": "x", "value": 1, "volatile": true, "expiresAtMs": 1_000_000}}, // now: not in the future
		{map[string]any{"key": "x", "value": 1, "volatile": true, "expiresAtMs": -1}},        // negative
		{map[string]any{"key": "x", "value": 1, "volatile": false, "expiresAtMs": exp}},      // durable
	} {
		if _, e := call(t, s, "m", "store.put", c.args); e == nil || e.Details.Field != "expiresAtMs" {
			t.Errorf("put %v: %v", c.args, e)
		}
	}
	if _, e := call(t, s, "m", "store.put", map[string]any{"key": "x", "value": 1, "volatile": true, "expiresAtMs": 1_000_001}); e != nil {
		t.Fatalf("1 ms in the future: %v", e)
	}
	advance(4999 * time.Millisecond)
	if g := mustCall(t, s, "m", "store.get", map[string]any{"key": "tok", "volatile": true}); g["found"] != true {
		t.Fatalf("1 ms before expiry: %v", g)
	}
	// Budget is 2 keys (tok, x): x expired already, so a third key fits
	// once the expired one is swept.
	if _, e := call(t, s, "m", "store.put", map[string]any{"key": "y", "value": 1, "volatile": true}); e != nil {
		t.Fatalf("put after an expired key left the budget: %v", e)
	}
	advance(time.Millisecond)
	if g := mustCall(t, s, "m", "store.get", map[string]any{"key": "tok", "volatile": true}); g["found"] != false {
		t.Fatalf("at expiry: %v", g)
	}
	if sc := mustCall(t, s, "m", "store.scan", map[string]any{"volatile": true}); len(sc["entries"].([]any)) != 1 {
		t.Fatalf("scan after expiry %v", sc)
	}
	// An expired key reads as absent to CAS too; the new revision is new.
	m = mustCall(t, s, "m", "store.cas", map[string]any{"key": "tok", "expected": 0, "value": 2, "volatile": true})
	if m["swapped"] != true || num(m, "revision") <= rev {
		t.Fatalf("cas over an expired key %v", m)
	}
}

// The durable namespace survives a reopen (values and revisions, and new
// revisions stay above old ones); the volatile one is gone.
func TestReopenKeepsDurableLosesVolatile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.db")
	s := open(t, path, 0)
	r := num(mustCall(t, s, "m", "store.put", map[string]any{"key": "d", "value": "kept"}), "revision")
	mustCall(t, s, "m", "store.put", map[string]any{"key": "v", "value": "lost", "volatile": true})
	s.Close()
	s = open(t, path, 0)
	defer s.Close()
	if g := mustCall(t, s, "m", "store.get", map[string]any{"key": "d"}); g["value"] != "kept" || num(g, "revision") != r {
		t.Fatalf("durable after reopen %v (revision %d)", g, r)
	}
	if g := mustCall(t, s, "m", "store.get", map[string]any{"key": "v", "volatile": true}); g["found"] != false {
		t.Fatalf("volatile after reopen %v", g)
	}
	if r2 := num(mustCall(t, s, "m", "store.put", map[string]any{"key": "e", "value": 1}), "revision"); r2 <= r {
		t.Fatalf("revision after reopen %d, before %d", r2, r)
	}
}

// A value written before revisions existed (bare JSON) reads with
// revision 1, which no later write reuses.
func TestLegacyValueRevision(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("module:m"))
		if err != nil {
			return err
		}
		return b.Put([]byte("old"), []byte(`{"n":1}`))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s := open(t, path, 0)
	defer s.Close()
	g := mustCall(t, s, "m", "store.get", map[string]any{"key": "old"})
	if b, _ := json.Marshal(g); string(b) != `{"found":true,"revision":1,"value":{"n":1}}` {
		t.Fatalf("legacy get %s", b)
	}
	if r := num(mustCall(t, s, "m", "store.put", map[string]any{"key": "new", "value": 1}), "revision"); r <= legacyRevision {
		t.Fatalf("new revision %d", r)
	}
	if m := mustCall(t, s, "m", "store.cas", map[string]any{"key": "old", "expected": 1, "value": 2}); m["swapped"] != true {
		t.Fatalf("cas on a legacy value %v", m)
	}
	if sc := mustCall(t, s, "m", "store.scan", map[string]any{}); len(sc["entries"].([]any)) != 2 {
		t.Fatalf("scan %v", sc)
	}
}

// The key budget is kept as a count (counted once for a bucket written
// before the count existed): at MaxKeys a new key is refused, a delete
// frees one, and the count's own record is never listed.
func TestDurableKeyCount(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("module:m"))
		if err != nil {
			return err
		}
		b.Put([]byte("old1"), []byte("1"))
		return b.Put([]byte("old2"), []byte("2"))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for round := 0; round < 2; round++ { // the second round reads the stored count after a reopen
		s := open(t, path, 3)
		if round == 0 {
			mustCall(t, s, "m", "store.put", map[string]any{"key": "new", "value": 1})
		}
		if _, e := call(t, s, "m", "store.put", map[string]any{"key": "x", "value": 1}); e == nil || e.DomainCode() != DomainStoreFull {
			t.Fatalf("round %d: 4th key: %v", round, e)
		}
		mustCall(t, s, "m", "store.put", map[string]any{"key": "old1", "value": 5})
		if m := mustCall(t, s, "m", "store.delete", map[string]any{"key": "old1"}); m["deleted"] != true {
			t.Fatal(m)
		}
		if m := mustCall(t, s, "m", "store.delete", map[string]any{"key": "old1"}); m["deleted"] != false {
			t.Fatal(m)
		}
		if m := mustCall(t, s, "m", "store.cas", map[string]any{"key": "old1", "expected": 0, "value": 1}); m["swapped"] != true {
			t.Fatalf("round %d: key after a delete: %v", round, m)
		}
		if _, e := call(t, s, "m", "store.create", map[string]any{"key": "y", "value": 1}); e == nil || e.DomainCode() != DomainStoreFull {
			t.Fatalf("round %d: 4th key by create: %v", round, e)
		}
		for _, prefix := range []string{"", "\x00"} {
			sc := mustCall(t, s, "m", "store.scan", map[string]any{"prefix": prefix})
			ls := mustCall(t, s, "m", "store.list", map[string]any{"prefix": prefix})
			want := 3
			if prefix != "" {
				want = 0
			}
			if len(sc["entries"].([]any)) != want || len(ls["keys"].([]any)) != want {
				t.Fatalf("round %d prefix %q: scan %v list %v", round, prefix, sc, ls)
			}
		}
		s.Close()
	}
}

// Every store call needs no capability and is not an effect
// (docs/POLICY.md, "The module's own store").
func TestStoreCallsAreBookkeeping(t *testing.T) {
	tbl := (*Store)(nil).Table()
	if len(tbl) != 7 {
		t.Fatalf("%d calls", len(tbl))
	}
	for _, hc := range tbl {
		if hc.Capability != hostcalls.CapNone || hc.Audit != hostcalls.AuditBookkeeping || hc.Effect() {
			t.Errorf("%s: capability %q audit %q", hc.Name, hc.Capability, hc.Audit)
		}
	}
}

// The cost of one store host call (decode, work, encode; no wasm):
// go test -run '^$' -bench HostCall ./hostcalls/store/
func BenchmarkHostCall(b *testing.B) {
	s, err := New(Config{Path: filepath.Join(b.TempDir(), "node.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	hc := map[string]hostcalls.HostCall{}
	for _, h := range s.Table() {
		hc[h.Name] = h
	}
	ctx := context.Background()
	for _, vol := range []bool{false, true} {
		name := "durable"
		if vol {
			name = "volatile"
		}
		v := fmt.Sprint(vol)
		for _, c := range []struct{ call, args string }{
			{"store.put", `{"key":"k","value":{"state":"done","exitCode":0},"volatile":` + v + `}`},
			{"store.get", `{"key":"k","volatile":` + v + `}`},
			{"store.cas", `{"key":"k","expected":1,"value":1,"volatile":` + v + `}`}, // a loser: no write
			{"store.scan", `{"prefix":"k","limit":10,"volatile":` + v + `}`},
		} {
			b.Run(name+"/"+c.call, func(b *testing.B) {
				args := []byte(c.args)
				for i := 0; i < b.N; i++ {
					if _, err := hc[c.call].Func(ctx, fakeCall{"m"}, args); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
