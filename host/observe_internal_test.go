package host

import (
	"encoding/json"
	"lemon/protocol"
	"strings"
	"testing"

	"lemon/audit"
)

func TestContextPrincipal(t *testing.T) {
	for in, want := range map[string]string{
		``:                         "",
		`{"principal":"ci"}`:       "ci",
		`{"principal":"a\u0001b"}`: "",
		`{"principal":7}`:          "",
		`not json`:                 "",
		`{"principal":"` + strings.Repeat("p", audit.MaxField) + `"}`:   strings.Repeat("p", audit.MaxField),
		`{"principal":"` + strings.Repeat("p", audit.MaxField+1) + `"}`: "",
	} {
		if got := contextPrincipal(json.RawMessage(in)); got != want {
			t.Errorf("contextPrincipal(%.40q) = %.40q, want %.40q", in, got, want)
		}
	}
}

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
