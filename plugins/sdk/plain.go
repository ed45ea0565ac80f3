package sdk

// PlainStrings is a fast path for params of the plain shape most clients
// send: one JSON object whose members are all strings, no white space
// between tokens, each value only printable ASCII other than \ and " (so
// no escapes), each key one of keys and at most once. It sets vals[i] to
// the value of keys[i] and bit i of present when that member is there,
// and reports ok. Anything else is not ok, and the caller decodes
// strictly (Request.Decode), which answers such input exactly as
// protocol.DecodeParams does; for input PlainStrings accepts, it gives
// what that decode gives. At most 64 keys; vals has len(keys) entries.
// Modules use it where the SDK codec's cost matters (the secrets and
// hostinfo modules; docs/BENCHMARKS.md, "Module ABI (issue 11)").
func PlainStrings(b []byte, keys []string, vals []string) (present uint64, ok bool) {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' || len(keys) > 64 || len(vals) < len(keys) {
		return 0, false
	}
	if b[1] == '}' {
		return 0, len(b) == 2
	}
	for i := 1; ; {
		key, n, kok := plainString(b, i)
		if !kok || n >= len(b) || b[n] != ':' {
			return 0, false
		}
		val, m, vok := plainString(b, n+1)
		if !vok || m >= len(b) {
			return 0, false
		}
		k := -1
		for j, want := range keys {
			if string(key) == want {
				k = j
				break
			}
		}
		if k < 0 || present&(1<<k) != 0 {
			return 0, false
		}
		present |= 1 << k
		vals[k] = string(val)
		switch b[m] {
		case ',':
			i = m + 1
		case '}':
			return present, m+1 == len(b)
		default:
			return 0, false
		}
	}
}

// plainString reads a JSON string at b[i] holding only printable ASCII
// other than \ and returns its bytes and the index after it.
func plainString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		c := b[j]
		if c == '"' {
			return b[i+1 : j], j + 1, true
		}
		if c < 0x20 || c >= 0x7f || c == '\\' {
			return nil, 0, false
		}
	}
	return nil, 0, false
}
