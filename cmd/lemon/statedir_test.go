package main

import "testing"

func TestDefaultControllerState(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		euid int
		want string
	}{
		{"systemd", map[string]string{"STATE_DIRECTORY": "/var/lib/lemon-x", "XDG_STATE_HOME": "/x", "HOME": "/h"}, 0, "/var/lib/lemon-x"},
		{"systemd list", map[string]string{"STATE_DIRECTORY": "/var/lib/a:/var/lib/b"}, 1000, "/var/lib/a"},
		{"systemd relative ignored", map[string]string{"STATE_DIRECTORY": "rel", "HOME": "/h"}, 1000, "/h/.local/state/lemon"},
		{"xdg", map[string]string{"XDG_STATE_HOME": "/x/state", "HOME": "/h"}, 0, "/x/state/lemon"},
		{"xdg relative ignored", map[string]string{"XDG_STATE_HOME": "state", "HOME": "/h"}, 1000, "/h/.local/state/lemon"},
		{"root", map[string]string{"HOME": "/root"}, 0, "/var/lib/lemon"},
		{"user", map[string]string{"HOME": "/home/u"}, 1000, "/home/u/.local/state/lemon"},
	}
	for _, tc := range cases {
		got, err := defaultControllerState(func(k string) string { return tc.env[k] }, tc.euid)
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if got, err := defaultControllerState(func(string) string { return "" }, 1000); err == nil {
		t.Fatalf("no HOME: %q, want an error", got)
	}
}
