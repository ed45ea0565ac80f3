package conformance

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"lemon/protocol"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// check compares a response with an expectation.
func check(want Expect, payload json.RawMessage, perr *protocol.Error, vars map[string]string) error {
	if want.OK {
		if perr != nil {
			return fmt.Errorf("want ok, got error %s", perr.Error())
		}
		if len(want.Payload) == 0 {
			return nil
		}
		return matchJSON(want.Payload, payload, vars)
	}
	if perr == nil {
		return fmt.Errorf("want an error, got ok payload %s", truncate(payload))
	}
	if len(want.Error) == 0 {
		return nil
	}
	got, _ := json.Marshal(perr)
	return matchJSON(want.Error, got, vars)
}

func matchJSON(wantRaw, gotRaw []byte, vars map[string]string) error {
	var want, got any
	if err := json.Unmarshal([]byte(expand(string(wantRaw), vars)), &want); err != nil {
		return fmt.Errorf("bad expectation: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(gotRaw))
	dec.UseNumber()
	if err := dec.Decode(&got); err != nil {
		return fmt.Errorf("response is not JSON")
	}
	return match("$", normalize(want), got)
}

// normalize turns float64 from the expectation into json.Number for
// exact integer comparison.
func normalize(v any) any {
	switch x := v.(type) {
	case float64:
		return json.Number(fmt.Sprint(x))
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
	}
	return v
}

func match(path string, want, got any) error {
	switch w := want.(type) {
	case string:
		switch w {
		case "<any>":
			return nil
		case "<null>":
			if got != nil {
				return fmt.Errorf("%s: want null, got %s", path, short(got))
			}
			return nil
		}
		if g, ok := got.(string); !ok || g != w {
			return fmt.Errorf("%s: want %q, got %s", path, w, short(got))
		}
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object, got %s", path, short(got))
		}
		for k, wv := range w {
			gv, present := g[k]
			if wv == "<absent>" {
				if present {
					return fmt.Errorf("%s.%s: want absent, got %s", path, k, short(gv))
				}
				continue
			}
			if !present {
				return fmt.Errorf("%s.%s: missing", path, k)
			}
			if err := match(path+"."+k, wv, gv); err != nil {
				return err
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: want an array of %d, got %s", path, len(w), short(got))
		}
		for i := range w {
			if err := match(fmt.Sprintf("%s[%d]", path, i), w[i], g[i]); err != nil {
				return err
			}
		}
	case nil:
		if got != nil {
			return fmt.Errorf("%s: want null, got %s", path, short(got))
		}
	default:
		wb, _ := json.Marshal(w)
		gb, _ := json.Marshal(got)
		if !bytes.Equal(wb, gb) {
			return fmt.Errorf("%s: want %s, got %s", path, wb, gb)
		}
	}
	return nil
}

func short(v any) string {
	b, _ := json.Marshal(v)
	return truncate(b)
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
