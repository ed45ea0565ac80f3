package log

import (
	"encoding/json"
	"testing"
)

// The hand encoder agrees with encoding/json on every byte value.
func TestAppendJSONString(t *testing.T) {
	var all []byte
	for c := 0; c < 256; c++ {
		all = append(all, byte(c))
	}
	for _, s := range []string{"", "plain", `q"uote\\back`, "line\nbreak\x1b[31m\x7f", "é\u202e", string(all)} {
		var got string
		if err := json.Unmarshal(appendJSONString(nil, s), &got); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		var want string
		b, _ := json.Marshal(s)
		json.Unmarshal(b, &want)
		if got != want {
			t.Fatalf("%q decodes to %q, encoding/json's to %q", s, got, want)
		}
	}
}
