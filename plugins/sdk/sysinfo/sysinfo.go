// Package sysinfo is the typed guest wrapper of the sysinfo host call
// (docs/HOSTCALLS.md; capability "hostinfo", list "sysinfo.snapshot" in the
// manifest's HostCalls). Errors are *protocol.Error values.
package sysinfo

import (
	"encoding/json"

	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
)

// Snapshot measures the node (sysinfo.snapshot); a failed measurement is
// UNAVAILABLE naming it.
func Snapshot() (contract.SysinfoSnapshot, error) {
	return sdk.Invoke(sysinfoSnapshot, contract.SysinfoSnapshotCall, contract.Empty{})
}

// SnapshotJSON is Snapshot as the host's JSON, undecoded: the
// node.host.info payload, which a module can return without re-encoding.
func SnapshotJSON() (json.RawMessage, error) {
	var raw json.RawMessage
	if err := sdk.Call(sysinfoSnapshot, contract.Empty{}, &raw); err != nil {
		return nil, err
	}
	return raw, nil
}
