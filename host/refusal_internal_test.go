package host

import (
	"errors"
	"strings"
	"testing"
)

// A refusal's status line is at most MaxReasonBytes of printable ASCII,
// whatever its detail holds; errors.Is still sees ErrModuleRejected.
func TestRefusalStatusBounded(t *testing.T) {
	err := refuse(ReasonImportsNotDeclared, "module x imports %q", strings.Repeat("é\n", 300))
	s := ReasonOf(err)
	if len(s) != MaxReasonBytes || !strings.HasPrefix(s, "imports_not_declared: module x imports") {
		t.Fatalf("status (%d bytes) = %q", len(s), s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			t.Fatalf("byte %d of the status is %#x", i, s[i])
		}
	}
	short := refuse(ReasonCompileFailed, "compile failed")
	if got := ReasonOf(short); got != "compile_failed: compile failed" {
		t.Fatalf("status = %q", got)
	}
	if !errors.Is(err, ErrModuleRejected) || errors.Is(err, ErrHostCallUnavailable) {
		t.Fatal("RefusalError does not unwrap as documented")
	}
	if !errors.Is(refuse(ReasonHostCallUnavailable, "needs vault.set"), ErrHostCallUnavailable) {
		t.Fatal("hostcall_unavailable does not unwrap to ErrHostCallUnavailable")
	}
	if got := ReasonOf(errors.New("other")); got != ReasonManifestInvalid {
		t.Fatalf("ReasonOf(other) = %q", got)
	}
}

// A module declares at most 16 capabilities, each a well-formed name; its
// own names (kv) are as valid as the built-in ones.
func TestDeclaredCapabilitiesBounds(t *testing.T) {
	names := func(n int) []string {
		out := []string{"kv"}
		for i := 1; i < n; i++ {
			out = append(out, "c"+strings.Repeat("x", i))
		}
		return out
	}
	caps, err := declaredCapabilities(Manifest{Family: "kv", Capabilities: names(16)})
	if err != nil || len(caps) != 16 || !caps["kv"] {
		t.Fatalf("16 names: %v %v", caps, err)
	}
	if _, err := declaredCapabilities(Manifest{Family: "kv", Capabilities: names(17)}); ReasonOf(err) != "manifest_invalid: module kv declares 17 capabilities (at most 16)" {
		t.Fatalf("17 names: %v", err)
	}
	for _, bad := range []string{"all", "Kv", "kv.get", ""} {
		if _, err := declaredCapabilities(Manifest{Family: "kv", Capabilities: []string{bad}}); err == nil ||
			!strings.HasPrefix(ReasonOf(err), ReasonManifestInvalid) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
