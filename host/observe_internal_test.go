package host

import (
	"testing"

	"lemon/protocol"
)

func TestInvocationOutcomeBounded(t *testing.T) {
	for _, c := range []struct {
		e    *protocol.Error
		want string
	}{
		{nil, "ok"},
		{protocol.Errorf(protocol.CodeNotFound, "x"), protocol.CodeNotFound},
		{&protocol.Error{Code: "CANARY_/etc/passwd"}, "other"},
	} {
		if got := invocationOutcome(c.e); got != c.want {
			t.Errorf("invocationOutcome(%v) = %q, want %q", c.e, got, c.want)
		}
	}
}
