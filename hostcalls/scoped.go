package hostcalls

import "io"

// Scoper is implemented by the host's Call: values a family keeps for the
// length of one invocation (open fs handles), closed when the invocation
// ends however it ends (success, error, trap, deadline). A Call that does
// not implement it offers no per-invocation state; families then refuse
// the calls that need it.
type Scoper interface {
	// Scoped returns the value kept under key for this invocation,
	// calling mk to make it on first use. Its Close runs once, when the
	// invocation ends. key is compared with ==; use an unexported type.
	Scoped(key any, mk func() io.Closer) io.Closer
}
