// Package sysinfo is the typed guest wrapper of the sysinfo host call
// (docs/HOSTCALLS.md; capability "hostinfo", list "sysinfo.snapshot" in the
// manifest's HostCalls). Errors are *protocol.Error values.
package sysinfo

import (
	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
)

// Snapshot measures the node (sysinfo.snapshot): raw figures, which the
// module shapes (plugins/hostinfo/shape makes the node.host.info payload).
// A failed measurement is UNAVAILABLE naming it.
func Snapshot() (contract.SysinfoFigures, error) {
	return sdk.Invoke(sysinfoSnapshot, contract.SysinfoSnapshotCall, contract.Empty{})
}
