package guestcall

import "testing"

func TestSafeText(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"plain é", 100, "plain é"},
		{"a\nb\tc\x1b[0m\x7f", 100, `a\nb\tc\x1b[0m\x7f`},
		{"\u202eevil\u200b", 100, `\u202eevil\u200b`},
		{"back\\slash", 100, `back\\slash`},
		{"bad\xffbyte", 100, `bad\xffbyte`},
		{"\u2028", 100, `\u2028`},
		// Cut at max bytes, never inside an escape or a rune.
		{"abc\ndef", 4, "abc"},
		{"abc\ndef", 5, `abc\n`},
		{"éé", 3, "é"},
	} {
		if got := SafeText(c.in, c.max); got != c.want {
			t.Errorf("SafeText(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func TestTruncate(t *testing.T) {
	if got := Truncate("aé", 2); got != "a" {
		t.Fatalf("Truncate cut inside a rune: %q", got)
	}
	if got := Truncate("abc", 3); got != "abc" {
		t.Fatalf("Truncate at the limit changed the text: %q", got)
	}
}
