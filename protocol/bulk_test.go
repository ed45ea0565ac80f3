package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestValidTransferSecretBounds(t *testing.T) {
	for s, want := range map[string]bool{
		strings.Repeat("a", 64): true, strings.Repeat("0", 64): true,
		strings.Repeat("a", 63): false, strings.Repeat("a", 65): false,
		strings.Repeat("A", 64): false, strings.Repeat("g", 64): false, "": false,
	} {
		if got := ValidTransferSecret(s); got != want {
			t.Errorf("ValidTransferSecret(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestValidTreeNameBounds(t *testing.T) {
	c255, c256 := strings.Repeat("n", 255), strings.Repeat("n", 256)
	long := strings.Repeat(strings.Repeat("n", 127)+"/", 31) + strings.Repeat("n", 128) // 4096 bytes
	for name, want := range map[string]bool{
		"a": true, "a/b.txt": true, c255: true, c256: false,
		long: true, long + "x": false,
		"": false, "/a": false, "a//b": false, "a/./b": false, "a/../b": false, "..": false, "a/": false, "a\x00b": false, "\xff": false,
	} {
		if got := ValidTreeName(name); got != want {
			t.Errorf("ValidTreeName(%.40q… %d bytes) = %v, want %v", name, len(name), got, want)
		}
	}
}

func TestValidateFSTransferBounds(t *testing.T) {
	key := strings.Repeat("a", 64)
	obj := func(m map[string]any) json.RawMessage {
		m["nodeId"], m["path"], m["transferKey"] = "n", "a", key
		b, _ := json.Marshal(m)
		return b
	}
	cases := []struct {
		get   bool
		p     map[string]any
		field string // "" = accepted
	}{
		{false, map[string]any{"size": FSMaxOffset, "mode": 0o1777}, ""},
		{false, map[string]any{"size": 1, "mode": 0o2000}, "mode"},
		{false, map[string]any{"size": FSMaxOffset + 1}, "size"},
		{false, map[string]any{"size": 1, "mode": 0o7777 + 1}, "mode"},
		{false, map[string]any{"tree": true}, ""},
		{false, map[string]any{"tree": true, "size": 1}, "tree"},
		{false, map[string]any{"size": 1, "dataTicket": "x"}, "dataTicket"},
		{true, map[string]any{}, ""},
		{true, map[string]any{"offset": 1, "prefixSha256": key}, ""},
		{true, map[string]any{"offset": 1}, "prefixSha256"},
		{true, map[string]any{"offset": -1}, "offset"},
		{true, map[string]any{"tree": true, "offset": 1, "prefixSha256": key}, "offset"},
	}
	for i, c := range cases {
		v := ValidateFSTransferPut
		if c.get {
			v = ValidateFSTransferGet
		}
		e := v(obj(c.p))
		switch {
		case c.field == "" && e != nil:
			t.Errorf("case %d: refused: %v", i, e)
		case c.field != "" && (e == nil || e.Details == nil || e.Details.Field != c.field):
			t.Errorf("case %d: got %v, want INVALID_PARAMS on %s", i, e, c.field)
		}
	}
	if e := ValidateFSTransferGet(json.RawMessage(`{"nodeId":"n","path":"a"}`)); e == nil || e.Details.Field != "transferKey" {
		t.Errorf("missing transferKey: %v", e)
	}
}
