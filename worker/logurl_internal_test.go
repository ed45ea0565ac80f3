package worker

import "testing"

// The connected line names the controller URL without userinfo, query or
// fragment (docs/OPERATIONS.md, "Logs").
func TestLogURLStripsCredentials(t *testing.T) {
	for in, want := range map[string]string{
		"wss://b.example:7777/ws":                   "wss://b.example:7777/ws",
		"wss://user:s3cret@b.example:7777/ws?t=x#f": "wss://b.example:7777/ws",
		"ws://127.0.0.1:7777/ws?":                   "ws://127.0.0.1:7777/ws",
		"ws://%zz":                                  "(invalid URL)",
	} {
		if got := logURL(in); got != want {
			t.Errorf("logURL(%q) = %q, want %q", in, got, want)
		}
	}
}
