package hostcalls

import (
	"strings"
	"testing"
)

// Capability names match CapabilityPattern: 1..32 bytes, a lower-case
// letter first; "all" is reserved; a ceiling holds at most 64 names.
func TestCheckCapability(t *testing.T) {
	for _, ok := range []string{"kv", "checksum", "read", "a", "a" + strings.Repeat("b_9", 10) + "c"} {
		if err := CheckCapability(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	if n := len("a" + strings.Repeat("b_9", 10) + "c"); n != 32 {
		t.Fatalf("boundary name is %d bytes", n)
	}
	for _, bad := range []string{"", "all", "KV", "9kv", "_kv", "fs.read", "kv-x", "a" + strings.Repeat("b", 32), "kv\n"} {
		if err := CheckCapability(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if err := CheckCapability(strings.Repeat("\x1b", 100)); err == nil || strings.Contains(err.Error(), "\x1b") {
		t.Errorf("unprintable name echoed: %v", err)
	}
	names := make([]string, MaxCeilingCapabilities)
	for i := range names {
		names[i] = "c" + strings.Repeat("x", i%30) + string(rune('a'+i/30))
	}
	if err := CheckCeiling(names); err != nil {
		t.Fatalf("64 names: %v", err)
	}
	if err := CheckCeiling(append(names, "onemore")); err == nil {
		t.Fatal("65 names accepted")
	}
	if err := CheckCeiling([]string{CapAll}); err != nil {
		t.Fatalf("all: %v", err)
	}
}
