package authority

import "sync"

// DefaultContextCacheEntries is a ContextCache's size when NewContextCache
// is given 0.
const DefaultContextCacheEntries = 256

// ContextCache memoises ParseContext for contexts that differ only in
// their runId (docs/RATIONALE.md, "Host fixed cost"): the controller sends
// one operator's context again and again with the request's invokeId as
// runId. An entry is keyed by the exact bytes with the runId string's
// content cut out, and holds the parse of those bytes; a lookup whose
// bytes equal an entry's apart from a runId of the plain form checkID
// accepts (letters, digits, '.', '_', ':', '-'; no escape) returns that
// parse with the new runId, which is what ParseContext returns for them.
// Anything else (no such runId, an escape in it, a second "runId" key,
// more than MaxContextBytes, a miss) is parsed by ParseContext, and only
// a successful parse is stored. Entries are immutable: callers must not
// change the slices of a returned context (no caller does; the type's
// fields are never changed after construction). Safe for concurrent use;
// at most max entries, an arbitrary one evicted when full.
type ContextCache struct {
	mu      sync.Mutex
	max     int
	entries map[string]ExecutionContext // key: bytes without runId's content; RunID ""
}

// NewContextCache returns a cache of at most max entries (0 is
// DefaultContextCacheEntries).
func NewContextCache(max int) *ContextCache {
	if max <= 0 {
		max = DefaultContextCacheEntries
	}
	return &ContextCache{max: max, entries: make(map[string]ExecutionContext, max)}
}

// Len is the number of cached contexts.
func (c *ContextCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Parse is ParseContext(data), from the cache when it can be.
func (c *ContextCache) Parse(data []byte) (ExecutionContext, error) {
	s, e, ok := runIDSpan(data)
	if !ok || len(data) > MaxContextBytes {
		return ParseContext(data)
	}
	var buf [1024]byte
	key := append(append(buf[:0], data[:s]...), data[e:]...)
	c.mu.Lock()
	ec, hit := c.entries[string(key)]
	c.mu.Unlock()
	if hit {
		runID := data[s:e]
		if checkID("runId", string(runID), true) == nil {
			ec.RunID = string(runID)
			return ec, nil
		}
		return ParseContext(data) // the exact error of a fresh parse
	}
	ec, err := ParseContext(data)
	if err != nil {
		return ec, err
	}
	stored := ec
	stored.RunID = ""
	c.mu.Lock()
	if len(c.entries) >= c.max {
		for k := range c.entries {
			delete(c.entries, k)
			break
		}
	}
	c.entries[string(key)] = stored
	c.mu.Unlock()
	return ec, nil
}

// runIDSpan finds, by a structural scan of a top-level JSON object, the
// content [s, e) of the string value of its key spelled exactly "runId".
// ok is false when the data is not an object the scan can follow, the key
// is absent or given twice, or the value is not a string without escapes.
// The scan does not validate JSON (ParseContext does); it only has to
// find the same span in bytes that are equal outside it, which it does
// because each step depends only on the bytes before it.
func runIDSpan(d []byte) (s, e int, ok bool) {
	i := skipWS(d, 0)
	if i >= len(d) || d[i] != '{' {
		return 0, 0, false
	}
	i = skipWS(d, i+1)
	found := false
	if i < len(d) && d[i] == '}' {
		return 0, 0, false
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return 0, 0, false
		}
		ke, escaped := scanString(d, i+1)
		if ke < 0 {
			return 0, 0, false
		}
		isRunID := !escaped && string(d[i+1:ke]) == "runId"
		i = skipWS(d, ke+1)
		if i >= len(d) || d[i] != ':' {
			return 0, 0, false
		}
		i = skipWS(d, i+1)
		if isRunID {
			if found || i >= len(d) || d[i] != '"' {
				return 0, 0, false
			}
			ve, esc := scanString(d, i+1)
			if ve < 0 || esc {
				return 0, 0, false
			}
			s, e, found = i+1, ve, true
			i = ve + 1
		} else if i = skipValue(d, i); i < 0 {
			return 0, 0, false
		}
		i = skipWS(d, i)
		if i >= len(d) {
			return 0, 0, false
		}
		switch d[i] {
		case ',':
			i = skipWS(d, i+1)
		case '}':
			if skipWS(d, i+1) != len(d) {
				return 0, 0, false
			}
			return s, e, found
		default:
			return 0, 0, false
		}
	}
}

func skipWS(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the index of the closing quote of the string whose
// content starts at i (-1 if none) and whether it holds an escape.
func scanString(d []byte, i int) (int, bool) {
	escaped := false
	for i < len(d) {
		switch d[i] {
		case '"':
			return i, escaped
		case '\\':
			escaped = true
			i += 2
			continue
		}
		i++
	}
	return -1, escaped
}

// skipValue returns the index after the value starting at i (-1 if the
// scan cannot follow it).
func skipValue(d []byte, i int) int {
	depth := 0
	for i < len(d) {
		switch c := d[i]; c {
		case '"':
			end, _ := scanString(d, i+1)
			if end < 0 {
				return -1
			}
			i = end + 1
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // a scalar ended by its container
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	if depth == 0 {
		return i
	}
	return -1
}
