package client

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"

	"github.com/gorilla/websocket"
)

// DialError is a transport failure. Error() is safe to show an operator:
// it names the controller URL (without credentials or query) and a bounded
// reason; the underlying error, which may carry OS detail, is only
// reachable through Unwrap.
type DialError struct {
	URL    string // scheme://host/path, no userinfo or query
	Reason string // bounded classification, e.g. "connection refused"
	Err    error
}

func (e *DialError) Error() string {
	if e.URL == "" {
		return "controller: " + e.Reason
	}
	return "controller " + e.URL + ": " + e.Reason
}

func (e *DialError) Unwrap() error { return e.Err }

// redactURL keeps scheme, host and path of a URL.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(malformed URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// newDialError classifies a failed WebSocket dial.
func newDialError(rawURL string, resp *http.Response, err error) *DialError {
	return &DialError{URL: redactURL(rawURL), Reason: classify(resp, err), Err: err}
}

func classify(resp *http.Response, err error) string {
	var (
		dnsErr  *net.DNSError
		certErr *x509.UnknownAuthorityError
		hostErr x509.HostnameError
		opErr   *net.OpError
	)
	switch {
	case errors.Is(err, websocket.ErrBadHandshake) && resp != nil:
		return "upgrade refused with HTTP status " + strconv.Itoa(resp.StatusCode)
	case errors.Is(err, websocket.ErrBadHandshake):
		return "upgrade refused"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		// A controller at its cap on unauthenticated connections closes
		// new sockets unanswered.
		return "connection closed by the controller before the upgrade (it may be at its connection limit)"
	case errors.As(err, &dnsErr):
		return "host name not found"
	case errors.As(err, &certErr), errors.As(err, &hostErr):
		return "TLS certificate not trusted"
	case errors.As(err, &opErr) && opErr.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return "connection timed out"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case err != nil && err.Error() == "malformed ws or wss URL":
		return "malformed URL (want ws:// or wss://)"
	}
	return "cannot connect"
}
