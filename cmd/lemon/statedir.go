package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// envStateDirectory is set by systemd for a unit with StateDirectory=
// (deploy/lemon-controller.service); it may list several directories
// separated by ':' and the first is ours.
const envStateDirectory = "STATE_DIRECTORY"

// geteuid is os.Geteuid; tests change it.
var geteuid = os.Geteuid

// systemStateDir is the controller's state directory when it runs as root
// outside systemd.
const systemStateDir = "/var/lib/lemon"

// defaultControllerState is where the controller keeps its durable store
// when neither --state, the policy's state_dir nor --memory says
// (docs/DEPLOY.md, "State directory"), in this order:
//
//  1. $STATE_DIRECTORY (its first entry), as systemd sets it;
//  2. $XDG_STATE_HOME/lemon;
//  3. /var/lib/lemon when running as root (euid 0);
//  4. $HOME/.local/state/lemon.
//
// Relative values are ignored, as the XDG specification asks. It returns
// an error only when none applies (no absolute HOME).
func defaultControllerState(getenv func(string) string, euid int) (string, error) {
	if sd, _, _ := strings.Cut(getenv(envStateDirectory), ":"); filepath.IsAbs(sd) {
		return filepath.Clean(sd), nil
	}
	if x := getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "lemon"), nil
	}
	if euid == 0 {
		return systemStateDir, nil
	}
	if h := getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", "lemon"), nil
	}
	return "", errors.New("no state directory: HOME is not set; pass --state DIR, or --memory to keep state in memory only")
}
