package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/gorilla/websocket"

	"lemon/protocol"
)

// DataBufferBytes is the read and write buffer of a data connection.
const DataBufferBytes = 256 << 10

// DialData opens the caller's side of a bulk data connection
// (docs/PROTOCOL.md, "Bulk data connections"): a WebSocket to the
// controller URL's path plus protocol.DataPath, with this connection's
// dialer (TLS roots, proxies), presenting secret, whose sha256 is the
// transfer request's transferKey. The controller holds it up to
// protocol.TransferWaitMs for the request. The error is safe to print.
func (c *Conn) DialData(ctx context.Context, secret string) (*websocket.Conn, error) {
	u, err := url.Parse(c.url)
	if err != nil {
		return nil, &DialError{URL: redactURL(c.url), Reason: "bad controller URL", Err: err}
	}
	u.Path += protocol.DataPath
	u.RawPath = ""
	d := &websocket.Dialer{Proxy: http.ProxyFromEnvironment}
	if c.opts.Dialer != nil {
		dd := *c.opts.Dialer
		d = &dd
	}
	d.HandshakeTimeout = protocol.TransferWaitMs*time.Millisecond + 5*time.Second
	d.ReadBufferSize, d.WriteBufferSize = DataBufferBytes, DataBufferBytes
	d.EnableCompression = false
	h := http.Header{}
	for k, v := range c.opts.Header {
		h[k] = v
	}
	h.Set(protocol.HeaderTransferKey, secret)
	ws, resp, err := d.DialContext(ctx, u.String(), h)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return nil, &DialError{URL: redactURL(u.String()), Reason: "no transfer request waits for this data connection", Err: ErrNoTransfer}
		}
		return nil, newDialError(u.String(), resp, err)
	}
	return ws, nil
}

// ErrNoTransfer (in a *DialError) says the controller had no transfer
// request for the key within protocol.TransferWaitMs: the request failed,
// or is still held (for an approval), and the dial may be repeated while
// it is pending.
var ErrNoTransfer = errors.New("no transfer request waits for this key")
