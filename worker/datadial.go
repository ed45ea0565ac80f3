package worker

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/gorilla/websocket"

	"lemon/hostcalls/datadial"
	"lemon/protocol"
)

// dataDialer returns the DataDialer of this worker: a WebSocket to the
// controller's data endpoint (the controller URL's path plus
// protocol.DataPath), with the worker's own dialer (TLS roots, proxies) and
// the ticket in a header (docs/PROTOCOL.md, "Bulk data connections").
func (w *Worker) dataDialer() datadial.DataDialer {
	return func(ctx context.Context, ticket string) (*websocket.Conn, error) {
		u, err := url.Parse(w.cfg.ControllerURL)
		if err != nil {
			return nil, err
		}
		u.Path += protocol.DataPath
		u.RawPath = ""
		d := websocket.DefaultDialer
		if w.cfg.Dialer != nil {
			d = w.cfg.Dialer
		}
		dd := *d
		dd.HandshakeTimeout = 10 * time.Second
		dd.ReadBufferSize, dd.WriteBufferSize = 256<<10, 256<<10
		dd.EnableCompression = false
		conn, resp, err := dd.DialContext(ctx, u.String(), http.Header{protocol.HeaderTransferTicket: {ticket}})
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		return conn, err
	}
}
