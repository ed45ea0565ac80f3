package host

import (
	"io"

	"lemon/hostcalls"
)

var _ hostcalls.Scoper = (*invocation)(nil)

// Scoped returns the per-invocation value under key, making it with mk
// on first use (hostcalls.Scoper); closeScoped closes every one when the
// invocation ends.
func (inv *invocation) Scoped(key any, mk func() io.Closer) io.Closer {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if v, ok := inv.scoped[key]; ok {
		return v
	}
	if inv.scoped == nil {
		inv.scoped = map[any]io.Closer{}
	}
	v := mk()
	inv.scoped[key] = v
	return v
}

// closeScoped closes the invocation's scoped values (open fs handles).
func (inv *invocation) closeScoped() {
	inv.mu.Lock()
	vs := inv.scoped
	inv.scoped = nil
	inv.mu.Unlock()
	for _, v := range vs {
		v.Close()
	}
}
