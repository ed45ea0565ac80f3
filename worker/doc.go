// Package worker is the node side: it joins a controller, keeps the
// WebSocket session alive (pings, reconnect with jittered backoff), and
// dispatches node.invoke.request events concurrently into a Dispatcher
// (the wazero host), answering with node.invoke.result.
package worker

import (
	"context"
	"encoding/json"

	"lemon/protocol"
)

// Dispatcher serves node methods. host.Host implements it.
type Dispatcher interface {
	// Methods returns the node methods served and their versions, as
	// advertised in connect.
	Methods() map[string]int
	// Invoke runs one method under ctx (which carries the broker
	// deadline; cancellation is node.invoke.cancel or a disconnect) and
	// returns the success payload or a protocol error.
	Invoke(ctx context.Context, req protocol.InvokeRequest) (json.RawMessage, *protocol.Error)
}

// ModuleReporter is implemented by a Dispatcher built from a module set
// (host.Host): the status of every module of the set, and why a method
// the set declares is not served: UNAVAILABLE module_refused for a
// refused module, FORBIDDEN capability_denied for a method the ceiling
// forbids.
type ModuleReporter interface {
	ModuleStatuses() []protocol.ModuleStatus
	NotServed(method string) (*protocol.Error, bool)
}
