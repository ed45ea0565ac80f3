package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
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
	return &DialError{URL: redactURL(rawURL), Reason: classify(rawURL, resp, err), Err: err}
}

// Reasons for TLS failures; each names what to do about it
// (docs/DEPLOY.md, "TLS").
const (
	ReasonUnknownCA = "TLS certificate signed by an unknown authority: pass its CA with --ca-file or " + EnvCAFile +
		" (lemon tls dev prints it)"
	ReasonWrongHost   = "TLS certificate is not valid for this host name: dial a name the certificate lists, or reissue it with that name"
	ReasonExpired     = "TLS certificate has expired or is not yet valid (check the clocks, or reissue it)"
	ReasonBadCert     = "TLS certificate rejected"
	ReasonWantWSS     = "the controller serves TLS: use wss:// instead of ws://"
	ReasonWantWS      = "the controller does not serve TLS: use ws:// on loopback, or start it with --tls-cert and --tls-key"
	reasonHTTPSServer = "HTTP request to an HTTPS server"
)

func classify(rawURL string, resp *http.Response, err error) string {
	var (
		dnsErr *net.DNSError
		opErr  *net.OpError
		recErr tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, websocket.ErrBadHandshake) && resp != nil:
		if resp.StatusCode == http.StatusBadRequest && strings.HasPrefix(strings.ToLower(rawURL), "ws:") && sentHTTPToHTTPS(resp) {
			return ReasonWantWSS
		}
		return "upgrade refused with HTTP status " + strconv.Itoa(resp.StatusCode)
	case errors.Is(err, websocket.ErrBadHandshake):
		return "upgrade refused"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &recErr):
		// A TLS client that got a non-TLS answer (a plain HTTP server).
		return ReasonWantWS
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		// A controller at its cap on unauthenticated connections closes
		// new sockets unanswered.
		return "connection closed by the controller before the upgrade (it may be at its connection limit)"
	case errors.As(err, &dnsErr):
		return "host name not found"
	}
	if r := classifyX509(err); r != "" {
		return r
	}
	switch {
	case errors.As(err, &opErr) && opErr.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return "connection timed out"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case err != nil && err.Error() == "malformed ws or wss URL":
		return "malformed URL (want ws:// or wss://)"
	}
	return "cannot connect"
}

// classifyX509 names a certificate verification failure, or returns "".
// crypto/x509 returns its errors as values; both the value and the pointer
// form are matched.
func classifyX509(err error) string {
	var (
		uaV x509.UnknownAuthorityError
		uaP *x509.UnknownAuthorityError
		hnV x509.HostnameError
		hnP *x509.HostnameError
		ciV x509.CertificateInvalidError
		ciP *x509.CertificateInvalidError
		cvE *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &uaV), errors.As(err, &uaP):
		return ReasonUnknownCA
	case errors.As(err, &hnV), errors.As(err, &hnP):
		return ReasonWrongHost
	case errors.As(err, &ciV) && ciV.Reason == x509.Expired,
		errors.As(err, &ciP) && ciP.Reason == x509.Expired:
		return ReasonExpired
	case errors.As(err, &ciV), errors.As(err, &ciP), errors.As(err, &cvE):
		return ReasonBadCert
	}
	return ""
}

// TrustFailure reports whether err is a TLS set-up failure an operator
// must fix (an untrusted, misnamed or expired certificate, ws:// against
// TLS or wss:// against plain, an unusable CA file) rather than a
// transient one. Nodes log these at warn.
func TrustFailure(err error) bool {
	if errors.Is(err, ErrCAFile) {
		return true
	}
	var de *DialError
	if !errors.As(err, &de) {
		return false
	}
	switch de.Reason {
	case ReasonUnknownCA, ReasonWrongHost, ReasonExpired, ReasonBadCert, ReasonWantWSS, ReasonWantWS:
		return true
	}
	return false
}

// sentHTTPToHTTPS reports whether resp is net/http's answer to plain HTTP
// on a TLS listener. gorilla/websocket keeps the first 1 KiB of the body.
func sentHTTPToHTTPS(resp *http.Response) bool {
	if resp.Body == nil {
		return false
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return strings.Contains(string(b), reasonHTTPSServer)
}
