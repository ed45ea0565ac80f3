package spawn

import (
	"lemon/hostcalls"
	"lemon/protocol"
)

// Table returns the spawn host calls (capability exec; docs/HOSTCALLS.md):
// the primitives of prim.go (spawn.start, spawn.wait, spawn.signal,
// spawn.release). Receipts, tombstones, retention and the output cache
// belong to the module that calls them (docs/PROCESS.md, "The receipt
// machine in the module").
func (s *Spawner) Table() hostcalls.Table {
	return s.primTable()
}

func errCwdNotAllowed() *protocol.Error {
	return protocol.DomainError(protocol.CodeForbidden, protocol.DomainPathNotAllowed,
		"cwd is outside the allowed roots").WithRetry(false, false)
}
