// Package spawn is the typed guest wrapper of the spawn host calls
// (docs/HOSTCALLS.md): native processes under the worker policy, as
// primitives with no receipt (the process module keeps receipts in its
// store). All need capability "exec"; list the calls used in the
// manifest's HostCalls. A run in progress is a suspension: return
// sdk.Suspend{Handle} and call Wait on resume. Errors are
// *protocol.Error values.
package spawn

import (
	"lemon/hostcalls/contract"
	"lemon/plugins/sdk"
)

// The spawn primitives (docs/PROCESS.md, "Spawn primitives"): a process as
// an effect, with no receipt. The host keeps the limits, the command
// policy, confinement, containment, one group signal per run and
// ownership by principal; idempotence and retention are the caller's.

// Start starts argv in cwd with stdin from input blob stdinBlob
// (spawn.start): the run id, and a Handle to suspend on
// (sdk.Suspend{Handle}) until the run ends; then call Wait.
func Start(args contract.SpawnStartArgs) (contract.SpawnStartResult, error) {
	return sdk.Invoke(spawnStart, contract.SpawnStart, args)
}

// Wait reports how run ended (spawn.wait): State contract.SpawnExited
// with Exit (exit status or signal, stop reason, times, output blobs),
// contract.SpawnRunning with a Handle to suspend on, or
// contract.SpawnUnknown when this worker has no such run.
func Wait(run string) (contract.SpawnWaitResult, error) {
	return sdk.Invoke(spawnWait, contract.SpawnWait, contract.SpawnRunRef{Run: run})
}

// Signal stops run (spawn.signal): its group gets one SIGKILL, never a
// second. Outcome is contract.SpawnSignalSent, SpawnSignalGone,
// SpawnSignalAlready, SpawnExited or SpawnUnknown.
func Signal(run string) (contract.SpawnSignalResult, error) {
	return sdk.Invoke(spawnSignal, contract.SpawnSignal, contract.SpawnRunRef{Run: run})
}

// Release forgets ended run and its output (spawn.release); Released is
// false when this worker has no such ended run. The host keeps at most the
// 64 most recent ended runs of each principal until they are released
// (and 1,024 runs or 64 MiB of output on the node; docs/PROCESS.md, "Spawn
// primitives").
func Release(run string) (contract.SpawnReleaseResult, error) {
	return sdk.Invoke(spawnRelease, contract.SpawnRelease, contract.SpawnRunRef{Run: run})
}
