package worker

import (
	"errors"
	"net"
	"net/url"
	"strings"
)

// ErrInsecureController is returned for ws:// to a host that is not
// loopback without the explicit opt-in.
var ErrInsecureController = errors.New("worker: plaintext ws:// is allowed only to a loopback controller; use wss:// or --allow-insecure-controller (LEMON_NODE_ALLOW_INSECURE_CONTROLLER=true)")

// CheckControllerURL validates a controller URL (docs/PROTOCOL.md, "Transport"): the scheme
// is wss, or ws to a loopback host (localhost, 127.0.0.0/8, ::1), or ws
// anywhere when allowInsecure is set. It never echoes the URL, which may
// carry credentials.
func CheckControllerURL(raw string, allowInsecure bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Hostname() == "" {
		return errors.New("worker: controller URL must look like wss://HOST/ws")
	}
	if u.User != nil {
		return errors.New("worker: controller URL must not carry credentials; use LEMON_NODE_TOKEN")
	}
	switch strings.ToLower(u.Scheme) {
	case "wss":
		return nil
	case "ws":
		if allowInsecure || IsLoopbackHost(u.Hostname()) {
			return nil
		}
		return ErrInsecureController
	}
	return errors.New("worker: controller URL scheme must be ws:// or wss://")
}

// IsLoopbackHost reports whether host (no port) names the loopback
// interface: "localhost" or a loopback IP literal.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
