package protocol

import (
	"encoding/json"
	"sort"
	"sync"
	"time"
)

// MethodSpec describes one node method for every side: the scope it needs,
// how its params are validated (the controller before dispatch, the node
// again), and its broker deadline. Each family registers its methods from
// an init func in its own file (hostinfo.go, fs.go, process.go, secrets.go).
type MethodSpec struct {
	// Name is the spec method name, e.g. "node.fs.read".
	Name string
	// Version is the method version a node must advertise to receive it.
	Version int
	// Validate checks params strictly (unknown fields, types, limits). It
	// returns an INVALID_PARAMS *Error naming the field, never its value.
	Validate func(params json.RawMessage) *Error
	// Deadline returns the broker deadline for these (already validated)
	// params; nil means DefaultTimeoutMs.
	Deadline func(params json.RawMessage) time.Duration
	// CallerSlack is added to the broker deadline for the caller's await
	// (node.process.run: 1000 ms).
	CallerSlack time.Duration
	// NoGenericInvoke refuses the method through the generic node.invoke.
	NoGenericInvoke bool
	// RecheckSession, when it returns true for the params, makes the
	// controller verify after the node's reply that the same connection
	// and session generation still serve the node; if not, the caller gets
	// CONFLICT private_proof_acknowledgement_changed instead of success.
	RecheckSession func(params json.RawMessage) bool
}

var (
	methodsMu sync.RWMutex
	methods   = map[string]MethodSpec{}
)

// RegisterMethod adds a method spec; it panics on a duplicate name, which
// is a programming error caught by any test.
func RegisterMethod(s MethodSpec) {
	methodsMu.Lock()
	defer methodsMu.Unlock()
	if _, dup := methods[s.Name]; dup {
		panic("protocol: method registered twice: " + s.Name)
	}
	methods[s.Name] = s
}

// LookupMethod returns the spec of a node method.
func LookupMethod(name string) (MethodSpec, bool) {
	methodsMu.RLock()
	defer methodsMu.RUnlock()
	s, ok := methods[name]
	return s, ok
}

// MethodNames lists the registered node methods, sorted.
func MethodNames() []string {
	methodsMu.RLock()
	defer methodsMu.RUnlock()
	out := make([]string, 0, len(methods))
	for n := range methods {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// BrokerDeadline is the deadline the controller gives the node for params.
func (s MethodSpec) BrokerDeadline(params json.RawMessage) time.Duration {
	if s.Deadline != nil {
		return s.Deadline(params)
	}
	return DefaultTimeoutMs * time.Millisecond
}
