package host

import (
	"encoding/json"
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
