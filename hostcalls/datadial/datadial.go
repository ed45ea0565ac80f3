// Package datadial carries the node's bulk data-connection dialer from the
// worker to the fs host calls in a request's context.
package datadial

import (
	"context"

	"github.com/gorilla/websocket"
)

// DataDialer opens the node's side of a bulk data connection: a WebSocket
// to the controller's data endpoint presenting ticket (docs/PROTOCOL.md,
// "Bulk data connections"). The worker puts one in each request's context
// (WithDataDialer); the fs.send and fs.receive host calls use it.
type DataDialer func(ctx context.Context, ticket string) (*websocket.Conn, error)

type dataDialerKey struct{}

// WithDataDialer returns ctx carrying d.
func WithDataDialer(ctx context.Context, d DataDialer) context.Context {
	return context.WithValue(ctx, dataDialerKey{}, d)
}

// From returns the dialer ctx carries, or nil.
func From(ctx context.Context) DataDialer {
	d, _ := ctx.Value(dataDialerKey{}).(DataDialer)
	return d
}
