package authority

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// cacheTemplates are valid contexts with "RUN" where the runId goes.
var cacheTemplates = []string{
	`{"version":1,"runId":"RUN","attempt":1,"principal":"op","policy":{},"capabilities":[]}`,
	` { "version" : 1 , "runId" : "RUN" , "attempt":2,"parentRunId":"p-1","principal":"ci","provenance":"controller",` +
		`"policy":{"allowed_commands":["make","/usr/bin/git"],"blocked_commands":["rm"],"max_timeout_ms":500},` +
		`"workspace":{"root":"/srv/ws","mode":"read_only"},"capabilities":["read","exec"],"limits":{"maxTimeoutMs":9000}} `,
	`{"capabilities":["write"],"policy":{"allow":["node.fs.*"],"deny":["class:mutation"]},"principal":"a\u00e9","attempt":1,"version":1,"runId":"RUN"}`,
}

// sameParse fails unless the cache gives what a fresh ParseContext gives
// for data: the same context, or an error of the same code. (The cache
// never keeps an error: a refused context is always parsed afresh, and
// ParseContext's choice among several unknown keys varies from call to
// call, so the texts are not compared.)
func sameParse(t *testing.T, c *ContextCache, data string) (ExecutionContext, error) {
	t.Helper()
	want, werr := ParseContext([]byte(data))
	got, gerr := c.Parse([]byte(data))
	if !sameError(werr, gerr) {
		t.Fatalf("%s: cache error %v, parse error %v", data, gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: cache %+v, parse %+v", data, got, want)
	}
	return got, gerr
}

func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ca, oka := a.(*ContextError)
	cb, okb := b.(*ContextError)
	return oka && okb && ca.Code == cb.Code
}

func TestContextCacheIsParseContext(t *testing.T) {
	c := NewContextCache(0)
	runIDs := []string{"inv-1", "inv-2", "a.b_c:d-E9", strings.Repeat("r", MaxIDBytes), // valid, at the bound
		strings.Repeat("r", MaxIDBytes+1), "", "a b", "é", `\u0041`, `a\"b`} // one past, empty, bad bytes, escapes
	for i, tmpl := range cacheTemplates {
		first, err := sameParse(t, c, strings.Replace(tmpl, "RUN", "first", 1))
		if err != nil || first.RunID != "first" {
			t.Fatalf("template %d: %v %q", i, err, first.RunID)
		}
		if c.Len() != i+1 {
			t.Fatalf("template %d: %d entries, want %d", i, c.Len(), i+1)
		}
		for _, id := range runIDs {
			got, err := sameParse(t, c, strings.Replace(tmpl, "RUN", id, 1))
			if err == nil && !strings.Contains(id, `\`) && got.RunID != id {
				t.Fatalf("runId %q: got %q", id, got.RunID)
			}
		}
		// A hit shares no mutable state with what an earlier hit returned.
		a, _ := c.Parse([]byte(strings.Replace(tmpl, "RUN", "x1", 1)))
		b, _ := c.Parse([]byte(strings.Replace(tmpl, "RUN", "x2", 1)))
		if a.RunID != "x1" || b.RunID != "x2" {
			t.Fatalf("runIds %q %q", a.RunID, b.RunID)
		}
	}
	if c.Len() != len(cacheTemplates) {
		t.Fatalf("%d entries, want %d (a refused runId is never stored)", c.Len(), len(cacheTemplates))
	}
}

// Contexts that fail to parse are never stored, and bytes that differ
// from a stored entry anywhere but in the runId's content are parsed.
func TestContextCacheNeverStoresFailures(t *testing.T) {
	c := NewContextCache(0)
	good := strings.Replace(cacheTemplates[0], "RUN", "r1", 1)
	sameParse(t, c, good)
	bad := []string{
		`{"version":1,"runId":"r1","runId":"r2","attempt":1,"principal":"op","policy":{},"capabilities":[]}`,
		`{"version":1,"runId":"r1","attempt":1,"principal":"op","policy":{},"capabilities":[],"x":1}`,
		`{"version":2,"runId":"r1","attempt":1,"principal":"op","policy":{},"capabilities":[]}`,
		`{"version":1,"runId":"r1","attempt":0,"principal":"op","policy":{},"capabilities":[]}`,
		`{"version":1,"runId":"r1","attempt":1,"principal":"op","policy":{"runId":"x"},"capabilities":[]}`,
		`{"version":1,"runId":"r1","attempt":1,"principal":"op","policy":{},"capabilities":[]`,
		`{"version":1,"runId":"r1","attempt":1,"principal":"op","policy":{},"capabilities":[]}x`,
		`{"version":1,"runId":r1,"attempt":1,"principal":"op","policy":{},"capabilities":[]}`,
		`[` + good + `]`, `null`, ``, `{}`,
		`{"version":1,` + strings.Repeat(" ", MaxContextBytes) + `"runId":"r1","attempt":1,"principal":"op","policy":{},"capabilities":[]}`,
	}
	for _, s := range bad {
		for i := 0; i < 2; i++ { // the second time would be a hit had the first been stored
			if _, err := sameParse(t, c, s); err == nil {
				t.Fatalf("%s: parsed", s)
			}
		}
	}
	// Valid, but not of the form the cache keys: parsed every time.
	for _, s := range []string{
		`{"version":1,"run\u0049d":"r1","attempt":1,"principal":"op","policy":{},"capabilities":[]}`,
		`{"version":1,"runId":"r\u0031","attempt":1,"principal":"op","policy":{},"capabilities":[]}`,
	} {
		if _, err := sameParse(t, c, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if c.Len() != 1 {
		t.Fatalf("%d entries after refused contexts, want 1", c.Len())
	}
}

// The cache holds at most its size; the oldest is not special, but every
// lookup still gives ParseContext's answer.
func TestContextCacheBound(t *testing.T) {
	c := NewContextCache(4)
	for i := 0; i < 10; i++ {
		p := strings.Replace(cacheTemplates[0], `"op"`, `"op`+string(rune('a'+i))+`"`, 1)
		sameParse(t, c, strings.Replace(p, "RUN", "r", 1))
		sameParse(t, c, strings.Replace(p, "RUN", "s", 1))
		if c.Len() > 4 {
			t.Fatalf("%d entries, bound 4", c.Len())
		}
	}
	if c.Len() != 4 {
		t.Fatalf("%d entries, want 4", c.Len())
	}
}

// FuzzContextCache: with the cache warmed by valid contexts, any input
// gets exactly ParseContext's answer (context or error text).
func FuzzContextCache(f *testing.F) {
	for _, tmpl := range cacheTemplates {
		f.Add([]byte(strings.Replace(tmpl, "RUN", "seed", 1)))
		f.Add([]byte(strings.Replace(tmpl, "RUN", "zz-9", 1)))
	}
	f.Add([]byte(`{"version":1,"runId":"r","runId":"s"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := NewContextCache(0)
		for _, tmpl := range cacheTemplates {
			if _, err := c.Parse([]byte(strings.Replace(tmpl, "RUN", "warm", 1))); err != nil {
				t.Fatal(err)
			}
		}
		want, werr := ParseContext(data)
		for i := 0; i < 2; i++ {
			got, gerr := c.Parse(data)
			if !sameError(werr, gerr) || !reflect.DeepEqual(got, want) {
				a, _ := json.Marshal(got)
				b, _ := json.Marshal(want)
				t.Fatalf("%q: cache %s %v, parse %s %v", data, a, gerr, b, werr)
			}
		}
	})
}

func BenchmarkContextCacheHit(b *testing.B) {
	c := NewContextCache(0)
	data := []byte(strings.Replace(cacheTemplates[1], "RUN", "inv-123456", 1))
	if _, err := c.Parse(data); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := c.Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

// MaxContextBytes holds on a hit: a context of exactly the bound is a
// hit, the same with a runId one byte longer is refused.
func TestContextCacheSizeBound(t *testing.T) {
	c := NewContextCache(0)
	tmpl := strings.Replace(cacheTemplates[0], "RUN", "RUN", 1)
	pad := MaxContextBytes - (len(tmpl) - len("RUN") + len("r1"))
	tmpl = strings.Replace(tmpl, `"version":1,`, `"version":1,`+strings.Repeat(" ", pad), 1)
	for _, id := range []string{"r1", "r2"} {
		data := strings.Replace(tmpl, "RUN", id, 1)
		if len(data) != MaxContextBytes {
			t.Fatalf("len %d", len(data))
		}
		if ec, err := sameParse(t, c, data); err != nil || ec.RunID != id {
			t.Fatalf("at the bound: %v", err)
		}
	}
	if _, err := sameParse(t, c, strings.Replace(tmpl, "RUN", "r12", 1)); err == nil {
		t.Fatal("one byte past the bound: parsed")
	}
}
